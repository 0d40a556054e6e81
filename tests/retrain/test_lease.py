"""The retraining lease with real processes: a second request is refused naming the holder; an
interrupted (SIGTERM) or killed (SIGKILL) retraining leaves the lease released and the incumbent serving."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import pytest

from specops.registry import LeaseHeldError
from specops.retrain.lease import holder_is_dead, take_lease
from specops.retrain.prompts import write_prompts
from specops.settings import deployment_dir
from tests.conftest import REPO

LONG = json.dumps({"steps": 1_000_000, "threads": 1, "max_new_tokens": 16})


def _start(data) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "specops", "retrain", "--deployment", "chat", "--data", str(data),
                             "--params", LONG], cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ))


def _wait_until_training(proc: subprocess.Popen, timeout: float = 600) -> dict:
    """Until the job's progress.json shows optimizer steps (the process is mid-training)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        for f in (deployment_dir("chat") / "retrain").glob("job-*/progress.json"):
            progress = json.loads(f.read_text())
            if progress["step"] >= 10:
                return progress
        time.sleep(0.5)
    proc.kill()
    pytest.fail("retraining never reached step 10")


@pytest.fixture
def data(tmp_path, train_prompts):
    return write_prompts(train_prompts, tmp_path / "prompts.jsonl")


@pytest.mark.slow
def test_second_request_is_refused_naming_the_holder_and_sigterm_releases_the_lease(stale_registry, data, cli):
    reg = stale_registry
    first = _start(data)
    progress = _wait_until_training(first)
    assert progress["pid"] == first.pid

    second = cli("retrain", "--deployment", "chat", "--data", str(data))
    assert second.returncode == 2
    assert f":{first.pid}" in second.stderr and "still running" in second.stderr and "To fix:" in second.stderr
    assert "Traceback" not in second.stderr

    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=120) == 130
    (job,) = reg.retrain_jobs("chat")
    assert job.status == "failed" and "SIGTERM" in job.message
    assert reg.get_deployment("chat").draft_ref == "tiny-draft@v1"
    again = reg.start_retrain_job("chat", backend="local")  # free at once: no takeover needed
    reg.finish_retrain_job(again.id, status="failed", message="test")


@pytest.mark.slow
def test_a_retraining_killed_with_sigkill_does_not_block_the_next_one(stale_registry, data):
    reg = stale_registry
    proc = _start(data)
    _wait_until_training(proc)
    proc.kill()
    proc.wait(timeout=60)
    (job,) = reg.retrain_jobs("chat")
    assert job.status == "running" and holder_is_dead(job.holder)  # nothing in the process could run

    new = take_lease(reg, "chat", backend="local", reason="retry", params=None, lease_seconds=60)
    old = next(j for j in reg.retrain_jobs("chat") if j.id == job.id)
    assert old.status == "failed" and "is gone" in old.message and new.status == "running"
    assert reg.get_deployment("chat").draft_ref == "tiny-draft@v1"


def test_a_live_holder_on_another_host_keeps_the_lease_until_it_expires(stale_registry):
    reg = stale_registry
    past = datetime.now(timezone.utc) - timedelta(hours=3)
    reg.start_retrain_job("chat", backend="speculators", holder="gpu-node-7:4242", lease_seconds=3600, now=past)
    # expired (started 3 h ago, 1 h lease): taken over
    new = take_lease(reg, "chat", backend="local", reason=None, params=None, lease_seconds=3600)
    assert new.status == "running"
    with pytest.raises(LeaseHeldError, match=r"held by .*:\d+"):
        take_lease(reg, "chat", backend="local", reason=None, params=None, lease_seconds=3600)


def test_only_a_holder_on_this_host_whose_process_is_gone_counts_as_dead():
    import socket

    assert not holder_is_dead(f"{socket.gethostname()}:{os.getpid()}")
    assert not holder_is_dead("other-host:1")
    assert not holder_is_dead(None) and not holder_is_dead("user@host")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert holder_is_dead(f"{socket.gethostname()}:{gone.pid}")
