"""Issue 26: hostile input gets one line and exit 2 (or is skipped with a note), never a traceback,
never a file outside its folder, never a secret in argv."""

from __future__ import annotations

import json

import pytest

from tests.cli.inproc import run_main

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
EAGLE = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"


def _one_line_error(err: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "To fix:" in lines[0], err
    assert "Traceback" not in err


# --- priors from the registry never break recommend -------------------------------------------

def test_an_adopted_deployment_with_an_unregistered_draft_is_skipped_as_a_prior_with_a_note():
    code, _, err = run_main("deployment", "register", "prod", "--endpoint", "http://127.0.0.1:9",
                            "--draft", EAGLE, "--method", "eagle3", "--no-check")
    assert code == 0, err
    code, out, err = run_main("recommend", "--model", LLAMA, "--gpu", "H100", "-o", "json")
    assert code == 0, err
    plan = json.loads(out)
    assert any("prod" in n and "skipped" in n for n in plan["learned_from"])
    run_main("deployment", "remove", "prod")
    code, _, err = run_main("recommend", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "-o", "json")
    assert code == 0, err
