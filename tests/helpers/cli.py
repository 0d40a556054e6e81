"""Helpers shared by the real-engine tests that drive the CLI in subprocesses."""

from __future__ import annotations

import pytest

CODE_PROMPTS = ["def fibonacci(n):\n    ", "import os\nimport sys\n\n\ndef main():\n",
                "    for key, value in sorted(mapping.items()):\n        if key",
                "def read_config(path):\n    with open(path) as f:\n"]
"""Short code prompts the tiny models were distilled on (their drafts accept much of them)."""


def ok(r):
    """``r`` (a CompletedProcess) when it exited 0; else the test fails with its output's tails."""
    if r.returncode != 0:
        pytest.fail(f"exit {r.returncode}\nstdout: {r.stdout[-3000:]}\nstderr: {r.stderr[-3000:]}", pytrace=False)
    return r
