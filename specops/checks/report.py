"""A self-contained HTML report: inline SVG plots and the checklist results (no JS, no external CSS).

Plots: acceptance per draft position, acceptance over time, TPOT with vs without speculation by
concurrency. The data comes from a :class:`ValidationReport` (live) or from the registry (the latest
validation run's stored series, stored measurements and ``bench`` events) for ``specops report``.
"""

from __future__ import annotations

from datetime import datetime, timezone
from html import escape
from pathlib import Path
from typing import Any

from specops.checks.svg import grouped_bars, line_chart
from specops.models import status_word

STATUS_COLOR = {"pass": "#16a34a", "warn": "#ca8a04", "fail": "#dc2626", "error": "#b45309", "skipped": "#6b7280"}
CSS = """body{font-family:system-ui,sans-serif;margin:24px;color:#111827;max-width:1180px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px}.plots{display:flex;flex-wrap:wrap;gap:16px}
table{border-collapse:collapse;width:100%;font-size:13px}td,th{border:1px solid #e5e7eb;padding:5px 8px;
text-align:left;vertical-align:top}th{background:#f3f4f6}.st{font-weight:bold;color:#fff;border-radius:4px;
padding:1px 6px}.meta{color:#4b5563;font-size:13px}"""


def render_html(*, deployment: dict, results: list[dict], data: dict, verdict: str, profile: str | None,
                floors: dict[str, float] | None = None, generated_at: datetime | None = None) -> str:
    """The page. ``results``: CheckResult dicts; ``data``: per_position, over_time, tpot_by_concurrency."""
    floors = floors or {}
    at = (generated_at or datetime.now(timezone.utc)).isoformat(timespec="seconds")
    meta = " · ".join(escape(f"{k}: {deployment.get(k)}") for k in
                      ("target_ref", "draft_ref", "method", "num_speculative_tokens", "vllm_version", "endpoint")
                      if deployment.get(k) is not None)
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>specops report: "
             f"{escape(str(deployment.get('name')))}</title><style>{CSS}</style></head><body>",
             f"<h1>specops report: {escape(str(deployment.get('name')))}</h1>",
             f"<p class=\"meta\">{meta}<br>verdict: <b>{escape(verdict)}</b>"
             f"{' · profile: ' + escape(profile) if profile else ''} · generated {at}</p>",
             "<h2>Plots</h2><div class=\"plots\">", *plots(data, floors), "</div>",
             "<h2>Checklist results</h2>", _table(results), "</body></html>"]
    return "\n".join(parts)


def plots(data: dict, floors: dict[str, float]) -> list[str]:
    pp = data.get("per_position") or []
    hl = [(k, v) for k, v in floors.items() if v is not None]
    per_pos = grouped_bars("Acceptance per draft position", [str(i) for i in range(len(pp))],
                           {"P(first i+1 drafts accepted)": pp}, "rate", ymax=1.0, xlabel="draft position",
                           empty="no per-position counters in the window")
    ot = data.get("over_time") or []
    labels = [str(p.get("t", ""))[11:19] or str(i) for i, p in enumerate(ot)]
    over_time = line_chart("Acceptance over time", labels,
                           {"per-token α": [p.get("alpha") for p in ot],
                            "accepted/drafted": [p.get("rate") for p in ot]},
                           "acceptance", ymax=1.0, hlines=hl, empty="no acceptance samples recorded")
    tp = data.get("tpot_by_concurrency") or []
    tpot = grouped_bars("TPOT with vs without speculation", [str(c["concurrency"]) for c in tp],
                        {"speculation on": [_ms(c.get("spec")) for c in tp],
                         "speculation off": [_ms(c.get("baseline")) for c in tp]},
                        "TPOT p50 (ms)", xlabel="concurrency",
                        empty="no benchmark with a baseline recorded (specops bench --baseline-endpoint)")
    return [per_pos, over_time, tpot]


def _ms(v: float | None) -> float | None:
    return None if v is None else v * 1000.0


def _table(results: list[dict]) -> str:
    if not results:
        return "<p>No validation run recorded yet (run <code>specops validate</code>).</p>"
    rows = ["<table><tr><th>status</th><th>check</th><th>severity</th><th>kind</th><th>result</th>"
            "<th>source</th></tr>"]
    for r in results:
        st = r.get("status", "?")
        fix = f"<br><i>To fix:</i> {escape(r['fix'])}" if r.get("fix") and st != "pass" else ""
        rows.append(f"<tr><td><span class=\"st\" style=\"background:{STATUS_COLOR.get(st, '#6b7280')}\">"
                    f"{escape(status_word(st))}</span></td><td><b>{escape(r.get('id', ''))}</b><br>{escape(r.get('description', ''))}"
                    f"</td><td>{escape(r.get('severity', ''))}</td><td>{escape(r.get('kind', ''))}</td>"
                    f"<td>{escape(r.get('message', ''))}{fix}</td><td>{escape(r.get('source', ''))}</td></tr>")
    return "\n".join(rows + ["</table>"])


def report_from_registry(reg: Any, deployment: str) -> dict:
    """Everything ``specops report`` shows, read from the registry."""
    from specops.checks.sources import bench_events, deployment_facts

    facts = deployment_facts(reg.get_deployment(deployment))
    runs = reg.validation_runs(deployment, limit=1)
    run = runs[0] if runs else None
    summary = (run.summary or {}) if run else {}
    data = dict(summary.get("data") or {})
    if not data.get("over_time"):
        ms = list(reversed(reg.measurements(deployment, limit=500)))
        data["over_time"] = [{"t": m.window_end.isoformat(), "rate": m.acceptance_rate,
                              "alpha": _alpha(m)} for m in ms if m.acceptance_rate is not None]
        if not data.get("per_position") and ms and ms[-1].per_position:
            data["per_position"] = ms[-1].per_position
    if not data.get("tpot_by_concurrency"):
        events = bench_events(reg, deployment)
        cmps = next(((e.get("data") or {}).get("comparisons") for e in events
                     if (e.get("data") or {}).get("comparisons")), []) or []
        data["tpot_by_concurrency"] = [{"concurrency": c["concurrency"], "spec": c.get("spec_tpot_p50_s"),
                                        "baseline": c.get("baseline_tpot_p50_s")} for c in cmps]
    results = [r for r in summary.get("results", [])]
    verdict = ("no validation run yet" if run is None else
               f"{run.checklist}: {'passed' if run.passed else 'did not pass'} ({run.finished_at:%Y-%m-%d %H:%M} UTC)")
    return {"deployment": facts, "results": results, "data": data, "verdict": verdict,
            "profile": summary.get("profile"), "floors": summary.get("floors") or {}}


def _alpha(m) -> float | None:
    from specops.speculation import alpha_from_tau

    k = len(m.per_position or []) or None
    if m.mean_acceptance_length is None or not k:
        return None
    return alpha_from_tau(m.mean_acceptance_length, k)


def write_report(html: str, out: str | Path, *, what: str = "report", flag: str = "--out",
                 default: bool = False) -> Path:
    """Write an HTML page all at once (:func:`specops.outputs.write_text`); an unwritable path, a FIFO
    or device, or (``default``: a name the user did not type) a symbolic link is an InputError naming
    the flag that gave it."""
    from specops.outputs import write_text

    return write_text(out, html, flag, what=what, default=default, make_folders=True)
