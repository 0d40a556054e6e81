"""The monitor's retraining hand-off: `python -m specops.retrain.worker`, a library call in a process
of its own (not the CLI). Real subprocess, real registry file."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO


def _worker(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specops.retrain.worker", *args], capture_output=True, text=True,
                          cwd=str(REPO), timeout=120)


@pytest.mark.costly  # the worker's own process (python -m specops.retrain.worker)
def test_the_worker_reports_a_deployment_it_does_not_know_in_one_line_and_exit_2(tmp_path):
    data = tmp_path / "p.jsonl"
    data.write_text('{"prompt": "hello"}\n')
    r = _worker("--deployment", "nope", "--data", str(data), "--reason", "drift")
    assert r.returncode == 2 and r.stderr.startswith("error: ") and "nope" in r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1


@pytest.mark.costly  # the worker's own process (python -m specops.retrain.worker)
def test_the_worker_needs_a_source_of_prompts():
    r = _worker("--deployment", "chat")
    assert r.returncode == 2 and "--data" in r.stderr
