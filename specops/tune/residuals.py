"""Leave-one-configuration-out residuals of a calibration: how far its fitted model is off on a configuration it
has not seen, as a speedup - what :mod:`specops.planner.measured_range` turns into a range, P(gain) and an
expected speedup for the calibration's own predictions.

For each measured speculative configuration (method, draft, γ) of the standard runs, the calibration's fit
(:func:`specops.tune.fit.fit_model`: acceptance from the standard runs' counters, step cost from ``cost_points``)
is redone without that configuration's points - its standard runs *and* its synthetic-rate cost runs, at every
concurrency: a configuration never measured has neither - and predicts its speedup at each concurrency it was
measured at. The residual is r = ln(measured / predicted), where

- measured = the configuration's median tokens/s over its repeats ÷ the baseline's median at the same concurrency
  (where the baseline was not measured there: the refit's baseline, counted in ``fitted_baseline``);
- predicted = the refit's tokens/s of the configuration ÷ its tokens/s of the baseline (its TPOT ratio: the
  utilization is the concurrency's, the same for both).

Not residuals: the baseline (speedup 1 by definition), synthetic-rate runs (vLLM's synthetic rejection sampler
fixes acceptance: a cost measurement, not what the user will serve), failed points, and a configuration whose
method the rest of the calibration never measured (nothing can predict it: listed in ``unpredictable``).

The fits are small least squares (≤ 3 + 3 per method unknowns): on the 2-core box, 10 configurations × 2
concurrencies take 6 ms at 3 repeats (66 points) and 38 ms at 13 (286 points, the size of docs/tune.md's full run),
so the residuals are computed when a calibration is used, not stored.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict

from specops.errors import InputError
from specops.tune.fit import fit_without, predict
from specops.tune.types import EngineConfig, LocoResidual, PointResult, TuneCalibration


def _spec_key(c: EngineConfig) -> tuple[str, str | None, int]:
    return c.method, c.draft, c.gamma


def loco_residuals(points: list[PointResult]) -> tuple[list[LocoResidual], list[str]]:
    """(residuals, keys of the configurations nothing else predicts): one residual per measured speculative
    configuration × concurrency (see the module docstring)."""
    ok = [r for r in points if r.status == "ok" and r.sample is not None]
    standard = [r for r in ok if r.point.config.synthetic_rate is None]
    base_tps: dict[int, list[float]] = defaultdict(list)
    cells: dict[tuple, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    configs: dict[tuple, EngineConfig] = {}
    for r in standard:
        c = r.point.config
        if c.method == "none":
            base_tps[r.point.concurrency].append(r.sample.tokens_per_s)
        else:
            configs.setdefault(_spec_key(c), c)
            cells[_spec_key(c)][r.point.concurrency].append(r.sample.tokens_per_s)
    baseline = EngineConfig(method="none")
    out, unpredictable = [], []
    for key in sorted(cells, key=lambda k: (k[0], k[1] or "", k[2])):
        config = configs[key]
        fit = fit_without(ok, lambda r, key=key: _spec_key(r.point.config) == key)  # its synthetic cost runs go too
        try:
            preds = {b: (predict(*fit, config, b).tokens_per_s, predict(*fit, baseline, b).tokens_per_s)
                     for b in cells[key]} if fit else None
        except InputError:
            preds = None
        if preds is None:
            unpredictable.append(config.key)
            continue
        for b in sorted(cells[key]):
            spec_pred, base_pred = preds[b]
            base = statistics.median(base_tps[b]) if base_tps.get(b) else base_pred
            measured = statistics.median(cells[key][b]) / base
            predicted = spec_pred / base_pred
            if measured <= 0 or predicted <= 0:
                continue
            out.append(LocoResidual(config=config, concurrency=b, measured_speedup=measured, predicted_speedup=predicted,
                                    log_ratio=math.log(measured / predicted),
                                    baseline="measured" if base_tps.get(b) else "fitted"))
    return out, unpredictable


def measured_residuals(cal: TuneCalibration):
    """The calibration's residuals as the planner takes them (:class:`specops.planner.measured_range.MeasuredResiduals`)."""
    from specops.planner.measured_range import MeasuredResiduals

    rows, unpredictable = loco_residuals(cal.points)
    return MeasuredResiduals(source=f"calibration {cal.ref}", log_ratios=[r.log_ratio for r in rows],
                             configurations=len({r.config for r in rows}),
                             concurrencies=sorted({r.concurrency for r in rows}),
                             fitted_baseline=sum(1 for r in rows if r.baseline == "fitted"),
                             unpredictable=unpredictable)
