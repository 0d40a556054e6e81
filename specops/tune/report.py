"""The tune report: every grid point measured (median and spread over repeats) against the fitted
model's prediction, in-fit and with the point's configuration left out of the fit; each (method, γ,
batch) configuration left out of the fit and predicted from the rest (:func:`leave_one_config_out`);
the configuration the fitted model picks per concurrency, and the best measured one."""

from __future__ import annotations

import statistics
from collections import defaultdict

from specops.errors import InputError
from specops.tune.fit import fit_without, predict
from specops.tune.types import (
    EngineConfig,
    Figure,
    HeldOut,
    Pick,
    PointResult,
    ReportRow,
    TuneCalibration,
    TuneReport,
)

WITHIN = 0.95  # the pick is good when its measured median is ≥ 95% of the best's ...


def figure(values: list[float]) -> Figure:
    """Median with min–max (fewer than 4 values) or IQR spread."""
    xs = sorted(values)
    if not xs:
        raise ValueError("no values")
    if len(xs) >= 4:
        q = statistics.quantiles(xs, n=4, method="inclusive")
        return Figure(median=statistics.median(xs), low=q[0], high=q[2], n=len(xs), spread="iqr")
    return Figure(median=statistics.median(xs), low=xs[0], high=xs[-1], n=len(xs), spread="min-max")


def _groups(points: list[PointResult]) -> dict[tuple[EngineConfig, int], list[PointResult]]:
    groups: dict[tuple[EngineConfig, int], list[PointResult]] = defaultdict(list)
    for r in points:
        groups[(r.point.config, r.point.concurrency)].append(r)
    return groups


def _row(config: EngineConfig, b: int, results: list[PointResult]) -> ReportRow:
    ok = [r for r in results if r.status == "ok" and r.sample is not None]
    if not ok:
        return ReportRow(config=config, concurrency=b, status="failed", error=results[0].error)
    from specops.speculation import Acceptance

    s = [r.sample for r in ok]
    pooled = Acceptance.pooled(Acceptance(x.num_drafts, x.num_draft_tokens, x.num_accepted_tokens,
                                          tuple(x.accepted_per_position)) for x in s)
    return ReportRow(config=config, concurrency=b, status="ok",
                     tokens_per_s=figure([x.tokens_per_s for x in s]), tpot_ms=figure([x.tpot_ms for x in s]),
                     acceptance_rate=pooled.rate, per_position=pooled.per_position or [])


def _pct(pred: float, meas: float) -> float:
    return (pred - meas) / meas * 100.0


def _leave_out(points: list[PointResult], config: EngineConfig, b: int) -> float | None:
    fit = fit_without(points, lambda r: r.point.config == config)
    if fit is None:
        return None  # nothing else measured this method: no acceptance to predict from
    try:
        return predict(*fit, config, b).tokens_per_s
    except InputError:
        return None


def leave_one_config_out(points: list[PointResult]) -> list[HeldOut]:
    """Each measured (method, γ, batch) of the standard runs left out of the fit — with its synthetic
    cost runs at that γ and batch, if any — and its tokens/s predicted by a model fitted (acceptance and
    cost, as :func:`specops.tune.fit.fit_model`) on everything else. A configuration whose method has no
    other measured point cannot be predicted and is not listed."""
    ok = [r for r in points if r.status == "ok" and r.sample is not None]

    def cell(r: PointResult) -> tuple:
        c = r.point.config
        return c.method, c.gamma, c.draft, r.point.concurrency

    out = []
    for key in sorted({cell(r) for r in ok if r.point.config.synthetic_rate is None},
                      key=lambda k: (k[0] != "none", k[0], k[1], k[3])):
        method, gamma, draft, b = key
        held = [r for r in ok if cell(r) == key and r.point.config.synthetic_rate is None]
        fit = fit_without(ok, lambda r, key=key: cell(r) == key)
        try:
            pred = predict(*fit, held[0].point.config, b).tokens_per_s if fit else None
        except InputError:
            pred = None
        if pred is None:
            continue
        meas = statistics.median(r.sample.tokens_per_s for r in held)
        out.append(HeldOut(method=method, gamma=gamma, concurrency=b, predicted_tokens_per_s=pred,
                           measured_tokens_per_s=meas, error_pct=_pct(pred, meas)))
    return out


def naive_leave_one_config_out(points: list[PointResult]) -> list[HeldOut]:
    """The yardstick for :func:`leave_one_config_out`: each (method, γ, batch) configuration's tokens/s
    "predicted" as the mean of the *other* configurations' measured medians at the same concurrency (a
    predictor that knows nothing about speculation). A fitted model that cannot beat it has learned
    nothing the grid's average did not already say. Cells with no other configuration at their
    concurrency are not listed."""
    ok = [r for r in points if r.status == "ok" and r.sample is not None and r.point.config.synthetic_rate is None]
    cells: dict[tuple, list[float]] = defaultdict(list)
    for r in ok:
        c = r.point.config
        cells[(c.method, c.gamma, c.draft, r.point.concurrency)].append(r.sample.tokens_per_s)
    medians = {k: statistics.median(v) for k, v in cells.items()}
    out = []
    for key in sorted(medians, key=lambda k: (k[0] != "none", k[0], k[1], k[3])):
        method, gamma, _, b = key
        others = [v for k, v in medians.items() if k[3] == b and k != key]
        if others:
            pred = statistics.fmean(others)
            out.append(HeldOut(method=method, gamma=gamma, concurrency=b, predicted_tokens_per_s=pred,
                               measured_tokens_per_s=medians[key], error_pct=_pct(pred, medians[key])))
    return out


def build_report(cal: TuneCalibration, candidates: list[EngineConfig], concurrency: list[int],
                 run_id: str, notes: list[str] | None = None) -> TuneReport:
    points = cal.points
    rows = []
    for (config, b), results in sorted(_groups(points).items(), key=lambda kv: (kv[0][1], kv[0][0].method,
                                                                               kv[0][0].gamma)):
        row = _row(config, b, results)
        if row.status == "ok":
            p = predict(cal.coefficients, cal.acceptance, config, b)
            row.predicted_tokens_per_s, row.predicted_tpot_ms = p.tokens_per_s, p.tpot_ms
            row.error_pct = _pct(p.tokens_per_s, row.tokens_per_s.median)
            lo = _leave_out(points, config, b)
            row.leave_out_error_pct = _pct(lo, row.tokens_per_s.median) if lo else None
        rows.append(row)
    errs = [abs(r.error_pct) for r in rows if r.error_pct is not None]
    lo_errs = [abs(r.leave_out_error_pct) for r in rows if r.leave_out_error_pct is not None]
    report = TuneReport(run_id=run_id, calibration=cal.ref, rows=rows,
                        median_error_pct=statistics.median(errs) if errs else None,
                        median_leave_out_error_pct=statistics.median(lo_errs) if lo_errs else None,
                        held_out=leave_one_config_out(points), cost_fit=cal.cost_fit,
                        failed=sum(1 for r in rows if r.status == "failed"),
                        measured=sum(1 for r in rows if r.status == "ok"), notes=list(notes or []))
    measured = {(r.config, r.concurrency): r for r in rows if r.status == "ok"}
    for b in concurrency:
        preds = []
        for c in candidates:
            try:
                preds.append(predict(cal.coefficients, cal.acceptance, c, b))
            except InputError:
                continue
        here = [r for (c, bb), r in measured.items() if bb == b]
        if preds:
            best_pred = max(preds, key=lambda p: p.tokens_per_s)
            report.model_picks.append(Pick(concurrency=b, config=best_pred.config, tokens_per_s=best_pred.tokens_per_s))
        if here:
            best = max(here, key=lambda r: r.tokens_per_s.median)
            report.best_measured.append(Pick(concurrency=b, config=best.config, tokens_per_s=best.tokens_per_s.median))
        if preds and here:
            report.pick_within.append(_verdict(measured.get((best_pred.config, b)), best))
    return report


def _verdict(pick: ReportRow | None, best: ReportRow) -> str:
    b = best.concurrency
    if pick is None:
        return f"c={b}: the model's pick was not measured (predicted only)"
    ratio = pick.tokens_per_s.median / best.tokens_per_s.median
    if ratio >= WITHIN:
        return f"c={b}: pick {pick.config.key} measured {ratio:.0%} of the best ({best.config.key}): ok"
    if pick.tokens_per_s.median >= best.tokens_per_s.low:
        return f"c={b}: pick {pick.config.key} measured {ratio:.0%} of the best, inside its spread: ok"
    return f"c={b}: pick {pick.config.key} measured {ratio:.0%} of the best ({best.config.key}): WORSE"
