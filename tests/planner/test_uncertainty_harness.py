"""Issue 38's paper-harness half: a held-out residual split into its τ and cost halves (evidence.split_residual),
and a stratum's own calibration standing without the union with wider groups (RangeCalibration(own_stands=N)).

Real shipped published rows and the real model for the split; synthetic residual points of known shape for the
calibration (the test says which). Nothing is faked."""

from __future__ import annotations

import math

from specops.planner.evidence import SERVING_ENGINES, cross_validate, split_residual
from specops.planner.uncertainty import GROUPINGS, RangeCalibration, ResidualPoint, Stratum, calibration_rows

HARNESS = Stratum("harness", "head", "dense", "1-2")
SERVING = Stratum("serving", "head", "dense", "1-2")


def test_a_harness_residual_splits_into_its_tau_half_and_its_cost_half():
    """Every held-out harness row that publishes τ splits exactly: ln(published/predicted) = τ half − cost half,
    the cost half being ln of the published step cost τ/speedup over the predicted one; rows without τ give None."""
    res = [r for r in cross_validate(calibration_rows(), unstated_gamma=True) if r.row.engine not in SERVING_ENGINES]
    split = [(r, split_residual(r)) for r in res]
    with_tau = [(r, h) for r, h in split if h]
    assert len(with_tau) >= 25 and all(h is None for r, h in split if not r.row.tau)
    for r, (tau_half, cost_half) in with_tau:
        assert math.isclose(tau_half - cost_half, r.log_ratio, abs_tol=1e-9)
        assert math.isclose(cost_half, math.log((r.row.tau / r.row.speedup) / (r.tau / r.predicted)), abs_tol=1e-9)


def _pts(stratum, logs, prefix, method="eagle3"):
    return [ResidualPoint(f"{prefix}{i}", x, stratum, speedup=1.8, tau=2.6, tau_high=3.0, method=method)
            for i, x in enumerate(logs)]


def _spread(scale: float, n: int = 20) -> list[float]:
    return [scale * (-1) ** i * (i // 2 + 1) / (n // 2) for i in range(n)]


def test_a_stratum_with_enough_sources_keeps_its_own_range_against_a_wider_group():
    """Harness rows within e^±0.2 of their prediction (20 sources), serving rows of the same method within e^±1.0
    (20 sources); the stratum mixture is its own rows (pool 0). With the union (shipped) the harness range is widened by the method group; with its own
    calibration standing at 10 sources it is not, and it is narrower; at 30 sources (more than it has) the union
    stays."""
    points = _pts(HARNESS, _spread(0.2), "h") + _pts(SERVING, _spread(1.0), "s")
    groupings = {"stratum": GROUPINGS["stratum"], "method": GROUPINGS["method"]}
    union = RangeCalibration(points, pool=0.0, mondrian=1.0, groupings=groupings, adaptive=False)
    own = RangeCalibration(points, pool=0.0, mondrian=1.0, groupings=groupings, adaptive=False, own_stands=10)
    few = RangeCalibration(points, pool=0.0, mondrian=1.0, groupings=groupings, adaptive=False, own_stands=30)
    lo_u, hi_u, by_u = union.bounds(HARNESS, "eagle3")
    lo_o, hi_o, by_o = own.bounds(HARNESS, "eagle3")
    assert by_u.startswith("method eagle3") and not by_o.startswith("method")
    assert hi_o - lo_o < hi_u - lo_u
    assert few.bounds(HARNESS, "eagle3") == (lo_u, hi_u, by_u)
