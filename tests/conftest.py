"""Shared fixtures: every test gets its own SPECOPS_HOME (a real folder; the registry is a real
SQLite file inside it). Nothing touches the user's home."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def specops_home(tmp_path, monkeypatch):
    home = tmp_path / "specops-home"
    home.mkdir()
    monkeypatch.setenv("SPECOPS_HOME", str(home))
    for var in ("SPECOPS_DB", "SPECOPS_PROMETHEUS_URL", "SPECOPS_DEBUG", "SPECOPS_PLAYBOOKS"):
        monkeypatch.delenv(var, raising=False)
    return home


def run_cli(*args: str, env: dict | None = None, timeout: float = 120, input: str | None = None):
    """Run the real `specops` CLI in a subprocess (argv list, no shell)."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return subprocess.run([sys.executable, "-m", "specops", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout, input=input, cwd=str(REPO))


@pytest.fixture
def cli():
    return run_cli
