"""The runbook's per-position step (steps.RegistrySteps) on windows recorded from the real CPU engine
running ngram (tests/drift/traces): its drafts are shorter than K, so the rates are reported as lower
bounds and not judged; a draft model's full-length window is reported plainly. Real registry file."""

from __future__ import annotations

from specops.drift.observe import ALL, LabelWindow, Observation

from .recorded import load, observations


class One:  # answers with one observation
    def __init__(self, o):
        self.o = o

    def fetch(self, names):
        return {n: self.o for n in names}


def _per_position(obs, method):
    from specops.drift.steps import RegistrySteps
    from specops.registry import open_registry

    with open_registry() as reg:
        reg.upsert_deployment("tiny", platform="local", status="running", endpoint="http://127.0.0.1:9",
                              served_model_name="tiny", method=method)
        return RegistrySteps(reg, lambda dep: One(obs)).query("tiny", "per_position")[0]


def test_recorded_ngram_windows_are_lower_bounds_and_not_judged():
    trace = load("ngram-restart-gap.json")
    obs = observations(trace, trace["scrapes"])
    full = next(o for o in obs if isinstance(o, Observation) and o.total.drafts >= 500)
    w = full.total
    assert w.draft_tokens < w.drafts * len(w.accepted_per_pos)  # the engine's own counters: short drafts
    f = _per_position(full, "ngram")
    assert f.code == "QUERY_OK" and f.evidence["lower_bounds"] is True
    assert "lower bounds" in f.message and "not judged" in f.message


def test_full_length_draft_model_windows_are_reported_plainly():
    w = LabelWindow(drafts=100, draft_tokens=300, accepted=150, accepted_per_pos=(70, 50, 30))
    f = _per_position(Observation(deployment="tiny", at=0.0, window_s=60, labels={ALL: w}, gamma=3), "draft_model")
    assert f.evidence["lower_bounds"] is False and "not judged" not in f.message
    assert f.evidence["per_position"] == [0.7, 0.5, 0.3]
