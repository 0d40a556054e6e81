"""A heal interrupted in the middle (SIGTERM while the draft trains) leaves the incumbent serving and
both leases released; a second heal of the same deployment meanwhile is refused with the holder's name.
Real CLI subprocesses, a real SQLite registry and real small models; the incumbent engine is a real
long-running process standing in for vLLM (see conftest)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from specops.engines import local
from specops.registry import open_registry
from specops.retrain.prompts import write_prompts
from specops.settings import deployment_dir
from tests.conftest import REPO
from tests.heal.conftest import register_local_stale_case
from tests.retrain.minimodels import prose_prompts


def _wait_for_progress(timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if list((deployment_dir("chat") / "retrain").glob("job-*/progress.json")):
            return
        time.sleep(0.2)
    pytest.fail("the heal never reached the training loop")


def test_an_interrupted_heal_leaves_the_incumbent_serving_and_releases_the_leases(
        cli, mini_models, incumbent_process, tmp_path):
    with open_registry() as reg:
        register_local_stale_case(reg, mini_models, incumbent_process)
        start = reg.get_deployment("chat").pid_start_time
    data = write_prompts(prose_prompts(30, offset=2000, stride=500), tmp_path / "prompts.jsonl")
    heal = subprocess.Popen([sys.executable, "-m", "specops", "heal", "--deployment", "chat", "--data", str(data),
                             "--params", json.dumps({"steps": 100000, "threads": 1})], cwd=str(REPO),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        _wait_for_progress()
        second = cli("heal", "--deployment", "chat", "--data", str(data))
        assert second.returncode == 2, second.stderr
        assert "a heal of chat is already running" in second.stderr
        assert f"held by {os.uname().nodename}:{heal.pid}" in second.stderr
        heal.send_signal(signal.SIGTERM)
        _, err = heal.communicate(timeout=120)
    finally:
        if heal.poll() is None:
            heal.kill()
    assert heal.returncode == 130, err
    assert local.alive(incumbent_process.pid, start)
    with open_registry() as reg:
        assert [j for j in reg.retrain_jobs(limit=20) if j.status == "running"] == []
        jobs = {j.deployment: j for j in reg.retrain_jobs(limit=20)}
        assert jobs["chat"].status == "failed" and "SIGTERM" in jobs["chat"].message
        assert jobs["chat-canary"].status == "failed" and jobs["chat-canary"].backend == "heal"
        row = reg.get_deployment("chat")
        assert row.draft_ref == "tiny-draft@v1" and row.pid == incumbent_process.pid
        kinds = [e.kind for e in reg.events(subject="chat", limit=50)]
        assert "heal.rollback" in kinds and "heal.finished" in kinds
        finished = reg.events(subject="chat", kind="heal.finished", limit=1)[0]
        assert finished.data["status"] == "failed"
        assert reg.events(subject="chat", kind="heal.target", limit=1)[0].data["to"] == "tiny@v2"
    # the lease is free again: a new heal gets past the lease (and fails later on the empty data file)
    (tmp_path / "empty.jsonl").write_text("\n")
    r = cli("heal", "--deployment", "chat", "--data", str(tmp_path / "empty.jsonl"))
    assert r.returncode == 2 and "holds no prompts" in r.stderr and "already running" not in r.stderr


def test_heal_refuses_two_prompt_sources_on_one_line(cli, tmp_path):
    r = cli("heal", "--deployment", "chat", "--data", str(tmp_path / "x.jsonl"), "--from-traffic")
    assert r.returncode == 2
    assert r.stderr.strip() == ("error: give exactly one source of prompts. To fix: pass --data FILE or "
                                "--from-traffic.")


def test_heal_dry_run_prints_the_plan_and_takes_no_lease(cli, mini_models, incumbent_process, tmp_path):
    with open_registry() as reg:
        register_local_stale_case(reg, mini_models, incumbent_process)
    data = write_prompts(prose_prompts(30, offset=2000, stride=500), tmp_path / "prompts.jsonl")
    r = cli("heal", "--deployment", "chat", "--data", str(data), "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "specops.retrain.local" in r.stdout and "chat-canary" in r.stdout and "promote (restart)" in r.stdout
    assert "same 24 held-out prompts, prompt by prompt, a sequential test" in r.stdout
    with open_registry() as reg:
        assert reg.retrain_jobs(limit=5) == []


@pytest.mark.parametrize(("option", "value", "word"), [("--alpha", "0.9", "alpha"), ("--budget", "1", "budget"),
                                                      ("--min-gain", "1.5", "min_gain")])
def test_heal_refuses_a_bad_canary_test_parameter_on_one_line_and_its_fix_gets_past_it(cli, tmp_path, option, value,
                                                                                        word):
    data = tmp_path / "p.jsonl"
    data.write_text('{"prompt": "x"}\n')
    r = cli("heal", "--deployment", "nowhere", "--data", str(data), option, value)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith(f"error: canary test: {word}") and "To fix: use --alpha in (0, 0.5]" in line
    fixed = {"--alpha": "0.05", "--budget": "8", "--min-gain": "0.05"}[option]  # what the fix says
    r = cli("heal", "--deployment", "nowhere", "--data", str(data), option, fixed)
    assert r.returncode == 2 and "canary test" not in r.stderr and "nowhere" in r.stderr
