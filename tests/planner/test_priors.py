"""Acceptance priors from the published table: conversions, citations, leave-one-out, measured hook."""

import pytest

from specops.planner.priors import (
    AcceptancePrior,
    calibrate,
    load_published,
    solve_alpha,
)
from specops.planner.types import MeasuredAcceptance
from specops.speculation import expected_tokens


def test_vllm_accepted_over_drafted_is_not_alpha():
    # shared/reference: K=7, τ=3.53 -> r = 0.36 but α ≈ 0.74 (i.i.d.)
    r = (3.53 - 1) / 7
    alpha = solve_alpha(3.53, 7, 1.0)
    assert r == pytest.approx(0.361, abs=0.002)
    assert alpha == pytest.approx(0.745, abs=0.01)


def test_expected_tokens_matches_leviathan_closed_form_without_decay():
    # (1 − 0.8⁶) / (1 − 0.8) = (1 − 0.262144) / 0.2 = 3.68928 = 1 + .8 + .64 + .512 + .4096 + .32768
    assert expected_tokens(0.8, 5, 1.0) == pytest.approx(3.68928)


def test_the_vllm_issue_row_is_converted_through_tau_not_taken_as_alpha():
    row = next(r for r in load_published() if "26191" in r.source)
    assert row.acceptance_rate == pytest.approx(0.362)
    assert row.alpha0() > 0.7  # τ 3.53 at K=7 -> α0 ≈ 0.79 with EAGLE-3 decay, far above 0.362


def test_leviathan_rows_are_taken_as_alpha():
    row = next(r for r in load_published() if r.source.startswith("Leviathan") and r.temperature == 0)
    assert row.alpha0() == row.acceptance_rate


def test_priors_carry_the_citation_of_a_published_row():
    priors = calibrate(load_published())
    prior = priors.lookup("eagle3", task="chat")
    assert prior.source.startswith("published: ")
    assert "Table" in prior.source or "table" in prior.source or "issue" in prior.source


def test_temperature_lowers_acceptance():
    priors = calibrate(load_published())
    assert priors.lookup("eagle3", task="chat", temperature=1.0).alpha0 < priors.lookup("eagle3", task="chat").alpha0
    assert 0 < priors.temperature_lambda < 1


def test_leaving_a_source_out_removes_its_rows():
    rows = load_published()
    source = next(r.source for r in rows if "26191" in r.source)
    priors = calibrate(rows, exclude_source=source)
    cites = [c for entries in priors.table.values() for _, c in entries]
    assert not any("26191" in c for c in cites)


def test_methods_without_rows_borrow_and_say_so():
    priors = calibrate(load_published())
    prior = priors.lookup("suffix", task="chat")
    assert "borrowed from ngram" in prior.source


def test_measured_acceptance_overrides_the_published_prior_and_reports_samples():
    priors = calibrate(load_published()).with_measured(
        MeasuredAcceptance(draft="d1", method="eagle3", task="chat", per_position=[0.8, 0.6, 0.45], samples=1200))
    prior = priors.lookup("eagle3", task="chat", draft="d1")
    assert prior.source == "measured: 1200 samples"
    assert prior.expected_tokens(3) == pytest.approx(1 + 0.8 + 0.6 + 0.45)
    assert len(prior.cumulative(5)) == 5  # extrapolated beyond the measured positions
    other = priors.lookup("eagle3", task="chat", draft="d2")
    assert other.source.startswith("published")


def test_measured_rates_must_be_cumulative():
    with pytest.raises(ValueError, match="cumulative"):
        MeasuredAcceptance(draft="d", method="eagle3", task="chat", per_position=[0.5, 0.7], samples=10)


def test_acceptance_rate_is_accepted_over_drafted():
    prior = AcceptancePrior(alpha0=0.8, decay=1.0, source="x")
    # E(4) = 1 + .8 + .64 + .512 + .4096 = 3.3616 tokens per step; accepted / drafted = 2.3616 / 4
    assert prior.expected_tokens(4) == pytest.approx(3.3616)
    assert prior.acceptance_rate(4) == pytest.approx(0.5904)


def test_spec_bench_leaderboard_rows_of_tree_methods_are_the_harness_default_trees():
    """The Spec-Bench leaderboard runs every method with its own defaults (EAGLE-2/3: a dynamic tree of 60 draft
    tokens, depth 5; Medusa: mc_sim_7b_63), so a row that does not state γ is a tree there, not a chain of unknown
    γ; and the tree lifts the predicted τ of the EAGLE-3 row toward the 5.71 the leaderboard publishes."""
    import math

    from specops.planner.catalog import load_catalogs
    from specops.planner.evidence import predict_row
    from specops.planner.priors import default_priors

    rows = [r for r in load_published() if "spec-bench" in r.source.lower() and r.method in ("eagle", "eagle3", "medusa")
            and r.speedup]
    assert {(r.method, r.generation) for r in rows} >= {("eagle3", "3"), ("eagle", "2"), ("medusa", None)}
    assert all(r.structure == "tree" and r.tree_tokens for r in rows), [(r.method, r.structure) for r in rows]
    e3 = next(r for r in rows if r.method == "eagle3")
    assert (e3.gamma, e3.tree_tokens) == (5, 60)
    e, _ = predict_row(e3, default_priors(), load_catalogs())
    assert abs(math.log(e3.tau / e.tau)) < 0.35, (e3.tau, e.tau)  # a chain at the best γ gave τ 2.84 (ln 0.70)
