"""`specops validate`, `gate` and `report` through the real CLI (subprocesses, real registry file)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest


@pytest.fixture
def deployed():
    """A registered deployment (hub ids: no weights needed) whose endpoint and Prometheus are not running."""
    from specops.registry import open_registry

    reg = open_registry()
    reg.register_target("acme/tiny-target", name="tiny-target", version="v1")
    reg.register_draft("acme/tiny-draft", name="tiny-draft", version="v1", target="tiny-target@v1",
                       method="draft_model")
    reg.upsert_deployment("tiny", platform="local", status="running", method="draft_model", num_speculative_tokens=3,
                          target_ref="tiny-target@v1", draft_ref="tiny-draft@v1", endpoint="http://127.0.0.1:9",
                          served_model_name="tiny")
    reg.close()
    return "tiny"


def test_unreachable_prometheus_exits_2_and_writes_a_parsable_junit(cli, deployed, tmp_path):
    junit = tmp_path / "out" / "junit.xml"
    r = cli("validate", "--checklist", "deploy", "--deployment", deployed, "--profile", "cpu-tiny",
            "--prometheus-url", "http://127.0.0.1:9", "--junit", str(junit), "--output", "json")
    assert r.returncode == 2, r.stderr
    data = json.loads(r.stdout)
    by_id = {x["id"]: x for x in data["results"]}
    assert by_id["deploy.acceptance-p50"]["status"] == "error"
    assert "cannot reach Prometheus" in by_id["deploy.acceptance-p50"]["message"]
    assert by_id["deploy.lineage"]["status"] == "pass" and data["exit_code"] == 2
    suite = ET.parse(junit).getroot().find("testsuite")
    assert int(suite.get("errors")) >= 4 and len(suite.findall("testcase")) == len(data["results"])


def test_validation_runs_are_recorded_and_the_report_is_written(cli, deployed, tmp_path):
    r = cli("validate", "-c", "train", "-d", deployed, "--profile", "cpu-tiny")
    assert r.returncode == 1, r.stdout + r.stderr  # no benchmark acceptance recorded yet
    assert "train.offline-acceptance" in r.stdout and "exit 1" in r.stdout
    out = tmp_path / "report.html"
    r = cli("report", "--deployment", deployed, "--out", str(out))
    assert r.returncode == 0, r.stderr
    html = out.read_text()
    assert "train: did not pass" in html and html.count("<svg") == 3


def test_malformed_checklist_is_one_line_with_file_line_and_fix(cli, deployed, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: deploy\ndescription: x\nchecks:\n  - id: deploy.x\n    description: x\n    source: s\n"
                   "    kind: vibes\n    measure: per_token_alpha\n    fix: f\n")
    r = cli("validate", "--checklist", str(bad), "--deployment", deployed)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and f"{bad}:7:" in r.stderr and "To fix:" in r.stderr
    assert "Traceback" not in r.stderr


def test_unknown_deployment_and_profile_exit_2_with_a_suggestion(cli, deployed):
    r = cli("validate", "-c", "deploy", "-d", "tiyn")
    assert r.returncode == 2 and 'Did you mean "tiny"' in r.stderr
    r = cli("validate", "-c", "deploy", "-d", deployed, "--profile", "gpu-defualt")
    assert r.returncode == 2 and 'Did you mean "gpu-default"' in r.stderr


SPEC = """name: tiny-ngram
target: {model: acme/tiny-target}
speculative: {method: ngram, num_speculative_tokens: 3, prompt_lookup_max: 3}
engine: {vllm_version: 0.33.0}
"""


def test_gate_passes_a_valid_ngram_spec(cli, tmp_path):
    spec = tmp_path / "deploy.yaml"
    spec.write_text(SPEC)
    junit = tmp_path / "gate.xml"
    r = cli("gate", "--spec", str(spec), "--junit", str(junit))
    assert r.returncode == 0, r.stdout + r.stderr
    names = [c.get("name") for c in ET.parse(junit).getroot().iter("testcase")]
    assert names == ["gate.schema", "gate.capability", "gate.known-bugs", "gate.lineage"]


MEDUSA = """name: heads
target: {model: acme/tiny-target}
draft: {model: acme/medusa-heads}
speculative: {method: medusa, num_speculative_tokens: 3}
engine: {vllm_version: 0.33.0}
"""


@pytest.mark.parametrize("text, words", [
    (MEDUSA, "medusa"),                                               # removed in vLLM 0.33
    (SPEC.replace("name: tiny-ngram", "name: Tiny_NGram"), "DNS-1123"),  # schema
])
def test_gate_fails_a_spec_the_engine_would_refuse(cli, tmp_path, text, words):
    spec = tmp_path / "deploy.yaml"
    spec.write_text(text)
    r = cli("gate", "--spec", str(spec), "--output", "json")
    assert r.returncode == 1, r.stdout + r.stderr
    failed = [x for x in json.loads(r.stdout)["results"] if x["status"] == "fail"]
    assert failed and words in failed[0]["message"]


def test_gate_finds_a_stale_draft_in_the_registry(cli, tmp_path):
    from specops.registry import open_registry

    reg = open_registry()
    reg.register_target("acme/t", name="t", version="v1")
    reg.register_target("acme/t2", name="t", version="v2")
    reg.register_draft("acme/d", name="d", version="v1", target="t@v1", method="draft_model")
    reg.close()
    spec = tmp_path / "deploy.yaml"
    spec.write_text("name: stale\ntarget: {model: acme/t2, ref: t@v2}\ndraft: {model: acme/d, ref: d@v1}\n"
                    "speculative: {method: draft_model, num_speculative_tokens: 3}\n")
    r = cli("gate", "--spec", str(spec))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "STALE_DRAFT" in r.stdout
