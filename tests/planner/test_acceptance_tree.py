"""A tree's acceptance by its size (specops.planner.acceptance_tree, acceptance_fit's tree term).

Real data: the shipped playbooks/data/acceptance_2026-12.csv, fitted without the source a test judges (leave one
source out); nothing faked. The first test uses only interfaces the old code had (fit, predict_row), so it runs, and
fails, on the old per-method tree switch.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from specops.planner.acceptance import estimate, estimate_prior, fit, load_rows, solve_gamma
from specops.planner.acceptance_fit import _kappa_points, row_branching
from specops.planner.acceptance_tree import fit_kappa, tree_tau
from specops.planner.uncertainty import tau_ceiling
from specops.speculation import expected_tokens


@pytest.fixture(scope="module")
def rows():
    return load_rows()


@pytest.fixture(scope="module")
def without_specforge(rows):
    return fit([r for r in rows if r.source_id != "specforge-issue-339"])


def test_specforge_small_tree_is_priced_near_its_chain_held_out(rows, without_specforge):
    """SpecForge #339 (Qwen3-30B-A3B, SGLang) publishes τ 1.99 for steps 3 / topk 3 / num_draft 4 (three draft
    tokens: nearly a chain) and 2.27 for num_draft 8, against 1.86 for the chain of 3. With the source held out the
    old switch predicted 3.1 for both (a chain of 3 with no decay plus the tree shift, whatever the size)."""
    by_id = {r.id: r for r in rows}
    small, larger, chain = (without_specforge.predict_row(by_id[i]) for i in ("A051", "A057", "A056"))
    assert abs(math.log(small / 1.99)) < 0.30, small
    assert small < larger, (small, larger)           # a larger tree at the same depth accepts more
    assert larger / chain < 1.25, (larger, chain)    # published 2.27 / 1.86 = 1.22; the old switch gave 1.7


def test_a_tree_of_one_candidate_a_level_is_its_chain(rows):
    """b = 1 (as many draft tokens as levels) gives the chain's τ exactly, for the fitted model and the formula."""
    model = fit(rows)
    for a0, depth, d in ((0.6, 3, 0.9), (0.8, 5, 0.95), (0.97, 8, 1.0)):
        assert tree_tau(a0, depth, d, 1.0, 0.97) == pytest.approx(expected_tokens(a0, depth, d, 0.97), abs=1e-12)
    chain = estimate(model, "eagle3", task="chat", structure="chain")
    tree = estimate(model, "eagle3", task="chat", structure="tree", depth=3, tree_tokens=3)
    assert tree.tau(3) == pytest.approx(chain.tau(3), abs=1e-9)
    big = estimate(model, "eagle3", task="chat", structure="tree", depth=3, tree_tokens=21)
    assert big.tau(3) > chain.tau(3) + 0.1 and big.branching > 1.0
    assert "κ" in big.tree_note and "sweep" in big.tree_note


def test_kappa_comes_from_tree_size_sweeps_only(rows):
    """κ is fitted on sweeps of tree sizes within one source; with none in the rows a tree counts as its chain (κ 0),
    and the estimate says so."""
    model = fit(rows)
    assert 0.0 < model.kappa.value < 1.0, model.kappa
    assert {"A051", "A266", "A613", "A616"} <= set(model.kappa.rows)
    no_sweep = [r for r in rows if r.source_id not in {"specforge-issue-339", "angelslim-issue-163", "liu2026-illusion"}]
    bare = fit(no_sweep)
    assert bare.kappa.value == 0.0 and not bare.kappa.rows
    est = estimate(bare, "eagle3", task="chat", structure="tree", depth=8, tree_tokens=60)
    assert est.branching == 1.0 and "no tree-size sweep" in est.tree_note
    d = lambda r: 0.9  # noqa: E731 - any decay: the sweep points are what is checked
    assert fit_kappa(_kappa_points(no_sweep, d), math.log, 0.97, 0.02).sweeps == 0


def test_tree_prior_carries_its_levels_and_range(without_specforge):
    """The prior a published tree row is predicted with (priors.lookup -> estimate_prior) carries the tree's
    cumulative level rates, so the performance model's τ is the tree's; the range's ceiling is the tree's too."""
    prior = estimate_prior(without_specforge, "eagle3", task="chat", structure="tree", depth=8, tree_tokens=59)
    est = prior.evidence
    assert prior.per_position and prior.expected_tokens(8) == pytest.approx(est.tau(8), rel=1e-9)
    chain = estimate_prior(without_specforge, "eagle3", task="chat", structure="chain")
    assert chain.per_position is None and prior.expected_tokens(8) > chain.expected_tokens(8)
    assert tau_ceiling(prior, 8, est.tau(8)) > est.tau(8)


def test_larger_trees_accept_more_at_the_same_depth(rows):
    """τ rises with the tree's tokens at a fixed depth (AngelSlim #163 / SpecForge #339 setting), and a row's b is
    its tokens over its depth."""
    model = fit(rows)
    base = next(r for r in rows if r.id == "A616")  # steps 7, 63 draft tokens
    taus = [model.predict_row(replace(base, tree_tokens=n)) for n in (7, 14, 28, 63)]
    assert taus == sorted(taus) and taus[-1] - taus[0] > 0.3, taus
    assert row_branching(base) == pytest.approx(63 / solve_gamma(base))
