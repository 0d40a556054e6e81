"""One status vocabulary (pass / warn / fail / could not evaluate, apart from severity) in gate, validate,
runbook output; warning-only known-bug rows are "to watch for", never "handled"; each issue named once.
The spec and the registry are real files; the known-bug table is the shipped one."""

from __future__ import annotations

import json

import pytest

from specops.engines.bugs import handled_or_watched
from specops.models import status_word

SPEC = """name: eagle
target: {{model: meta-llama/Llama-3.1-8B-Instruct, ref: llama@v1}}
draft: {{model: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, ref: eagle@v1}}
speculative: {{method: eagle3, num_speculative_tokens: 3}}
engine: {{vllm_version: "{version}", max_model_len: 4096}}
"""


@pytest.mark.parametrize(("status", "severity", "word"), [
    ("pass", "error", "pass"), ("warn", "error", "warn"), ("fail", "error", "fail"), ("fail", "warning", "warn"),
    ("fail", "info", "warn"), ("error", "error", "could not evaluate"), ("error", None, "could not evaluate"),
    ("skipped", "error", "skipped")])
def test_status_words_never_say_error_and_never_depend_on_severity_except_soft_failures(status, severity, word):
    assert status_word(status, severity) == word


def test_gate_shows_a_warning_only_bug_row_as_warn_not_handled_and_could_not_evaluate_in_words(cli, tmp_path):
    spec = tmp_path / "eagle.yaml"
    spec.write_text(SPEC.format(version="0.20.0"))  # vllm#41838 (EAGLE acceptance decay) may apply: warn only
    r = cli("gate", "--spec", str(spec), "-o", "json")
    bugs = next(x for x in json.loads(r.stdout)["results"] if x["id"] == "gate.known-bugs")
    assert bugs["status"] == "warn", bugs
    assert "handled" not in bugs["message"] and "to watch for" in bugs["message"]
    assert bugs["message"].count("vllm#41838") == 1, bugs["message"]  # the issue, and its range, once
    assert bugs["message"].count("0.17.1 and later") == 1
    table = cli("gate", "--spec", str(spec), env={"COLUMNS": "240"})
    rows = {line.split("│")[2].strip(): line.split("│")[1].strip() for line in table.stdout.splitlines()
            if line.startswith("│") and line.split("│")[2].strip()}
    assert rows["gate.known-bugs"] == "warn" and rows["gate.lineage"] == "could not evaluate", table.stdout
    assert "1 warn" in table.stdout and "-> could not evaluate (exit 2)" in table.stdout
    assert table.returncode == 2  # the lineage could not be evaluated: a warn never hides that


def test_a_mitigated_row_is_handled_and_a_warn_row_beside_it_is_still_to_watch():
    from specops.capabilities import default_table
    from specops.engines.bugs import BugFinding

    rows = default_table().rows
    mitigate = next(r for r in rows if getattr(r, "effect", None) == "mitigate")
    warn = next(r for r in rows if getattr(r, "effect", None) == "warn")
    status, text = handled_or_watched([BugFinding(mitigate, "applies")], "none")
    assert status == "pass" and text.startswith("known bugs handled: ")
    status, text = handled_or_watched([BugFinding(mitigate, "applies"), BugFinding(warn, "applies")], "none")
    assert status == "warn" and "known bugs handled" in text and "to watch for" in text
    assert handled_or_watched([], "no known bug applies") == ("pass", "no known bug applies")


def test_register_without_a_check_never_prints_serving_none(cli):
    r = cli("deployment", "register", "x", "--endpoint", "http://127.0.0.1:9", "--no-check")
    assert r.returncode == 0, r.stderr
    assert "None" not in r.stdout and "served model name not recorded" in r.stdout
