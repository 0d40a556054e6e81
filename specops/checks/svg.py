"""Small inline SVG charts (no JavaScript, no external CSS): bars, lines, grouped bars, scatter."""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

W, H = 560, 260
L, R, T, B = 56, 16, 34, 44  # margins
COLORS = ("#2563eb", "#f97316", "#16a34a", "#9333ea")


def _open(title: str, w: int, h: int) -> list[str]:
    """The <svg> element, its white background and the title."""
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
            f'role="img" aria-label="{escape(title)}">',
            f'<rect width="{w}" height="{h}" fill="#ffffff"/>',
            f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14" font-weight="bold">{escape(title)}</text>']


def _axis_lines(w: int, h: int, ylabel: str) -> list[str]:
    """The y and x axes of a plot box w × h and the rotated y label."""
    return [f'<line x1="{L}" y1="{T}" x2="{L}" y2="{h - B}" stroke="#374151"/>',
            f'<line x1="{L}" y1="{h - B}" x2="{w - R}" y2="{h - B}" stroke="#374151"/>',
            f'<text x="14" y="{(T + h - B) / 2}" font-size="11" transform="rotate(-90 14 {(T + h - B) / 2})" '
            f'text-anchor="middle">{escape(ylabel)}</text>']


def _frame(title: str, ymax: float, ylabel: str) -> list[str]:
    out = _open(title, W, H)
    for i in range(5):
        v = ymax * i / 4
        y = _y(v, ymax)
        out.append(f'<line x1="{L}" y1="{y:.1f}" x2="{W - R}" y2="{y:.1f}" stroke="#e5e7eb"/>')
        out.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{_fmt(v)}</text>')
    return out + _axis_lines(W, H, ylabel)


def _fmt(v: float) -> str:
    return f"{v:.2f}" if v < 10 else f"{v:.0f}"


def _y(v: float, ymax: float) -> float:
    return H - B - (H - B - T) * (v / ymax if ymax else 0)


def _hlines(hlines: list[tuple[str, float]], ymax: float) -> list[str]:
    out = []
    for i, (label, v) in enumerate(hlines):
        y = _y(min(v, ymax), ymax)
        x = W - R - 4 - 150 * i
        out.append(f'<line x1="{L}" y1="{y:.1f}" x2="{W - R}" y2="{y:.1f}" stroke="#dc2626" stroke-dasharray="5,4"/>')
        out.append(f'<text x="{x}" y="{y - 4:.1f}" text-anchor="end" font-size="11" fill="#dc2626">'
                   f'{escape(label)} {v:.2f}</text>')
    return out


def _legend(names: list[str]) -> list[str]:
    out = []
    for i, n in enumerate(names):
        x = L + 8 + i * 150
        out.append(f'<rect x="{x}" y="{H - 14}" width="10" height="10" fill="{COLORS[i % len(COLORS)]}"/>')
        out.append(f'<text x="{x + 14}" y="{H - 5}" font-size="11">{escape(n)}</text>')
    return out


def _empty(title: str, why: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="80" viewBox="0 0 {W} 80">'
            f'<rect width="{W}" height="80" fill="#f9fafb" stroke="#d1d5db"/>'
            f'<text x="{W / 2}" y="30" text-anchor="middle" font-size="14" font-weight="bold">{escape(title)}</text>'
            f'<text x="{W / 2}" y="55" text-anchor="middle" font-size="12" fill="#6b7280">{escape(why)}</text></svg>')


def grouped_bars(title: str, labels: list[str], series: dict[str, list[float | None]], ylabel: str,
                 ymax: float | None = None, hlines: list[tuple[str, float]] | None = None,
                 xlabel: str = "", empty: str = "no data") -> str:
    values = [v for vs in series.values() for v in vs if v is not None]
    if not labels or not values:
        return _empty(title, empty)
    ymax = ymax or max(values + [v for _, v in hlines or []]) * 1.15 or 1.0
    out = _frame(title, ymax, ylabel)
    slot = (W - L - R) / len(labels)
    bw = slot * 0.7 / len(series)
    for i, lab in enumerate(labels):
        x0 = L + slot * i + slot * 0.15
        for j, vs in enumerate(series.values()):
            v = vs[i] if i < len(vs) else None
            if v is None:
                continue
            y = _y(v, ymax)
            out.append(f'<rect x="{x0 + j * bw:.1f}" y="{y:.1f}" width="{bw - 2:.1f}" height="{H - B - y:.1f}" '
                       f'fill="{COLORS[j % len(COLORS)]}"><title>{escape(lab)}: {v:.4g}</title></rect>')
        out.append(f'<text x="{L + slot * (i + 0.5):.1f}" y="{H - B + 15}" text-anchor="middle" font-size="11">'
                   f'{escape(lab)}</text>')
    if xlabel:
        out.append(f'<text x="{(L + W - R) / 2}" y="{H - B + 29}" text-anchor="middle" font-size="11">'
                   f'{escape(xlabel)}</text>')
    out += _hlines(hlines or [], ymax)
    if len(series) > 1:
        out += _legend(list(series))
    return "\n".join(out + ["</svg>"])


def line_chart(title: str, labels: list[str], series: dict[str, list[float | None]], ylabel: str,
               ymax: float | None = None, hlines: list[tuple[str, float]] | None = None,
               empty: str = "no data") -> str:
    values = [v for vs in series.values() for v in vs if v is not None]
    if not labels or not values:
        return _empty(title, empty)
    ymax = ymax or max(values) * 1.15 or 1.0
    out = _frame(title, ymax, ylabel)
    n = len(labels)
    step = (W - L - R) / max(n - 1, 1)
    for j, (_name, vs) in enumerate(series.items()):
        pts = [(L + step * i, _y(v, ymax)) for i, v in enumerate(vs) if v is not None]
        color = COLORS[j % len(COLORS)]
        if len(pts) > 1:
            out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="'
                       + " ".join(f"{x:.1f},{y:.1f}" for x, y in pts) + '"/>')
        out += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"/>' for x, y in pts]
    for i in sorted({0, n // 2, n - 1}):
        anchor = "start" if i == 0 and n > 1 else "end" if i == n - 1 and n > 1 else "middle"
        out.append(f'<text x="{L + step * i:.1f}" y="{H - B + 15}" text-anchor="{anchor}" font-size="10">'
                   f'{escape(labels[i])}</text>')
    out += _hlines(hlines or [], ymax)
    out += _legend(list(series))
    return "\n".join(out + ["</svg>"])


# --- scatter: numeric axes, error whiskers, reference lines (used by the `specops tune` report) ----------

@dataclass(frozen=True)
class Point:
    """One dot: value (x, y), optional whiskers (x/y low–high) and a tooltip."""

    x: float
    y: float
    tip: str = ""
    xlow: float | None = None
    xhigh: float | None = None
    ylow: float | None = None
    yhigh: float | None = None


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (about ``n`` of them)."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(n - 1, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    return [round(first + i * step, 10) for i in range(int((hi - first) / step + 1e-9) + 1)]


class _Axes:
    def __init__(self, xlim: tuple[float, float], ylim: tuple[float, float], width: int, height: int):
        self.x0, self.x1 = xlim
        self.y0, self.y1 = ylim
        self.w, self.h = width, height

    def x(self, v: float) -> float:
        span = (self.x1 - self.x0) or 1.0
        return L + (self.w - L - R) * (v - self.x0) / span

    def y(self, v: float) -> float:
        span = (self.y1 - self.y0) or 1.0
        return self.h - B - (self.h - B - T) * (v - self.y0) / span


def _tick(v: float) -> str:
    return f"{v:.0f}" if float(v).is_integer() else _fmt(v)


def _limits(values: list[float], pad: float = 0.08) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    return max(0.0, lo - (hi - lo) * pad) if lo >= 0 else lo - (hi - lo) * pad, hi + (hi - lo) * pad


def _scatter_frame(title: str, ax: _Axes, xlabel: str, ylabel: str, xticks: list[float] | None,
                   total_h: int, xtick_labels: list[tuple[float, str]] | None = None) -> list[str]:
    w, h = ax.w, ax.h
    out = _open(title, w, total_h)
    for v in nice_ticks(ax.y0, ax.y1):
        y = ax.y(v)
        out.append(f'<line x1="{L}" y1="{y:.1f}" x2="{w - R}" y2="{y:.1f}" stroke="#e5e7eb"/>')
        out.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{_tick(v)}</text>')
    ticks = xtick_labels or [(v, _tick(v)) for v in (xticks if xticks is not None else nice_ticks(ax.x0, ax.x1))]
    for v, text in ticks:
        x = ax.x(v)
        out.append(f'<line x1="{x:.1f}" y1="{h - B}" x2="{x:.1f}" y2="{h - B + 4}" stroke="#374151"/>')
        out.append(f'<text x="{x:.1f}" y="{h - B + 15}" text-anchor="middle" font-size="11">{escape(text)}</text>')
    out.append(f'<text x="{(L + w - R) / 2}" y="{h - B + 29}" text-anchor="middle" font-size="11">'
               f'{escape(xlabel)}</text>')
    return out + _axis_lines(w, h, ylabel)


def _slope(label: str, k: float, ax: _Axes, color: str, dash: str) -> list[str]:
    """The line y = k·x clipped to the plot box (skipped when it misses the box)."""
    if k <= 0:
        return []
    xa, xb = max(ax.x0, ax.y0 / k), min(ax.x1, ax.y1 / k)
    if xb <= xa:
        return []
    return [f'<line class="ref" x1="{ax.x(xa):.1f}" y1="{ax.y(k * xa):.1f}" x2="{ax.x(xb):.1f}" '
            f'y2="{ax.y(k * xb):.1f}" stroke="{color}" stroke-dasharray="{dash}"><title>{escape(label)}</title></line>',
            f'<text x="{ax.x(xb) - 4:.1f}" y="{ax.y(k * xb) + 12:.1f}" text-anchor="end" font-size="10" '
            f'fill="{color}">{escape(label)}</text>']


def _whiskers(p: Point, ax: _Axes, color: str) -> list[str]:
    out, cx, cy = [], ax.x(p.x), ax.y(p.y)
    if p.xlow is not None and p.xhigh is not None:
        a, b = ax.x(p.xlow), ax.x(p.xhigh)
        out += [f'<line x1="{a:.1f}" y1="{cy:.1f}" x2="{b:.1f}" y2="{cy:.1f}" stroke="{color}" stroke-width="1.5"/>',
                f'<line x1="{a:.1f}" y1="{cy - 4:.1f}" x2="{a:.1f}" y2="{cy + 4:.1f}" stroke="{color}"/>',
                f'<line x1="{b:.1f}" y1="{cy - 4:.1f}" x2="{b:.1f}" y2="{cy + 4:.1f}" stroke="{color}"/>']
    if p.ylow is not None and p.yhigh is not None:
        a, b = ax.y(p.ylow), ax.y(p.yhigh)
        out += [f'<line x1="{cx:.1f}" y1="{a:.1f}" x2="{cx:.1f}" y2="{b:.1f}" stroke="{color}" stroke-width="1.5"/>',
                f'<line x1="{cx - 4:.1f}" y1="{a:.1f}" x2="{cx + 4:.1f}" y2="{a:.1f}" stroke="{color}"/>',
                f'<line x1="{cx - 4:.1f}" y1="{b:.1f}" x2="{cx + 4:.1f}" y2="{b:.1f}" stroke="{color}"/>']
    return out


def _legend_at(names: list[str], w: int, top: int) -> list[tuple[str, int, int]]:
    """(name, x, baseline y) per legend entry, wrapping rows at the plot's width."""
    out, x, y = [], L + 8, top + 12
    for n in names:
        width = 22 + 7 * len(n)
        if x + width > w - R and x > L + 8:
            x, y = L + 8, y + 16
        out.append((n, x, y))
        x += width
    return out


def _scatter_legend(entries: list[tuple[str, int, int]], colors: dict[str, str]) -> list[str]:
    out = []
    for n, x, y in entries:
        out.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{colors[n]}"/>')
        out.append(f'<text x="{x + 14}" y="{y}" font-size="11">{escape(n)}</text>')
    return out


def scatter(title: str, series: dict[str, list[Point]], xlabel: str, ylabel: str, *,
            lines: dict[str, list[tuple[float, float]]] | None = None,
            slopes: list[tuple[str, float]] | None = None, hlines: list[tuple[str, float]] | None = None,
            colors: dict[str, str] | None = None, xlim: tuple[float, float] | None = None,
            ylim: tuple[float, float] | None = None, xticks: list[float] | None = None,
            line_tips: dict[str, list[str]] | None = None, width: int = W, height: int = H, empty: str = "no data",
            bands: dict[str, list[tuple[float, float, float]]] | None = None,
            xtick_labels: list[tuple[float, str]] | None = None) -> str:
    """Dots with optional whiskers (``<g class="pt">`` with a ``<title>`` tooltip each), per-series
    polylines (``lines``, e.g. a fitted prediction: hollow markers whose tooltips are ``line_tips`` or
    "NAME: x → y"), lines y = k·x through the
    origin (``slopes``, e.g. y = x and ±15%) and labelled horizontal reference lines (``hlines``).
    Colours follow ``colors`` by series name, else the default palette; axes are numeric. ``bands``: per
    series, (x, low, high) triples drawn as a shaded area under the dots (e.g. a prediction's range);
    ``xtick_labels``: (x, text) ticks in place of numeric ones (e.g. 1, 8, 64 on a log axis)."""
    lines, slopes, hlines, bands = lines or {}, slopes or [], hlines or [], bands or {}
    pts = [p for ps in series.values() for p in ps]
    if not pts and not any(lines.values()):
        return _empty(title, empty)
    names = list(dict.fromkeys([*series, *lines]))
    palette = {n: (colors or {}).get(n) or COLORS[i % len(COLORS)] for i, n in enumerate(names)}
    xs = [v for p in pts for v in (p.x, p.xlow, p.xhigh) if v is not None] + [x for ls in lines.values() for x, _ in ls]
    ys = ([v for p in pts for v in (p.y, p.ylow, p.yhigh) if v is not None]
          + [y for ls in lines.values() for _, y in ls] + [v for _, v in hlines]
          + [v for bs in bands.values() for _, lo, hi in bs for v in (lo, hi)])
    xs += [x for bs in bands.values() for x, _, _ in bs] + [x for x, _ in xtick_labels or []]
    legend = _legend_at(names, width, height - 4)
    total_h = (legend[-1][2] + 6) if legend else height
    ax = _Axes(xlim or _limits(xs), ylim or _limits(ys), width, height)
    out = _scatter_frame(title, ax, xlabel, ylabel, xticks, total_h, xtick_labels)
    for name, bs in bands.items():
        if len(bs) > 1:
            bs = sorted(bs)
            edge = [(ax.x(x), ax.y(hi)) for x, _, hi in bs] + [(ax.x(x), ax.y(lo)) for x, lo, _ in reversed(bs)]
            out.append(f'<polygon class="band" fill="{palette.get(name, COLORS[0])}" fill-opacity="0.15" stroke="none" '
                       'points="' + " ".join(f"{x:.1f},{y:.1f}" for x, y in edge) + '"/>')
    for label, k in slopes:
        out += _slope(label, k, ax, "#6b7280" if k == 1 else "#9ca3af", "none" if k == 1 else "4,4")
    for label, v in hlines:
        y = ax.y(v)
        out.append(f'<line class="ref" x1="{L}" y1="{y:.1f}" x2="{width - R}" y2="{y:.1f}" stroke="#6b7280" '
                   f'stroke-dasharray="6,3"><title>{escape(label)}: {v:.4g}</title></line>')
        out.append(f'<text x="{width - R - 4}" y="{y - 4:.1f}" text-anchor="end" font-size="10" fill="#4b5563">'
                   f'{escape(label)} {_fmt(v)}</text>')
    for name, ls in lines.items():
        c, tips = palette[name], (line_tips or {}).get(name) or [f"{name}: {x:g} → {y:.4g}" for x, y in ls]
        xy = [(ax.x(x), ax.y(y)) for x, y in ls]
        if len(xy) > 1:
            out.append(f'<polyline class="fit" fill="none" stroke="{c}" stroke-width="1.5" stroke-opacity="0.7" '
                       'points="' + " ".join(f"{x:.1f},{y:.1f}" for x, y in xy) + '"/>')
        out += [f'<circle class="pred" cx="{px:.1f}" cy="{py:.1f}" r="3" fill="#ffffff" stroke="{c}">'
                f'<title>{escape(tip)}</title></circle>' for (px, py), tip in zip(xy, tips, strict=True)]
    for name, ps in series.items():
        c = palette[name]
        for p in ps:
            out.append(f'<g class="pt"><title>{escape(p.tip or f"{name}: {p.x:.4g}, {p.y:.4g}")}</title>')
            out += _whiskers(p, ax, c)
            out.append(f'<circle cx="{ax.x(p.x):.1f}" cy="{ax.y(p.y):.1f}" r="4.5" fill="{c}" '
                       f'fill-opacity="0.85" stroke="#ffffff"/></g>')
    out += _scatter_legend(legend, palette)
    return "\n".join(out + ["</svg>"])
