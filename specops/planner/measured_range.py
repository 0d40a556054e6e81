"""A range from the user's own measurement: split-conformal on a calibration's leave-one-configuration-out residuals.

The published ranges (:mod:`specops.planner.uncertainty`) are calibrated on rows measured elsewhere, each source held
out, so they can be no narrower than independent sources disagree on the same configuration (the replication
floor: σ ≈ 0.24 in ln between serving sources, an 80% range of hi/lo ≈ 1.83 at best). A `specops tune` calibration
has no between-source term: its errors are the fitted model's on the user's own engine. For each measured
speculative configuration the calibration is refitted without that configuration's points and predicts its
speedup; r = ln(measured / predicted) (:func:`specops.tune.residuals.loco_residuals` computes them). A measured
prediction S then gets

- **the range** [S·e^r(k_lo), S·e^r(k_hi)] from the sorted residuals r(1) ≤ … ≤ r(n), with
  k_hi = ⌈(n+1)·(1+LEVEL)/2⌉ and k_lo = ⌊(n+1)·(1−LEVEL)/2⌋ (split-conformal, finite-sample: a new
  configuration's residual, exchangeable with the n, falls below r(k) with probability k/(n+1)), widened to hold S,
  bounded by physics (never above the measured τ, never below S/τ: every draft rejected);
- **P(gain)** = Σ_i Φ((ln S + r_i)/BANDWIDTH) / (n+1): each residual smoothed as the published ones are, over n+1
  (the new configuration's own rank is unknown: the conformal lower bound, so 20 residuals that all gain give at
  most 20/21);
- **the expected speedup** = the mean of clip(S·e^r_i, S/τ, τ).

Both order statistics exist only when k_lo ≥ 1 and k_hi ≤ n: at LEVEL 0.8, n ≥ MIN_RESIDUALS = 9. With fewer, no
range of the calibration's own is shown: the caller falls back to the published-evidence range and says so. The
same for a batch outside the concurrencies the calibration measured (:func:`within`): leaving a configuration out
never tests the fit on another batch.

What the range holds (bench/measured_range_bench.py, simulated calibrations of 10 configurations, 20 residuals,
σ 0.01-0.10 of run noise): 81-82% of fresh runs of a configuration the calibration never saw, taken as tune takes
them (over the calibration's own baseline run) - split-conformal promises (19−2)/21 = 81% - and 82-92% of its true
speedup (the residuals carry the runs' noise; the truth does not). A comparison that re-runs the baseline as well
adds that run's noise, which no residual holds (the baseline is in every refit): 72% at σ 0.10.
"""

from __future__ import annotations

import math
import statistics

from pydantic import Field

from specops.models import Strict
from specops.planner.uncertainty import BANDWIDTH, LEVEL, Uncertainty


def order_statistics(n: int, level: float = LEVEL) -> tuple[int, int] | None:
    """(k_lo, k_hi), 1-based, of a two-sided split-conformal range at ``level`` over ``n`` residuals; None when
    ``n`` is too small for either end to exist."""
    tail = (1 - level) / 2
    k_lo = math.floor((n + 1) * tail + 1e-9)
    k_hi = math.ceil((n + 1) * (1 - tail) - 1e-9)
    return (k_lo, k_hi) if k_lo >= 1 and k_hi <= n else None


def min_residuals(level: float = LEVEL) -> int:
    """The fewest residuals whose split-conformal range at ``level`` exists (9 at 0.8)."""
    n = 1
    while order_statistics(n, level) is None:
        n += 1
    return n


MIN_RESIDUALS = min_residuals()
"""9 at LEVEL 0.8: ⌊(n+1)·0.1⌋ ≥ 1 and ⌈(n+1)·0.9⌉ ≤ n first hold at n = 9."""


class MeasuredResiduals(Strict):
    """What a measured model (a `specops tune` calibration) knows about its own errors."""

    source: str = Field(description="Which calibration, e.g. 'calibration tiny-cpu@2'.")
    log_ratios: list[float] = Field(description="ln(measured / held-out predicted speedup), one per measured "
                                    "speculative configuration × concurrency (synthetic-rate cost runs excluded).")
    configurations: int = Field(description="Speculative configurations (method, draft, γ) the residuals come from.")
    concurrencies: list[int] = Field(default_factory=list, description="Concurrencies the residuals were measured at.")
    fitted_baseline: int = Field(0, description="Residuals whose measured speedup is over the fitted baseline (the "
                                 "baseline was not measured at that concurrency).")
    unpredictable: list[str] = Field(default_factory=list, description="Configurations that give no residual: the "
                                     "rest of the calibration cannot predict them (their method measured only there).")


class MeasuredUncertainty(Uncertainty):
    """The :class:`~specops.planner.uncertainty.Uncertainty` of a measured prediction: the same figures, from the
    calibration's own leave-one-configuration-out residuals instead of published rows."""

    residuals: int = Field(description="Leave-one-configuration-out residuals the range rests on.")
    configurations: int = Field(description="Configurations those residuals come from.")
    order: tuple[int, int] = Field(description="(k_lo, k_hi): the order statistics of the sorted residuals that "
                                   "bound the range.")
    source: str = Field(description="The calibration.")
    detail: str = Field("", description="Concurrencies, fitted-baseline residuals, a batch outside the measured ones.")

    def published_text(self) -> str:
        return ""

    def line(self) -> str:
        lo, hi = self.order
        ceiling = f"τ {self.tau:.2f} (measured)"
        return (f"{self.level:.0%} range {self.speedup_low:.2f}x-{self.speedup_high:.2f}x, P(gain) {self.p_gain:.2f}, "
                f"expected {self.expected_speedup:.2f}x, from {self.residuals} leave-one-configuration-out residuals "
                f"of {self.source} ({self.configurations} configurations, each predicted by a refit without its own "
                f"points; r = ln(measured/predicted speedup), median |r| {self.median_error:.3f}): split-conformal, "
                f"the {_ordinal(lo)} and {_ordinal(hi)} of {self.residuals} sorted, P(gain) over {self.residuals + 1}"
                f"{'; ' + self.detail if self.detail else ''}; bounds {ceiling}, floor {self.floor:.2f}x")


def _ordinal(k: int) -> str:
    return f"{k}{'th' if 10 <= k % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


def assess_measured(speedup: float, tau: float, evidence: MeasuredResiduals, *, level: float = LEVEL,
                    batch: int | None = None) -> MeasuredUncertainty | None:
    """The range, P(gain) and expected speedup of a measured prediction ``speedup`` (τ ``tau``, the calibration's
    counters) from ``evidence``'s residuals; None when they are too few for a range at ``level``
    (:data:`MIN_RESIDUALS`): the caller shows the published-evidence range instead, and says so."""
    rs = sorted(evidence.log_ratios)
    n = len(rs)
    ks = order_statistics(n, level)
    if ks is None or speedup <= 0:
        return None
    k_lo, k_hi = ks
    tau = max(1.0, tau)
    cap, floor = max(tau, speedup), min(speedup / tau, speedup)
    lo = min(speedup, max(floor, speedup * math.exp(rs[k_lo - 1])))
    hi = max(speedup, min(cap, speedup * math.exp(rs[k_hi - 1])))
    ln_s = math.log(speedup)
    p = sum(0.5 * math.erfc(-(ln_s + r) / (BANDWIDTH * math.sqrt(2))) for r in rs) / (n + 1)
    expected = statistics.fmean(min(cap, max(floor, speedup * math.exp(r))) for r in rs)
    point = round(speedup, 3)
    lo, hi = min(point, math.ceil(lo * 1000) / 1000), max(point, math.floor(hi * 1000) / 1000)
    notes = []
    if evidence.concurrencies:
        notes.append("measured at concurrency " + ", ".join(map(str, evidence.concurrencies)))
        if batch is not None and batch not in evidence.concurrencies:
            notes[-1] += f" (batch {batch} lies between them: its range is theirs)"
    notes.append("pooled over methods")
    if evidence.fitted_baseline:
        notes.append(f"{evidence.fitted_baseline} of them over the fitted baseline (not measured at that concurrency)")
    return MeasuredUncertainty(
        speedup=point, speedup_low=lo, speedup_high=hi, level=level, width=round(hi / lo, 3),
        p_gain=round(min(1.0, max(0.0, p)), 3), expected_speedup=round(expected, 3), tau=round(tau, 3),
        tau_high=round(tau, 3), floor=round(floor, 3), rows=n, sources=evidence.configurations,
        matched_on=evidence.source, own_weight=1.0, stratum=evidence.source, near=True,
        median_error=round(statistics.median(abs(r) for r in rs), 3), published_checked=False,
        residuals=n, configurations=evidence.configurations, order=(k_lo, k_hi), source=evidence.source,
        detail="; ".join(notes))


def within(evidence: MeasuredResiduals, batch: int) -> bool:
    """Whether ``batch`` lies inside the concurrencies the residuals were measured at. Leaving a configuration out
    tests the fit on another configuration at a measured concurrency, never on another batch: beyond the measured
    ones the fit extrapolates (a step that turns compute-bound there is not in it) and no residual says how far off."""
    return bool(evidence.concurrencies) and min(evidence.concurrencies) <= batch <= max(evidence.concurrencies)


def fallback_note(evidence: MeasuredResiduals | None, label: str, level: float = LEVEL,
                  batch: int | None = None) -> str:
    """Why a measured prediction carries the published-evidence range: too few residuals of its own, or a batch
    outside the measured concurrencies (:func:`within`)."""
    need = min_residuals(level)
    if evidence is not None and batch is not None and len(evidence.log_ratios) >= need and not within(evidence, batch):
        measured = ", ".join(map(str, evidence.concurrencies))
        return (f"batch {batch} is outside the concurrencies {evidence.source} measured ({measured}): its "
                "leave-one-configuration-out residuals test other configurations at those concurrencies, not another "
                "batch, so the range is the published evidence's for the calibration's extrapolated speedup and τ; "
                f"tune at concurrency {batch} for a range of its own")
    if evidence is None:
        return (f"{label} states no leave-one-configuration-out residuals, so it has no {level:.0%} range of its own: "
                "the range is the published evidence's for its predicted speedup and τ")
    skipped = f"; not predictable without itself: {', '.join(evidence.unpredictable)}" if evidence.unpredictable else ""
    return (f"{evidence.source} has {len(evidence.log_ratios)} leave-one-configuration-out residuals (from "
            f"{evidence.configurations} configurations{skipped}), fewer than the {need} that a split-conformal range at "
            f"{level:.0%} needs (the ⌈(n+1)·{(1 + level) / 2:g}⌉-th of n must exist), so the range is the published "
            "evidence's for the calibration's predicted speedup and τ; tune more γ values or methods for a range "
            "of its own")
