"""The acceptance-collapse runbook over a real registry file (RegistrySteps): each cause's step proves
it from the record, or refutes it; the acceptance step names the basis it judged on. The engine is
not started: the source answers with one constructed window (named ``One``), everything else is real
(registry, stored baseline, registered models from tests/assets/tiny-models, the runbook runner)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specops.drift.detectors import Baseline, LabelBaseline
from specops.drift.observe import ALL, LabelWindow, Observation
from specops.drift.runbooks import RunbookContext, run_runbook
from specops.drift.steps import RegistrySteps
from specops.drift.store import HistoryStore

TINY = Path(__file__).resolve().parents[1] / "assets" / "tiny-models"
BASE = Baseline(labels={ALL: LabelBaseline(mean=0.75, std=0.02, windows=30, tau_mean=2.3, first_mean=0.78,
                                           first_std=0.02)}, recorded_at=0.0)


class One:  # answers with one constructed observation
    def __init__(self, o):
        self.o = o

    def fetch(self, names):
        return {n: self.o for n in names}


def _window(tau: float, mean_drafted: float = 3.0, first: float | None = None) -> Observation:
    drafts = 1000.0
    acc = drafts * (tau - 1)
    p0 = drafts * first if first is not None else min(drafts, acc)
    w = LabelWindow(drafts, drafts * mean_drafted, acc, (p0, max(0.0, acc - p0) * 0.6, max(0.0, acc - p0) * 0.4))
    return Observation(deployment="d", at=1_767_225_600.0, window_s=60, labels={ALL: w}, gamma=3, running=4)


@pytest.fixture()
def reg():
    from specops.registry import open_registry

    with open_registry() as r:
        yield r


def _deploy(reg, sc: dict, *, kv: bool = False, draft: str | None = None):
    argv = ["vllm", "serve", str(TINY / "target-v1"), "--speculative-config", json.dumps(sc)]
    if kv:
        argv += ["--kv-transfer-config", '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}']
    reg.upsert_deployment("d", platform="local", status="running", endpoint="http://127.0.0.1:9",
                          served_model_name="d", method=sc["method"], argv_redacted=argv, engine_config={},
                          draft_ref=draft)
    HistoryStore(reg).set_baseline("d", BASE)


def _run(reg, obs, book="acceptance-collapse"):
    return run_runbook(book, "d", RunbookContext(steps=RegistrySteps(reg, lambda dep: One(obs)), allow_restart=False))


def _step(res, sid):
    return next(s for s in res.steps if s.id == sid)


def test_a_kv_connector_launch_is_proven_and_the_other_causes_refuted(reg):
    _deploy(reg, {"method": "ngram", "num_speculative_tokens": 3}, kv=True)
    res = _run(reg, _window(1.02))
    codes = {f.code for f in res.findings}
    assert "ACCEPTANCE_COLLAPSE" in codes and "COLLAPSE_KV_WITHOUT_DRAFT_KV" in codes
    assert _step(res, "k0_schedule").findings[0].code == "QUERY_OK"  # no K=0 range: refuted
    assert _step(res, "method").findings[0].code == "QUERY_OK"  # ngram has no draft: refuted
    assert res.next_action.if_any == ["COLLAPSE_KV_WITHOUT_DRAFT_KV"]
    now = _step(res, "now").findings[0]
    assert now.evidence["basis"] == "drafted_token"  # ngram drafts stop short: per drafted token


def test_a_draft_for_another_method_is_a_method_mismatch(reg):
    target = reg.register_target(str(TINY / "target-v1"))
    d, _ = reg.register_draft(str(TINY / "draft-v1"), target=target.ref, method="draft_model")
    _deploy(reg, {"method": "eagle3", "model": str(TINY / "draft-v1"), "num_speculative_tokens": 3}, draft=d.ref)
    res = _run(reg, _window(1.01))
    f = _step(res, "method").findings[0]
    assert f.code == "COLLAPSE_METHOD_MISMATCH" and f.evidence["draft_method"] == "draft_model"
    assert _step(res, "kv_connector").findings[0].code == "QUERY_OK"
    assert res.next_action.if_any == ["COLLAPSE_METHOD_MISMATCH"]


def test_a_restart_event_in_the_registry_makes_stale_weights_the_suspect(reg):
    _deploy(reg, {"method": "ngram", "num_speculative_tokens": 3,
                  "num_speculative_tokens_per_batch_size": [[1, 16, 3], [17, 256, 0]]})
    reg.record_event("deployment.status", "d", "d restarted (sleep/wake cycle)")
    res = _run(reg, _window(1.01))
    assert _step(res, "weights").findings[0].code == "COLLAPSE_STALE_WEIGHTS"
    k0 = _step(res, "k0_schedule").findings[0]  # a K=0 range, but no stored window ran without drafts
    assert k0.code == "QUERY_OK" and "K=0 range" in k0.message


def test_a_budget_change_under_a_schedule_is_not_a_drop_and_the_step_says_its_basis(reg):
    _deploy(reg, {"method": "eagle3", "model": "x/y", "num_speculative_tokens": 3,
                  "num_speculative_tokens_per_batch_size": [[1, 8, 3], [9, 64, 1]]})
    # busy hour: one token drafted per step, τ 1.78 (far below the baseline's 2.3); first-token acceptance holds
    f = _run(reg, _window(1.78, mean_drafted=1.0, first=0.78), "acceptance-drop").findings[0]
    assert f.code == "QUERY_OK" and f.evidence["basis"] == "drafted_token"
    assert "per drafted token" in f.message and "budget change" in f.message
    # the same τ with first-token acceptance down is a drop, on the same basis
    f = _run(reg, _window(1.5, mean_drafted=1.0, first=0.5), "acceptance-drop").findings[0]
    assert f.code == "ACCEPTANCE_DROP" and f.evidence["basis"] == "drafted_token"


def test_with_adaptive_verification_tau_is_not_judged_and_the_assumption_is_named(reg):
    _deploy(reg, {"method": "eagle3", "model": "x/y", "num_speculative_tokens": 3,
                  "enable_adaptive_verification": True})
    res = _run(reg, _window(1.9), "acceptance-drop")
    now = _step(res, "now")
    assert now.status == "error"  # no TPOT baseline recorded: could not evaluate, never a pass
    assert "adaptive verification is on" in now.detail and "assumption" in now.detail
    assert res.verdict == "could not evaluate"


def test_the_monitor_reads_adaptive_verification_and_the_kv_connector_from_the_recorded_launch(reg):
    from specops.drift.fleet import watch_targets

    _deploy(reg, {"method": "eagle3", "model": "x/y", "num_speculative_tokens": 3,
                  "enable_adaptive_verification": True}, kv=True)
    (t,), _ = watch_targets(reg)
    assert t.adaptive_verification is True and t.kv_connector is True and t.method == "eagle3"
    _deploy(reg, {"method": "eagle3", "model": "x/y", "num_speculative_tokens": 3})
    (t,), _ = watch_targets(reg)
    assert t.adaptive_verification is False and t.kv_connector is False
