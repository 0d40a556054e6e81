"""One replica's capacity at the live acceptance (issue 44; docs/capacity.md): the spec's ``capacity`` block holds
the step-cost model's capacity within the SLO at several accepted/drafted rates (``specops recommend
--gpus-available ... -o deployment`` computes them); the monitor interpolates the rate measured in a window on
them. Below the lowest rate the lowest point's capacity is used, above the highest the highest's (the curve is
not extrapolated); both say so."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specops.drift.observe import Observation
    from specops.engines.spec import CapacityExpectation


def live_acceptance_rate(obs: Observation) -> float | None:
    """accepted/drafted over the window (None: nothing drafted)."""
    total = obs.total
    return None if total is None else total.counts.rate  # speculation.Acceptance: None when nothing was drafted


def capacity_at(cap: CapacityExpectation, obs: Observation) -> tuple[float | None, str]:
    """(requests/s one replica serves within the SLO at ``obs``'s acceptance, how it was read)."""
    curve = cap.by_acceptance
    if not curve:
        return cap.capacity_rps, "no speculation: capacity does not depend on acceptance"
    rate = live_acceptance_rate(obs)
    if rate is None:
        return None, "could not evaluate: no drafts in the window"
    return interpolate(curve, rate)


def interpolate(curve: list[tuple[float, float]], rate: float) -> tuple[float, str]:
    pts = sorted(curve)
    if rate <= pts[0][0]:
        return pts[0][1], f"accepted/drafted {rate:.3f} at or below the curve's lowest {pts[0][0]:.3f}: its capacity"
    if rate >= pts[-1][0]:
        return pts[-1][1], f"accepted/drafted {rate:.3f} at or above the curve's highest {pts[-1][0]:.3f}: its capacity"
    for (r0, c0), (r1, c1) in zip(pts, pts[1:], strict=False):
        if r0 <= rate <= r1:
            w = (rate - r0) / (r1 - r0) if r1 > r0 else 0.0
            return c0 + w * (c1 - c0), f"accepted/drafted {rate:.3f} between {r0:.3f} and {r1:.3f}"
    raise AssertionError("unreachable")
