"""The fit, on synthetic points generated from known coefficients and acceptance (tests/tune/fakes.py:
internally consistent engine counters and timings, no engine)."""

from __future__ import annotations

import random

import pytest

from specops.errors import InputError
from specops.tune.fit import (
    _normal_equations,
    fit_acceptance,
    fit_coefficients,
    nonnegative_lstsq,
    predict,
    tau_of,
)
from specops.tune.types import EngineConfig, GridPoint, PointResult
from tests.tune.fakes import CUM, FRACTION, TRUE, synthetic_sample, true_step_ms, true_tau

GAMMAS = [1, 2, 3, 4, 6]


def grid(noise: float = 0.0, seed: int = 3, methods=("none", "ngram", "draft_model"), repeats: int = 1):
    rng = random.Random(seed)
    out = []
    for m in methods:
        for g in ([0] if m == "none" else GAMMAS):
            cfg = EngineConfig(method=m, gamma=g, draft="/d" if m == "draft_model" else None)
            for b in (1, 4):
                for r in range(repeats):
                    out.append(PointResult(run_id="t", point=GridPoint(config=cfg, concurrency=b, repeat=r),
                                           status="ok", sample=synthetic_sample(cfg, b, noise, rng),
                                           started_at="2026-01-01T00:00:00+00:00", seconds=1))
    return out


def test_noise_free_points_recover_the_true_coefficients():
    points = grid()
    coef = fit_coefficients(points)
    assert coef.overhead_ms == pytest.approx(TRUE["overhead_ms"], rel=1e-6)
    assert coef.per_seq_ms == pytest.approx(TRUE["per_seq_ms"], rel=1e-6)
    assert coef.per_token_ms == pytest.approx(TRUE["per_token_ms"], rel=1e-6)
    assert coef.draft_ms_per_token["draft_model"] == pytest.approx(4.0, rel=1e-6)
    assert coef.draft_ms_per_token_seq["draft_model"] == pytest.approx(0.5, rel=1e-6)
    assert coef.draft_ms_per_seq["ngram"] == pytest.approx(0.3, rel=1e-4)
    assert coef.spec_step_ms == pytest.approx(TRUE["spec_step"], rel=1e-4)
    assert coef.utilization == pytest.approx({"1": 0.9, "4": 0.8})


def test_noisy_points_recover_the_coefficients_within_tolerance():
    coef = fit_coefficients(grid(noise=0.05, repeats=3))
    assert coef.overhead_ms == pytest.approx(TRUE["overhead_ms"], rel=0.15)
    assert coef.per_token_ms == pytest.approx(TRUE["per_token_ms"], rel=0.3)
    assert coef.draft_ms_per_token["draft_model"] == pytest.approx(4.0, rel=0.3)


def test_fitted_acceptance_is_the_counters_ratio_per_position():
    points = grid()
    acc = {a.method: a for a in fit_acceptance(points)}
    assert acc["draft_model"].per_position == pytest.approx(CUM["draft_model"][:6])
    assert acc["ngram"].per_position == pytest.approx(CUM["ngram"][:6])
    assert acc["ngram"].draft_fraction == pytest.approx(FRACTION["ngram"])
    # position i pools only points whose γ reaches it: position 5 exists only at γ=6
    assert acc["ngram"].drafts[5] < acc["ngram"].drafts[0]


def test_predictions_of_the_fitted_model_match_the_generating_model():
    points = grid()
    acc = fit_acceptance(points)
    coef = fit_coefficients(points)
    for cfg in (EngineConfig(method="draft_model", gamma=5, draft="/d"), EngineConfig(method="ngram", gamma=2),
                EngineConfig(method="none")):
        for b in (1, 4):
            p = predict(coef, acc, cfg, b)
            assert p.tau == pytest.approx(true_tau(cfg), rel=1e-6)
            assert p.step_ms == pytest.approx(true_step_ms(cfg, b), rel=1e-6)


def test_tau_comes_from_decode_steps_not_drafts_when_ngram_skips_steps():
    s = synthetic_sample(EngineConfig(method="ngram", gamma=3), 1)
    assert tau_of(s) == pytest.approx(1 + 0.8 * sum(CUM["ngram"][:3]))


def test_predicting_a_method_never_measured_is_an_input_error():
    points = grid(methods=("none", "ngram"))
    with pytest.raises(InputError, match="no measured acceptance for draft_model"):
        predict(fit_coefficients(points), fit_acceptance(points), EngineConfig(method="draft_model", gamma=2), 1)


def test_nonnegative_least_squares_never_returns_negative_coefficients():
    rows = [[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]]
    ys = [3.0, 2.0, 1.0]  # the unconstrained slope is -1
    x = nonnegative_lstsq(rows, ys)
    assert min(x) >= 0 and x[1] == 0
    assert x[0] == pytest.approx(2.0)


def test_pure_python_normal_equations_agree_with_numpy():
    rows = [[1.0, 2.0, 0.5], [1.0, 3.0, 1.5], [1.0, 5.0, 0.0], [1.0, 1.0, 2.0]]
    ys = [3.0, 5.5, 6.0, 4.0]
    import numpy as np

    expected = np.linalg.lstsq(np.array(rows), np.array(ys), rcond=None)[0]
    assert _normal_equations(rows, ys) == pytest.approx(list(expected), abs=1e-6)
