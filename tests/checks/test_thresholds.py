"""Thresholds mean the same at every γ; the hard floor comes from the performance model."""

from __future__ import annotations

import pytest

from specops.checks.thresholds import leviathan_speedup, percentile, performance_floor
from specops.speculation import alpha_from_tau, expected_tokens


def test_a_healthy_eagle3_at_gamma_7_passes_the_seed_floor_on_alpha_not_on_rate():
    """vLLM reference: K=7, τ=3.53 -> accepted/drafted (3.53 - 1) / 7 = 0.3614, but the per-token α is
    0.74303, solved by hand (bisection, 5 digits): 1 + α + … + α⁷ = 1 + .74303 + .55210 + .41023 + .30481
    + .22649 + .16829 + .12504 = 3.52999. The gpu-default profile's P50 floor (0.70) passes on α and
    would fail on the rate."""
    from specops.checks.playbook import get_profile

    floor = get_profile("gpu-default").acceptance_p50_min
    assert floor == 0.70
    assert alpha_from_tau(3.53, 7) == pytest.approx(0.74303, abs=1e-4)
    assert alpha_from_tau(3.53, 7) > floor > (3.53 - 1) / 7


# Leviathan: S(α, γ) = (1 + α + … + α^γ) / (γ·c + 1), so S = 1 where 1 + α + … + α^γ = γ·c + 1. Solved by
# hand (bisection to 4 digits; checked against the polynomial's root):
#   c=0.05, γ=3: 1 + α + α² + α³ = 1.15        α=0.1307: 1 + .1307 + .01708 + .00223 = 1.15001
#   c=0.2,  γ=3: 1 + α + α² + α³ = 1.6         α=0.3894: 1 + .3894 + .15163 + .05905 = 1.60008
#   c=0.2,  γ=5: 1 + α + … + α⁵ = 2.0          α=0.5087: 1 + .5087 + .25878 + .13164 + .06697 + .03407 = 2.00016
#   c=0.5,  γ=2: 1 + α + α² = 2 -> α = (√5 − 1) / 2 = 0.61803 (the golden ratio's inverse)
@pytest.mark.parametrize("c, gamma, floor", [(0.05, 3, 0.1307), (0.2, 3, 0.3894), (0.2, 5, 0.5087),
                                             (0.5, 2, 0.61803)])
def test_performance_floor_is_where_predicted_speedup_crosses_one(c, gamma, floor):
    assert performance_floor(leviathan_speedup(c), gamma) == pytest.approx(floor, abs=1e-4)


def test_floor_rises_with_draft_cost_and_is_one_when_speculation_cannot_pay():
    assert performance_floor(leviathan_speedup(0.05), 3) < performance_floor(leviathan_speedup(0.3), 3)
    assert performance_floor(leviathan_speedup(2.0), 4) == 1.0  # E ≤ 5 < 4·2+1
    assert performance_floor(lambda a, g: 1.5, 3) == 0.0


def test_expected_tokens_and_percentiles():
    assert expected_tokens(0.5, 3) == pytest.approx(1.875)  # 1 + .5 + .25 + .125
    assert percentile([1, 2, 3, 4, 5], 50) == 3 and percentile([0.0, 1.0], 5) == pytest.approx(0.05)


def test_gpu_profile_takes_the_floor_from_the_planners_performance_model():
    from specops.checks.playbook import get_profile
    from specops.checks.thresholds import speedup_model

    gpu = get_profile("gpu-default")
    model, where = speedup_model(gpu, {"method": "eagle3", "target_ref": "llama-3.1-8b-instruct@v1"})
    assert where.startswith("planner performance model") and "H100" in where
    floors = [performance_floor(model, g) for g in (1, 3, 7)]
    assert 0 < floors[0] < floors[1] < floors[2] < 1  # longer chains need a better draft to pay
    # a target the planner does not know, or a profile without a GPU: the documented fallback
    assert speedup_model(gpu, {"method": "eagle3", "target_ref": "mystery@v1"})[1].startswith("Leviathan")
    assert speedup_model(get_profile("cpu-tiny"), {"method": "draft_model", "target_ref": "llama-3.1-8b-instruct@v1"}
                         )[1].startswith("Leviathan")
