"""The fit, on synthetic points from a ground truth the fitter cannot represent exactly
(tests/tune/fakes.py: the fitter's linear costs plus a contention cost quadratic in the verified
tokens, and ±2 % seeded noise; internally consistent engine counters, no engine).

How the error bounds are derived, so that they are not just "whatever the fitter gets today":

- **On the measured points** the fitter minimises the root-mean-square relative residual
  ``1 − model/observed`` over non-negative coefficients (specops/tune/fit.py). The generating
  coefficients (``TRUE``) are non-negative, so they are one candidate the fitter considered: the fit's
  RMS relative residual can be no larger than theirs. That residual is computed here from the
  ground truth (``modelled_step_ms`` against each observed step time), not from the fitter.
- **On configurations never measured** (γ=5, concurrency 2) nothing guarantees a least-squares fit;
  the yardstick is an oracle that knows every cost the fitter models exactly and only misses the
  contention term. Its relative error at a point is the contention share ``unmodelled / true`` there.
  The fit must predict every held-out point within the worst oracle error over those points (5.8 %);
  today it does within 1.8 %. It is a yardstick, not a theorem: a fitter that mislearns a large term
  exceeds both (a missing per-sequence column: 5.9 % held out, RMS 0.050 against 0.032; the measured-point
  bound is the one test_a_fitter_missing_a_term_breaks_the_bound pins), one that drops a 1-2 ms term at this
  noise level may not, and no bound this honest can catch that.
"""

from __future__ import annotations

import math
import random

import pytest

from specops.errors import InputError
from specops.tune import fit as fit_module
from specops.tune.fit import (
    _normal_equations,
    fit_acceptance,
    fit_coefficients,
    nonnegative_lstsq,
    predict,
    step_ms_of,
    tau_of,
)
from specops.tune.types import EngineConfig, GridPoint, PointResult
from tests.tune.fakes import (
    CUM,
    FRACTION,
    modelled_step_ms,
    synthetic_sample,
    true_step_ms,
    unmodelled_step_ms,
)

GAMMAS = [1, 2, 3, 4, 6]
NOISE = 0.02
HELD_OUT = [EngineConfig(method=m, gamma=5, draft="/d" if m == "draft_model" else None)
            for m in ("ngram", "draft_model")]


def grid(noise: float = NOISE, seed: int = 3, methods=("none", "ngram", "draft_model"), repeats: int = 3):
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


def _rms(values: list[float]) -> float:
    return math.sqrt(sum(v * v for v in values) / len(values))


def fit_errors(points: list[PointResult]) -> dict[str, float]:
    """The fit's errors and the bounds they are held to (see the module docstring)."""
    coef, acc = fit_coefficients(points), fit_acceptance(points)
    fitted = [1 - predict(coef, acc, r.point.config, r.point.concurrency).step_ms / step_ms_of(r.sample)
              for r in points]
    oracle = [1 - modelled_step_ms(r.point.config, r.point.concurrency) / step_ms_of(r.sample) for r in points]
    held = [(c, b) for c in HELD_OUT for b in (1, 2, 4)]
    return {"rms": _rms(fitted), "rms_bound": _rms(oracle),
            "held_out": max(abs(predict(coef, acc, c, b).step_ms / true_step_ms(c, b) - 1) for c, b in held),
            "held_out_bound": max(unmodelled_step_ms(c, b) / true_step_ms(c, b) for c, b in held)}


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_the_fit_is_no_worse_than_the_generating_coefficients_on_measured_points(seed):
    e = fit_errors(grid(seed=seed))
    assert e["rms_bound"] > NOISE / 2  # the contention term makes the truth unrepresentable: no exact fit exists
    assert e["rms"] <= e["rms_bound"], e


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_unmeasured_configurations_are_predicted_within_the_oracle_error(seed):
    e = fit_errors(grid(seed=seed))
    assert e["held_out"] <= e["held_out_bound"], e


def test_a_fitter_missing_a_term_breaks_the_bound(monkeypatch):
    """The measured-point bound is tight enough to matter: a fitter without the per-sequence cost column
    (its feature zeroed, as a bug in _features would) exceeds it by half (0.050 against 0.032). Faked: the fitter's feature
    function, to build the broken fitter."""
    features = fit_module._features

    def without_per_seq(cols, method, gamma, b, f):
        return [0.0 if kind == "per_seq" else v for (kind, _), v in zip(cols, features(cols, method, gamma, b, f),
                                                                          strict=True)]

    monkeypatch.setattr(fit_module, "_features", without_per_seq)
    e = fit_errors(grid())
    assert e["rms"] > 1.3 * e["rms_bound"], e


def test_fitted_tau_is_the_generating_acceptance_at_unmeasured_gammas():
    points = grid()
    acc, coef = fit_acceptance(points), fit_coefficients(points)
    for cfg in [*HELD_OUT, EngineConfig(method="none")]:
        # τ = 1 + f·Σ cumulative acceptance; the counters are exact, so the fitted τ is too (noise is on time only)
        expected = 1.0 if cfg.method == "none" else 1 + FRACTION[cfg.method] * sum(CUM[cfg.method][:cfg.gamma])
        assert predict(coef, acc, cfg, 1).tau == pytest.approx(expected, rel=1e-9)


def test_fitted_acceptance_is_the_counters_ratio_per_position():
    points = grid()
    acc = {a.method: a for a in fit_acceptance(points)}
    assert acc["draft_model"].per_position == pytest.approx(CUM["draft_model"][:6])
    assert acc["ngram"].per_position == pytest.approx(CUM["ngram"][:6])
    assert acc["ngram"].draft_fraction == pytest.approx(FRACTION["ngram"])
    # position i pools only points whose γ reaches it: position 5 exists only at γ=6
    assert acc["ngram"].drafts[5] < acc["ngram"].drafts[0]


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
