"""The difficulty model of the ranges (specops.planner.difficulty, used by specops.planner.uncertainty): the
range's width and centre follow what a prediction is.

Synthetic residual points where a property needs residuals of known shape (each test says which); the shipped
calibration and planner in the last test. Nothing is faked."""

from __future__ import annotations

import math

import pytest

from specops.planner import RecommendRequest, recommend
from specops.planner.difficulty import Difficulty, Where
from specops.planner.uncertainty import RangeCalibration, ResidualPoint, Stratum, assess, default_calibration

SERVING = Stratum("serving", "head", "dense", "1-2")
HARNESS = Stratum("harness", "head", "dense", "1-2")
MODEL = Stratum("serving", "model", "dense", "1-2")


def _pts(stratum, logs, prefix, *, speedup=1.8, tau=2.6, tau_high=3.0, hardware_known=True):
    """One source per residual; every point records its prediction (so the calibration is adaptive)."""
    return [ResidualPoint(f"{prefix}{i}", x, stratum, speedup=speedup, tau=tau, tau_high=tau_high,
                          hardware_known=hardware_known) for i, x in enumerate(logs)]


def _covered(points, cal) -> float:
    inside = 0
    for p in points:
        u = assess(p.speedup, p.tau, p.stratum, cal, tau_high=10.0, hardware_known=p.hardware_known)
        inside += u.speedup_low <= p.speedup * math.exp(p.log_ratio) <= u.speedup_high
    return inside / len(points)


def test_a_kind_of_prediction_that_has_been_close_gets_a_narrow_range_one_that_has_been_far_a_wide_one():
    """Serving-engine rows published within e^±0.1 of their prediction, harness rows within e^±0.6 (40 sources
    each): plain split-conformal gives both one width; the difficulty model gives each its own, the ranges hold
    about 80% of all rows and at least 70% of each kind."""
    spread = [(-1) ** i * (i // 2 + 1) / 20 for i in range(40)]  # ±0.05 .. ±1.0, symmetric
    near = _pts(SERVING, [0.1 * x for x in spread], "s")
    far = _pts(HARNESS, [0.6 * x for x in spread], "h")
    plain = RangeCalibration(near + far, adaptive=False)
    adaptive = RangeCalibration(near + far)
    assert plain.difficulty == Difficulty.identity() and adaptive.difficulty != Difficulty.identity()
    p_near = assess(1.8, 10.0, SERVING, plain)
    a_near, a_far = assess(1.8, 10.0, SERVING, adaptive), assess(1.8, 10.0, HARNESS, adaptive)
    ln = math.log
    assert ln(a_near.width) < ln(p_near.width) / 2 and ln(a_far.width) > 3 * ln(a_near.width)
    assert a_near.scale < a_far.scale
    assert _covered(near, adaptive) >= 0.7 and _covered(far, adaptive) >= 0.7
    assert 0.75 <= _covered(near + far, adaptive) <= 0.9
    assert _covered(near, plain) == 1.0  # one width for both: the close kind is over-covered


def test_a_kind_of_prediction_that_has_run_low_is_centred_above_its_point():
    """Separate-draft-model rows all published at e^0.4±0.05 of their prediction, trained-head rows at e^0±0.05:
    a draft-model prediction of 0.9x is expected to gain, its range sits above the point; a head's does not move."""
    wiggle = [0.05 * (-1) ** i for i in range(30)]
    cal = RangeCalibration(_pts(MODEL, [0.4 + w for w in wiggle], "m") + _pts(SERVING, wiggle, "h"))
    model = assess(0.9, 2.6, MODEL, cal, tau_high=3.0)
    head = assess(0.9, 2.6, SERVING, cal, tau_high=3.0)
    assert model.bias == pytest.approx(0.4, abs=0.08) and abs(head.bias) < 0.08
    assert model.speedup_low == pytest.approx(0.9) and model.speedup_high > 0.9 * math.exp(0.4)
    assert model.p_gain > 0.95 and head.p_gain < 0.2  # 0.9·e^±0.05 < 1
    assert model.expected_speedup == pytest.approx(0.9 * math.exp(0.4), rel=0.06)
    assert f"such predictions ran {model.bias:+.2f} ln" in model.line()


def test_rows_whose_hardware_was_guessed_widen_only_their_own_kind():
    """Rows naming no catalog GPU (predicted on a guessed A100) published within e^±0.8, the others within e^±0.1:
    `recommend` always knows its GPU, so its range is the narrow one."""
    spread = [(-1) ** i * (i % 10 + 1) / 10 for i in range(40)]
    cal = RangeCalibration(_pts(SERVING, [0.1 * x for x in spread], "k") +
                           _pts(SERVING, [0.8 * x for x in spread], "g", hardware_known=False))
    known = assess(1.8, 10.0, SERVING, cal)
    guessed = assess(1.8, 10.0, SERVING, cal, hardware_known=False)
    assert math.log(guessed.width) > 3 * math.log(known.width) and known.width < 1.5


def test_the_fit_is_weighted_by_source_and_bounded():
    """One source with 30 rows at +1.0 and 10 single-row sources at 0: the bias sits near the sources, not the
    rows; a bias past the cap is capped."""
    big = [ResidualPoint("big", 1.0, SERVING, speedup=1.8, tau=2.6, tau_high=3.0) for _ in range(30)]
    small = _pts(SERVING, [0.0] * 10, "s")
    rows = Difficulty.fit(big + small, exponent=0.0, center_features=lambda w: [1.0], scale_features=lambda w: [1.0])
    sources = Difficulty.fit(big + small, exponent=1.0, center_features=lambda w: [1.0], scale_features=lambda w: [1.0])
    where = Where(SERVING, 1.8, 2.6, 3.0)
    assert rows.mu(where) == pytest.approx(0.5)  # capped: least squares of rows says 0.75
    assert sources.mu(where) == pytest.approx(1 / 11, abs=0.01)


def test_the_shipped_calibration_is_adaptive_and_the_plan_says_so():
    cal = default_calibration()
    assert cal.difficulty != Difficulty.identity() and all(p.speedup > 0 and p.tau_high >= p.tau for p in cal.points)
    plan = recommend(RecommendRequest(model="meta-llama/Llama-3.1-8B-Instruct", gpu="A100-80GB", batch_size=1))
    assert "such predictions ran" in plan.predicted.evidence and plan.predicted.p_gain >= 0.8
