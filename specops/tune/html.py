"""The `specops tune` HTML report: one self-contained page (inline SVG, no JS, no external resources).

    html = render_tune_html(result.report, result.calibration, recommend_picks=picks)
    write_tune_html(html, "tune.html")

Plots: (A) predicted vs measured tokens/s per grid point with the measured spread, y = x and ±15%;
(B) per concurrency, tokens/s against γ per method (measured with spread, fitted line, baseline);
(C) per-position acceptance per drafter. Then every row as a table, and the picks per concurrency:
the fitted model's, the best measured, the verdict and (when given) what `specops recommend` picks.
"""

from __future__ import annotations

from datetime import datetime, timezone
from html import escape
from pathlib import Path

from specops.checks.report import CSS, write_report
from specops.checks.svg import Point, scatter
from specops.errors import InputError
from specops.tune.fit import predict
from specops.tune.types import Figure, ReportRow, TuneCalibration, TuneReport

BAND = 0.15  # the ±15% band of plot A (the leave-out target)
METHOD_COLORS = {"none": "#6b7280", "ngram": "#2563eb", "draft_model": "#f97316", "eagle3": "#16a34a",
                 "eagle": "#9333ea", "mtp": "#0891b2", "suffix": "#db2777"}
TUNE_CSS = CSS + """.num{text-align:right;font-variant-numeric:tabular-nums}tr.failed td{background:#fef2f2}
.err{color:#b91c1c}.tag{font-size:11px;border-radius:4px;padding:0 4px;margin-left:4px;background:#e0e7ff}
dl.meta{display:grid;grid-template-columns:max-content auto;gap:2px 12px}dl.meta dt{font-weight:bold}
dl.meta dd{margin:0}"""
CAPTION_A = (f"One dot per configuration × concurrency: x = measured median tokens/s (whisker: spread over repeats), "
             f"y = the fitted model's prediction. Dots on the solid line are predicted exactly; dashed lines mark "
             f"±{BAND:.0%}. Hover a dot for its numbers.")
CAPTION_B = ("Per concurrency: dots are measured medians (whisker: spread), lines with hollow markers the fitted "
             "model's prediction at each γ of the grid, the dashed line the measured baseline without speculation.")
CAPTION_C = "From the engine's counters: the share of drafts whose first i tokens were all accepted, per drafter."


def render_tune_html(report: TuneReport, calibration: TuneCalibration, *, recommend_picks: list[dict] | None = None,
                     generated_at: datetime | None = None) -> str:
    """The page for one tune run. ``recommend_picks``: what `specops recommend` picks per concurrency,
    as ``{"concurrency", "method", "gamma", "tokens_per_s_measured" (or None)}``."""
    at = (generated_at or datetime.now(timezone.utc)).isoformat(timespec="seconds")
    title = f"specops tune report: {report.run_id}"
    parts = [f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"/><title>{escape(title)}</title>'
             f"<style>{TUNE_CSS}</style></head><body>",
             f"<h1>{escape(title)}</h1>", _header(report, calibration, at),
             "<h2>Predicted vs measured</h2>", _caption(CAPTION_A), "<div class=\"plots\">", plot_predicted_vs_measured(report), "</div>",
             "<h2>Tokens/s against γ</h2>", _caption(CAPTION_B), "<div class=\"plots\">", *plots_by_gamma(report, calibration), "</div>",
             "<h2>Acceptance per draft position</h2>", _caption(CAPTION_C), "<div class=\"plots\">", plot_acceptance(calibration), "</div>",
             "<h2>Picks</h2>", _picks(report, recommend_picks),
             "<h2>Every grid point</h2>", _rows_table(report), "</body></html>"]
    return "\n".join(parts)


def write_tune_html(html: str, path: str | Path) -> Path:
    return write_report(html, path, what="tune report", flag="--html")


def _caption(text: str) -> str:
    return f'<p class="meta">{escape(text)}</p>'


# --- header ----------------------------------------------------------------------------------------------

def _pct(v: float | None, signed: bool = False) -> str:
    if v is None:
        return "–"
    return f"{v:+.1f}%" if signed else f"{v:.1f}%"


def _header(report: TuneReport, cal: TuneCalibration, at: str) -> str:
    items = [("run", report.run_id), ("calibration", report.calibration or cal.ref), ("model", cal.model),
             ("hardware", cal.hardware), ("engine", cal.engine_version), ("workload", cal.workload),
             ("grid points", f"{report.measured} measured, {report.failed} failed ({cal.samples} samples)"),
             ("median error (in fit)", _pct(report.median_error_pct)),
             ("median error (config left out)", _pct(report.median_leave_out_error_pct)),
             ("generated", at)]
    dl = "".join(f"<dt>{escape(k)}</dt><dd>{escape(str(v))}</dd>" for k, v in items)
    notes = "".join(f"<li>{escape(n)}</li>" for n in report.notes)
    return f'<dl class="meta">{dl}</dl>' + (f"<ul class=\"meta\">{notes}</ul>" if notes else "")


# --- plots -----------------------------------------------------------------------------------------------

def _measured(report: TuneReport) -> list[ReportRow]:
    return [r for r in report.rows if r.status == "ok" and r.tokens_per_s is not None]


def _spread(f: Figure) -> str:
    return f"{f.median:.4g} [{f.low:.4g}–{f.high:.4g}]"


def plot_predicted_vs_measured(report: TuneReport) -> str:
    """Plot A: one dot per measured row (x = measured median with its spread, y = in-fit prediction)."""
    series: dict[str, list[Point]] = {}
    for r in _measured(report):
        if r.predicted_tokens_per_s is None:
            continue
        f = r.tokens_per_s
        tip = (f"{r.config.key} @ c={r.concurrency}: measured {_spread(f)} tok/s, predicted "
               f"{r.predicted_tokens_per_s:.4g}, error {_pct(r.error_pct, True)}, left out {_pct(r.leave_out_error_pct, True)}")
        series.setdefault(r.config.method, []).append(Point(x=f.median, y=r.predicted_tokens_per_s, tip=tip,
                                                            xlow=f.low, xhigh=f.high))
    values = [v for ps in series.values() for p in ps for v in (p.x, p.y, p.xlow, p.xhigh)]
    lim = (0.0, max(values) * 1.08) if values else None
    return scatter("Predicted vs measured tokens/s (per config × concurrency)", series,
                   "measured tokens/s (median, whisker: spread)", "predicted tokens/s",
                   slopes=[("y = x", 1.0), (f"+{BAND:.0%}", 1 + BAND), (f"−{BAND:.0%}", 1 - BAND)],
                   colors=METHOD_COLORS, xlim=lim, ylim=lim, width=560, height=460,
                   empty="no measured grid point")


def plots_by_gamma(report: TuneReport, cal: TuneCalibration) -> list[str]:
    """Plot B, one chart per concurrency: measured medians (whisker: spread) and the fitted line per method."""
    concurrencies = sorted({r.concurrency for r in report.rows})
    gammas: dict[str, dict[int, ReportRow]] = {}
    for r in report.rows:
        if r.config.method != "none":
            gammas.setdefault(r.config.method, {}).setdefault(r.config.gamma, r)
    return [_gamma_plot(report, cal, b, gammas) for b in concurrencies]


def _gamma_plot(report: TuneReport, cal: TuneCalibration, b: int, gammas: dict[str, dict[int, ReportRow]]) -> str:
    series: dict[str, list[Point]] = {}
    for r in _measured(report):
        if r.concurrency == b and r.config.method != "none":
            f = r.tokens_per_s
            series.setdefault(r.config.method, []).append(Point(
                x=r.config.gamma, y=f.median, ylow=f.low, yhigh=f.high,
                tip=f"{r.config.key} @ c={b}: measured {_spread(f)} tok/s (n={f.n}), predicted "
                    f"{_num(r.predicted_tokens_per_s)}"))
    lines = {m: _fitted(cal, rows, b) for m, rows in gammas.items()}
    lines = {m: ls for m, ls in lines.items() if ls}
    base = next((r for r in _measured(report) if r.concurrency == b and r.config.method == "none"), None)
    hlines = [("none (measured)", base.tokens_per_s.median)] if base else []
    all_g = sorted({g for rows in gammas.values() for g in rows})
    ys = [v for ps in series.values() for p in ps for v in (p.yhigh, p.y)] + [y for ls in lines.values()
                                                                            for _, y in ls] + [v for _, v in hlines]
    return scatter(f"Tokens/s against γ at concurrency {b}", series, "γ (drafted tokens per step)",
                   "tokens/s", lines=lines, hlines=hlines,
                   colors=METHOD_COLORS, line_tips={m: _fit_tips(m, ls, b) for m, ls in lines.items()},
                   xlim=(min(all_g) - 0.5, max(all_g) + 0.5) if all_g else None,
                   ylim=(0.0, max(ys) * 1.1) if ys else None, xticks=[float(g) for g in all_g],
                   empty=f"no speculative configuration measured at concurrency {b}")


def _fit_tips(method: str, line: list[tuple[float, float]], b: int) -> list[str]:
    return [f"{method}-g{g:.0f} @ c={b}: fitted {y:.4g} tok/s" for g, y in line]


def _fitted(cal: TuneCalibration, rows: dict[int, ReportRow], b: int) -> list[tuple[float, float]]:
    """The fitted model's tokens/s at every γ of this method (measured or failed)."""
    out = []
    for g, row in sorted(rows.items()):
        try:
            out.append((float(g), predict(cal.coefficients, cal.acceptance, row.config, b).tokens_per_s))
        except InputError:
            continue  # no acceptance measured for this drafter: nothing to predict from
    return out


def plot_acceptance(cal: TuneCalibration) -> str:
    """Plot C: P(first i drafts accepted) per position, one line per drafter."""
    series: dict[str, list[Point]] = {}
    for a in cal.acceptance:
        name = a.method if not a.draft else f"{a.method} ({Path(a.draft).name or a.draft})"
        series[name] = [Point(x=i + 1, y=p, tip=f"{name}, position {i + 1}: P(first {i + 1} accepted) = {p:.3f} "
                              f"over {n:.0f} drafts (drafting on {a.draft_fraction:.0%} of steps)")
                        for i, (p, n) in enumerate(zip(a.per_position, a.drafts, strict=False))]
    k = max((len(a.per_position) for a in cal.acceptance), default=0)
    lines = {n: [(p.x, p.y) for p in ps] for n, ps in series.items()}  # the dots carry the tooltips
    colors = {n: METHOD_COLORS.get(n.split(" ")[0], "") for n in series}
    return scatter("Acceptance per draft position", series, "draft position i", "P(first i drafts accepted)",
                   lines=lines, colors={n: c for n, c in colors.items() if c}, xlim=(0.5, k + 0.5),
                   ylim=(0.0, 1.0), xticks=[float(i) for i in range(1, k + 1)],
                   empty="no drafter measured (acceptance needs a speculative configuration)")


# --- tables ----------------------------------------------------------------------------------------------

def _num(v: float | None, fmt: str = ".4g") -> str:
    return "–" if v is None else format(v, fmt)


def _fig(f: Figure | None) -> str:
    if f is None:
        return "–"
    return (f"{f.median:.4g} <span class=\"meta\" title=\"n={f.n}, {escape(f.spread)}\">"
            f"[{f.low:.4g}–{f.high:.4g}]</span>")


def _rows_table(report: TuneReport) -> str:
    picks = {(p.concurrency, p.config.key) for p in report.model_picks}
    best = {(p.concurrency, p.config.key) for p in report.best_measured}
    out = ["<table><tr><th>config</th><th>c</th><th>tokens/s measured [spread]</th><th>TPOT ms [spread]</th>"
           "<th>acceptance</th><th>per position</th><th>predicted tok/s</th><th>error</th><th>left-out error</th></tr>"]
    for r in report.rows:
        key = r.config.key
        tags = ("<span class=\"tag\">model pick</span>" if (r.concurrency, key) in picks else "") + \
               ("<span class=\"tag\">best measured</span>" if (r.concurrency, key) in best else "")
        head = f"<td>{escape(key)}{tags}</td><td class=\"num\">{r.concurrency}</td>"
        if r.status != "ok":
            out.append(f"<tr class=\"failed\">{head}<td colspan=\"7\" class=\"err\">failed: "
                       f"{escape(r.error or 'no reason recorded')}</td></tr>")
            continue
        pp = " ".join(f"{p:.2f}" for p in r.per_position) or "–"
        out.append(f"<tr>{head}<td class=\"num\">{_fig(r.tokens_per_s)}</td><td class=\"num\">{_fig(r.tpot_ms)}</td>"
                   f"<td class=\"num\">{_num(r.acceptance_rate, '.3f')}</td><td>{pp}</td>"
                   f"<td class=\"num\">{_num(r.predicted_tokens_per_s)}</td><td class=\"num\">{_pct(r.error_pct, True)}"
                   f"</td><td class=\"num\">{_pct(r.leave_out_error_pct, True)}</td></tr>")
    return "\n".join(out + ["</table>"])


def _key(method: str | None, gamma: int | None) -> str:
    return "none" if method in (None, "none") or not gamma else f"{method}-g{gamma}"


def _picks(report: TuneReport, recommend: list[dict] | None) -> str:
    measured = {(r.concurrency, r.config.key): r for r in _measured(report)}
    model = {p.concurrency: p for p in report.model_picks}
    best = {p.concurrency: p for p in report.best_measured}
    rec = {int(d["concurrency"]): d for d in recommend or [] if d.get("concurrency") is not None}
    verdicts = {b: [v for v in report.pick_within if v.startswith(f"c={b}:")] for b in {*model, *best, *rec}}
    cols = "<th>c</th><th>fitted model's pick</th><th>best measured</th>" + \
           ("<th>specops recommend</th>" if recommend is not None else "") + "<th>verdict</th>"
    out = [f"<table><tr>{cols}</tr>"]
    for b in sorted({*model, *best, *rec}):
        m, bm = model.get(b), best.get(b)
        mcell = "–" if m is None else (f"{escape(m.config.key)}: predicted {m.tokens_per_s:.4g} tok/s"
                                       + _measured_note(measured.get((b, m.config.key))))
        bcell = "–" if bm is None else f"{escape(bm.config.key)}: " + _best_fig(measured.get((b, bm.config.key)), bm)
        rcell = f"<td>{_recommend_cell(rec.get(b), measured, b, bm)}</td>" if recommend is not None else ""
        vcell = "<br>".join(escape(v) for v in verdicts.get(b, [])) or "–"
        out.append(f"<tr><td class=\"num\">{b}</td><td>{mcell}</td><td>{bcell}</td>{rcell}<td>{vcell}</td></tr>")
    out.append("</table>")
    rest = [v for v in report.pick_within if not any(v in vs for vs in verdicts.values())]
    if rest:
        out.append("<ul>" + "".join(f"<li>{escape(v)}</li>" for v in rest) + "</ul>")
    return "\n".join(out)


def _best_fig(row: ReportRow | None, pick) -> str:
    return _fig(row.tokens_per_s) if row is not None else f"{pick.tokens_per_s:.4g}"


def _measured_note(row: ReportRow | None) -> str:
    return "; not measured" if row is None else f"; measured {row.tokens_per_s.median:.4g}"


def _recommend_cell(d: dict | None, measured: dict, b: int, best) -> str:
    if d is None:
        return "–"
    key = _key(str(d.get("method") or "none"), d.get("gamma"))
    tps = d.get("tokens_per_s_measured")
    if tps is None and (b, key) in measured:
        tps = measured[(b, key)].tokens_per_s.median
    if tps is None:
        return f"{escape(key)}: not measured"
    ratio = f" ({tps / best.tokens_per_s:.0%} of the best)" if best is not None and best.tokens_per_s else ""
    return f"{escape(key)}: measured {float(tps):.4g} tok/s{escape(ratio)}"
