"""Small inline SVG charts (no JavaScript, no external CSS): bars, lines, grouped bars."""

from __future__ import annotations

from html import escape

W, H = 560, 260
L, R, T, B = 56, 16, 34, 44  # margins
COLORS = ("#2563eb", "#f97316", "#16a34a", "#9333ea")


def _frame(title: str, ymax: float, ylabel: str) -> list[str]:
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
           f'role="img" aria-label="{escape(title)}">',
           f'<rect width="{W}" height="{H}" fill="#ffffff"/>',
           f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14" font-weight="bold">{escape(title)}</text>']
    for i in range(5):
        v = ymax * i / 4
        y = _y(v, ymax)
        out.append(f'<line x1="{L}" y1="{y:.1f}" x2="{W - R}" y2="{y:.1f}" stroke="#e5e7eb"/>')
        out.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{_fmt(v)}</text>')
    out.append(f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="#374151"/>')
    out.append(f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="#374151"/>')
    out.append(f'<text x="14" y="{(T + H - B) / 2}" font-size="11" transform="rotate(-90 14 {(T + H - B) / 2})" '
               f'text-anchor="middle">{escape(ylabel)}</text>')
    return out


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
