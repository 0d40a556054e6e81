"""Per-deployment alerts (the commands the annotations name are checked by
tests/cli/test_named_commands.py, over the committed manifests and the library's strings): thresholds from the deployment's own expected and break-even acceptance, the
numbers in the annotations, and `promtool test rules` on the rendered rules.

Nothing is faked: plans from the shipped planner, rules rendered by specops.k8s, and Debian's promtool
(from the prometheus package, installed by scripts/services.sh) evaluating them over synthetic series.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from specops.api import recommend_plan
from specops.k8s import render_manifests
from specops.planner import RecommendRequest
from specops.planner.render import to_deployment

CASES = {"ngram": dict(method="ngram"), "suffix": dict(method="suffix"),
         "eagle3-g2": dict(method="eagle3", num_speculative_tokens=2),
         "eagle3-g7": dict(method="eagle3", num_speculative_tokens=7),
         "eagle3-g4-b32": dict(method="eagle3", num_speculative_tokens=4, batch_size=32)}


def _plan(**kw):
    return recommend_plan(RecommendRequest(model="llama-3.1-8b-instruct", gpu="H100", **kw))


def _rules(spec) -> dict:
    rule = next(o for o in render_manifests(spec) if o["kind"] == "PrometheusRule")
    return {r["alert"]: r for r in rule["spec"]["groups"][0]["rules"]}, rule


REV = "0" * 40  # a placeholder commit: Kubernetes specs pin hub models


def _k8s_spec(plan, name="prod"):
    spec = to_deployment(plan, name=name)
    upd = {"platform": "kubernetes", "target": spec.target.model_copy(update={"revision": REV})}
    if spec.draft is not None:
        upd["draft"] = spec.draft.model_copy(update={"revision": REV})
    return spec.model_copy(update=upd)


@pytest.mark.parametrize("case", list(CASES))
def test_acceptance_alerts_follow_the_deployments_own_prediction(case):
    plan = _plan(**CASES[case])
    p = plan.predicted
    rules, _ = _rules(_k8s_spec(plan))
    be = rules["SpecopsAcceptanceBelowBreakEven"]
    assert be["labels"]["severity"] == "critical"
    assert be["expr"].rstrip().endswith(f"< {min(1.0, p.break_even_acceptance_rate)}")
    assert f"{p.break_even_acceptance_rate:.3f}" in be["annotations"]["description"]
    assert f"{p.break_even_acceptance_rate:.1%}" in be["annotations"]["summary"]
    low = rules["SpecopsLowAcceptanceRate"]
    warn = float(low["expr"].rstrip().rsplit("<", 1)[1])
    # halfway between break-even and expected: the prediction itself never fires, break-even always does
    assert p.break_even_acceptance_rate < warn < p.acceptance_rate
    assert warn == pytest.approx((p.break_even_acceptance_rate + p.acceptance_rate) / 2, abs=1e-3)
    assert f"expected {p.acceptance_rate:.3f}" in low["annotations"]["description"]
    assert warn != 0.4  # not the old fixed threshold


def test_thresholds_differ_by_method_and_gamma():
    warns = set()
    for kw in CASES.values():
        rules, _ = _rules(_k8s_spec(_plan(**kw)))
        warns.add(rules["SpecopsLowAcceptanceRate"]["expr"].rsplit("<", 1)[1].strip())
    assert len(warns) >= 4


def test_a_spec_without_expectations_gets_no_guessed_threshold_and_the_fix_works():
    plan = _plan(method="eagle3")
    bare = _k8s_spec(plan).model_copy(update={"expectations": None})
    rules, obj = _rules(bare)
    assert "SpecopsLowAcceptanceRate" not in rules and "SpecopsAcceptanceBelowBreakEven" not in rules
    note = obj["metadata"]["annotations"]["specops.io/acceptance-alert"]
    assert "To fix:" in note and "expectations:" in note
    # follow the fix: add the block it names
    fixed_text = yaml.safe_dump(bare.model_dump(mode="json", exclude_none=True)) + (
        "expectations: {acceptance_rate: 0.6, break_even_acceptance_rate: 0.1, source: measured baseline}\n")
    from specops.engines.spec import DeploymentSpec

    fixed = DeploymentSpec.model_validate(yaml.safe_load(fixed_text))
    rules, obj = _rules(fixed)
    assert rules["SpecopsAcceptanceBelowBreakEven"]["expr"].rstrip().endswith("< 0.1")
    assert rules["SpecopsLowAcceptanceRate"]["expr"].rstrip().endswith("< 0.35")
    assert "annotations" not in obj["metadata"]


def test_no_acceptance_alert_without_speculation():
    rules, obj = _rules(_k8s_spec(_plan(method="none")))
    assert set(rules) == {"SpecopsHighTPOT"} and "annotations" not in obj["metadata"]


@pytest.mark.promtool
@pytest.mark.parametrize("case", ["ngram", "eagle3-g7"])
def test_promtool_fires_below_break_even_and_stays_quiet_at_the_expected_rate(case, tmp_path):
    """promtool evaluates the rendered rules over 20 minutes of synthetic counters (vLLM's names and
    PodMonitor's labels): at the expected rate nothing fires; below break-even both fire."""
    promtool = shutil.which("promtool")
    assert promtool, "install Debian's prometheus package (it ships promtool): bash scripts/services.sh"
    plan = _plan(**CASES[case])
    p = plan.predicted
    _, obj = _rules(_k8s_spec(plan))
    full = tmp_path / "full.yaml"
    full.write_text(yaml.safe_dump({"groups": obj["spec"]["groups"]}))
    r = subprocess.run([promtool, "check", "rules", str(full)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr  # expressions and annotation templates parse
    # `promtool test rules` compares annotations too: test the expressions on a copy without them
    groups = [{**g, "rules": [{k: v for k, v in rule.items() if k != "annotations"} for rule in g["rules"]]}
              for g in obj["spec"]["groups"]]
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(yaml.safe_dump({"groups": groups}))
    labels = 'namespace="llm",specops_deployment="{d}",specops_app="prod"'
    drafted = 100  # tokens per 15 s

    def series(dep: str, rate: float) -> list[dict]:
        return [{"series": f"vllm:spec_decode_num_draft_tokens_total{{{labels.format(d=dep)}}}",
                 "values": f"0+{drafted}x80"},
                {"series": f"vllm:spec_decode_num_accepted_tokens_total{{{labels.format(d=dep)}}}",
                 "values": f"0+{round(drafted * rate, 3)}x80"}]

    low = p.break_even_acceptance_rate / 2
    tests = {"rule_files": [str(rules_file)], "evaluation_interval": "15s", "tests": [{
        "interval": "15s",
        "input_series": series("healthy", p.acceptance_rate) + series("stale", low),
        "alert_rule_test": [
            {"eval_time": "20m", "alertname": "SpecopsAcceptanceBelowBreakEven", "exp_alerts": [
                {"exp_labels": {"severity": "critical", "namespace": "llm", "specops_deployment": "stale"}}]},
            {"eval_time": "20m", "alertname": "SpecopsLowAcceptanceRate", "exp_alerts": [
                {"exp_labels": {"severity": "warning", "namespace": "llm", "specops_deployment": "stale"}}]},
        ]}]}
    test_file = tmp_path / "tests.yaml"
    test_file.write_text(yaml.safe_dump(tests))
    r = subprocess.run([promtool, "test", "rules", str(test_file)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
