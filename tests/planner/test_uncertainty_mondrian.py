"""Group-conditional (Mondrian) calibration and evidence density of the ranges (specops.planner.uncertainty):
a range holds its nominal share of each group's residuals, not only of all of them.

Synthetic residual points of known shape (each test says which); nothing is faked."""

from __future__ import annotations

import math
import re

from specops.planner.uncertainty import (
    GROUPINGS,
    MONDRIAN_POOL,
    RangeCalibration,
    ResidualPoint,
    Stratum,
    assess,
)

HEAD = Stratum("serving", "head", "dense", "1-2")
MOE = Stratum("serving", "head", "moe", "1-2")


def _pts(stratum, method, logs, prefix):
    """One source per residual; every point records its prediction (so the calibration is adaptive)."""
    return [ResidualPoint(f"{prefix}{i}", x, stratum, speedup=1.8, tau=2.6, tau_high=3.0, method=method)
            for i, x in enumerate(logs)]


def _covered(points, cal) -> float:
    inside = 0
    for p in points:
        u = assess(p.speedup, p.tau, p.stratum, cal, tau_high=10.0, method=p.method)
        inside += u.speedup_low <= p.speedup * math.exp(p.log_ratio) <= u.speedup_high
    return inside / len(points)


def _spread(scale: float, n: int = 40) -> list[float]:
    return [scale * (-1) ** i * (i // 2 + 1) / (n // 2) for i in range(n)]  # ±scale/20 .. ±scale, symmetric


def test_mondrian_holds_a_group_the_difficulty_model_cannot_tell_apart():
    """Two methods in one stratum, which the difficulty model does not read (its scale reads the engine class and
    the hardware): EAGLE-3 rows published within e^±0.8 of their prediction, MTP rows within e^±0.1 (40 sources
    each). Pooled, one z distribution serves both and EAGLE-3's range misses over 40% of its rows; by method
    (Mondrian), each group's own 10th-90th percentile joins the range and EAGLE-3 holds 31 of its 40 (the two
    rows at the range's ends fall out: the ends are rounded inward to 3 decimals)."""
    wide, tight = _pts(HEAD, "eagle3", _spread(0.8), "e"), _pts(HEAD, "mtp", _spread(0.1), "m")
    pooled = RangeCalibration(wide + tight, mondrian=None)
    by_method = RangeCalibration(wide + tight, mondrian=0.0, groupings={"method": GROUPINGS["method"]})
    assert _covered(wide, pooled) < 0.6 and _covered(tight, pooled) == 1.0
    assert _covered(wide, by_method) >= 0.75 and _covered(tight, by_method) == 1.0
    lo, hi, group = by_method.bounds(HEAD, "eagle3")
    assert group == "method eagle3's 40 rows (40 sources)" and (lo, hi) != by_method.bounds(HEAD, "")[:2]


def test_mondrian_only_widens_and_shrinks_a_thin_group_toward_the_pool():
    """The union with the groups' ranges never narrows a range; a group of 2 sources at e^+1 with pool 30 takes
    2/32 of the weight, too little to move the 90th percentile of 40 other sources within e^±0.2 as far as its
    own rows do (pool 0)."""
    base = _pts(HEAD, "eagle3", _spread(0.2), "b")
    odd = _pts(MOE, "eagle3", [1.0, 1.0], "x")
    plain = RangeCalibration(base + odd, mondrian=None)
    for pool in (0.0, 3.0, 10.0):
        cal = RangeCalibration(base + odd, mondrian=pool)
        for s in (HEAD, MOE):
            u, p = assess(1.8, 10.0, s, cal, method="eagle3"), assess(1.8, 10.0, s, plain, method="eagle3")
            assert u.speedup_low <= p.speedup_low and u.speedup_high >= p.speedup_high
    own = assess(1.8, 10.0, MOE, RangeCalibration(base + odd, mondrian=0.0), method="eagle3")
    shrunk = assess(1.8, 10.0, MOE, RangeCalibration(base + odd, mondrian=30.0), method="eagle3")
    assert shrunk.speedup_high < own.speedup_high


def test_evidence_density_counts_other_sources_near_a_prediction():
    """Density: the calibration's sources sharing engine class, method family and architecture, the point's own
    source left out (so a calibration point is not its own evidence)."""
    pts = _pts(HEAD, "eagle3", [0.0] * 5, "h") + _pts(MOE, "eagle3", [0.0] * 2, "m")
    pts.append(ResidualPoint("h0", 0.1, Stratum("serving", "head", "dense", "17+"), speedup=1.2, tau=2.0, tau_high=2.2))
    cal = RangeCalibration(pts)
    assert cal.density(HEAD) == 5 and cal.density(HEAD, "h0") == 4 and cal.density(MOE) == 2
    assert cal.density(Stratum("harness", "head", "dense", "1-2")) == 0
    assert RangeCalibration(pts, density_depth=2).density(MOE) == 7


def test_the_shipped_calibration_is_mondrian_and_the_plan_says_which_group_widened_it():
    """Measured nested (bench/uncertainty_bench.py, variants): Mondrian by every group the goal names lifts the groups
    short of 78% for the calibration's sake (EAGLE-3, MoE) at the cost of width; it ships on (pool 3 since native
    runtimes have their own engine class), and the evidence line names the group that widened a range, with
    its rows and sources."""
    from specops.planner import RecommendRequest, recommend
    from specops.planner.uncertainty import default_calibration

    assert MONDRIAN_POOL == 3.0 and default_calibration().mondrian == 3.0
    plan = recommend(RecommendRequest(model="openai/gpt-oss-120b", gpu="B200", batch_size=1))
    ev = plan.predicted.evidence
    m = re.search(r"widened by ([^;]+)'s (\d+) rows \((\d+) sources\)", ev)
    assert m and any(m.group(1).startswith(f"{name} ") for name in GROUPINGS), ev
    assert int(m.group(2)) >= int(m.group(3)) >= 1
