"""The policy option ``open_retraining: {heal: true}``: the monitor runs the whole heal loop, not
only a retraining job, under the heal's lease. Real registry (SQLite), the real ``ActionRunner`` and
``EngineExecutor``, the real detached worker process and the real ``specops.heal.heal``; the small
real models of tests/retrain and a long-running process standing in for the incumbent engine (no
vLLM start). What is given rather than measured: the CHANGED_MODEL finding itself (its detection on a
real engine is tests/heal/test_closed_loop_engine.py). The whole loop on a real engine (retrain ≈ minutes,
a canary start) is tests/heal/test_closed_loop_engine.py; here the heal stops at its lease (held by
another heal) or at its plan (``--dry-run``)."""

from __future__ import annotations

import json
import subprocess

import pytest

from specops.drift.actions import EngineExecutor, RegistryEvents, _spawn_detached
from specops.drift.policy import ActionRunner, ActionSpec, Policy
from specops.models import Finding
from specops.registry import open_registry
from specops.retrain.prompts import write_prompts
from tests.conftest import REPO
from tests.heal.conftest import register_local_stale_case
from tests.helpers.wait import wait_until
from tests.retrain.minimodels import prose_prompts

POLICY = {"name": "heal-on-changed-model", "rules": [
    {"name": "heal-stale-draft", "when": ["CHANGED_MODEL"], "actions": [{"kind": "open_retraining", "heal": True}]}]}
FINDING = Finding(code="CHANGED_MODEL", severity="error", message="chat: the live target is not what the draft "
                  "was trained against", evidence={"deployment": "chat", "at": 1000.0})


def test_heal_is_an_option_of_open_retraining_only():
    with pytest.raises(ValueError, match="heal: true is an option of open_retraining"):
        ActionSpec(kind="notify", heal=True)
    assert Policy.model_validate(POLICY).rules[0].actions[0].heal is True


def test_the_monitor_starts_the_heal_worker_which_runs_heal_under_its_lease(mini_models, incumbent_process,
                                                                            tmp_path):
    from specops.heal.canary import canary_name
    from specops.heal.run import HEAL_BACKEND
    from specops.retrain.lease import take_lease

    data = write_prompts(prose_prompts(30, offset=2000, stride=500), tmp_path / "prompts.jsonl")
    spawned: list[tuple[list[str], object]] = []

    def spawn(argv, logfile):  # the real detached start, with its argv kept for the asserts
        spawned.append((argv, logfile))
        _spawn_detached(argv, logfile)

    with open_registry() as reg:
        register_local_stale_case(reg, mini_models, incumbent_process)
        reg.upsert_deployment("chat-canary", platform="local", status="pending")
        other = take_lease(reg, canary_name("chat"), backend=HEAL_BACKEND, reason="another heal", params=None,
                           lease_seconds=600)  # a heal of chat already runs
        runner = ActionRunner(Policy.model_validate(POLICY), EngineExecutor(reg, retrain_data=str(data), spawn=spawn),
                              RegistryEvents(reg))
        [rec] = runner.apply(1000.0, "chat", [FINDING])
        assert (rec.action, rec.outcome) == ("open_retraining", "done"), rec
        [(argv, logfile)] = spawned
        assert argv[1:5] == ["-m", "specops.heal.worker", "--deployment", "chat"] and argv[-2:] == ["--data", str(data)]
        assert logfile.parent.name == "heal"
        # the worker ran the real heal, which stopped at the heal's lease: one heal per deployment
        text = wait_until(lambda: logfile.is_file() and "error:" in logfile.read_text() and logfile.read_text(),
                          120, "the heal worker's verdict in its log")
        assert "a heal of chat is already running" in text, text
        # the same episode does not start a second heal
        assert runner.apply(1060.0, "chat", [FINDING]) == [] and len(spawned) == 1
        kinds = [e.kind for e in reg.events(subject="chat", limit=50)]
        assert "monitor.open_retraining" in kinds and "heal.started" not in kinds
        reg.finish_retrain_job(other.id, status="succeeded", message="done")

    # with the lease free, the same worker plans the whole loop with heal's default hand-over
    r = subprocess.run([*argv, "--dry-run"], capture_output=True, text=True, cwd=str(REPO), timeout=300)
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["status"] == "dry-run", plan
    steps = plan["plan"]
    assert [s.split(" ", 1)[0] for s in steps] == ["retrain", "train-stage", "canary:", "promote"], steps
    assert steps[-1].startswith("promote (restart)")


def test_a_heal_needs_a_local_deployment(tmp_path):
    from specops.drift.outcomes import Fatal

    with open_registry() as reg:
        reg.upsert_deployment("k", platform="kubernetes", status="running")
        with pytest.raises(Fatal, match="a heal of k"):
            EngineExecutor(reg, retrain_data=str(tmp_path / "p.jsonl"), spawn=lambda *a: None).open_retraining(
                "k", "why", heal=True)
