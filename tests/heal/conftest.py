"""Fixtures for heal tests: the small real models of tests/retrain (built in seconds), a stand-in
incumbent process, and the stale-draft registry case for a local deployment."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.retrain import minimodels


@pytest.fixture(scope="session")
def mini_models(tmp_path_factory):
    return minimodels.build(tmp_path_factory.mktemp("heal-mini-models"))


@pytest.fixture
def incumbent_process():
    """A real long-running process standing in for the incumbent engine (no vLLM start: these tests are
    about leases and clean-up, which only look at the process identity)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(900)"], start_new_session=True)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def register_local_stale_case(reg, models, proc, deployment: str = "chat"):
    """target-a (v1) / draft-a, then target-b (v2) served in place: the draft is stale."""
    from specops.engines import local

    reg.register_target(str(models["target-a"]), name="tiny", version="v1")
    reg.register_target(str(models["target-b"]), name="tiny", version="v2")
    reg.register_draft(str(models["draft-a"]), target="tiny@v1", name="tiny-draft", version="v1",
                       method="draft_model")
    reg.upsert_deployment(deployment, platform="local", status="running", target_ref="tiny@v1",
                          draft_ref="tiny-draft@v1", method="draft_model", num_speculative_tokens=3,
                          endpoint="http://127.0.0.1:9", served_model_name="tiny", pid=proc.pid,
                          pid_start_time=local.process_start_time(proc.pid),
                          argv_redacted=[sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model",
                                         str(models["target-b"])])
