"""Stored measurements become the planner's measured priors (draft × task, draft-weighted)."""

from __future__ import annotations

from datetime import datetime, timedelta

from specops.checks.priors import measured_priors


def _measure(reg, name, drafts, per_pos, task="code"):
    t = datetime(2026, 11, 1, 12, 0)
    reg.record_measurement(name, window_start=t, window_end=t + timedelta(minutes=1), acceptance_rate=None,
                           mean_acceptance_length=1 + sum(per_pos), per_position=per_pos, num_drafts=drafts,
                           num_draft_tokens=drafts * len(per_pos), num_accepted_tokens=int(drafts * sum(per_pos)),
                           task=task, source="bench")


def test_measurements_of_a_draft_become_one_weighted_prior_per_task(registry):
    _measure(registry, "tiny-matched", 300, [0.8, 0.5, 0.3])
    _measure(registry, "tiny-stale", 100, [0.4, 0.1, 0.02])
    _measure(registry, "tiny-matched", 500, [0.6, 0.3, 0.1], task="prose")
    _measure(registry, "tiny-matched", 20, [0.9, 0.9, 0.9], task="chat")  # too few drafts to trust
    priors = {(p.draft, p.task): p for p in measured_priors(registry)}
    assert set(priors) == {("tiny-draft@v1", "code"), ("tiny-draft@v1", "prose")}
    code = priors[("tiny-draft@v1", "code")]
    assert code.samples == 400 and code.method == "draft_model"
    assert abs(code.per_position[0] - (0.8 * 300 + 0.4 * 100) / 400) < 1e-9


def test_priors_plug_into_the_planners_priors():
    from specops.planner.priors import default_priors
    from specops.planner.types import MeasuredAcceptance

    item = MeasuredAcceptance(draft="tiny-draft@v1", method="draft_model", task="code", per_position=[0.7, 0.4],
                              samples=500)
    prior = default_priors().with_measured(item).lookup("draft_model", task="code", draft="tiny-draft@v1")
    assert "measured: 500 samples" in prior.source


def test_priors_can_name_drafts_by_their_registered_source(registry):
    _measure(registry, "tiny-matched", 300, [0.8, 0.5, 0.3])
    (prior,) = measured_priors(registry, draft_key="source")
    assert prior.draft == "acme/tiny-draft"
