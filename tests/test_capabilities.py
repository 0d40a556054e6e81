"""The capability table's typed schema (specops/capabilities.py over playbooks/vllm/capabilities.csv):
bug rows carry their effect, conditions are checked against the method table on load, and the planner
and the launch renderer read refusals from rows, not from text. Each test writes a real CSV."""

from __future__ import annotations

import csv
import shutil

import pytest

from specops.capabilities import CapabilityTable, _load, default_table
from specops.errors import ConfigFileError
from specops.playbooks import playbook_path

HEADER = ["kind", "name", "first_version", "last_version", "evidence", "confidence", "notes", "effect", "when",
          "mitigation"]


def _table(tmp_path, *rows: dict) -> CapabilityTable:
    path = tmp_path / "capabilities.csv"
    shutil.copy(playbook_path("vllm", "capabilities.csv"), path)
    with open(path, "a", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=HEADER, lineterminator="\n")
        for r in rows:
            w.writerow({k: "" for k in HEADER} | {"first_version": "0.30.0", "evidence": "test", "confidence": "high"}
                       | r)
    _load.cache_clear()
    return CapabilityTable(_load(str(path)))


def test_every_shipped_bug_row_has_an_effect_and_refusals_name_methods():
    bugs = [r for r in default_table().rows if r.kind == "bug"]
    assert bugs and all(r.effect in ("refuse", "mitigate", "warn") for r in bugs)
    assert all(r.mitigation for r in bugs if r.effect == "mitigate")


def test_a_refuse_row_on_a_method_alone_makes_the_method_unrunnable(tmp_path):
    t = _table(tmp_path, {"kind": "bug", "name": "test: suffix refused (vllm#1)", "effect": "refuse",
                          "when": "method=suffix"})
    assert t.runnable_method("suffix", "0.31.0") == (False, "test: suffix refused (vllm#1)")
    assert t.runnable_method("suffix", "0.29.0")[0] is True  # before the row's first version
    assert default_table().runnable_method("suffix", "0.31.0")[0] is True


def test_a_refuse_row_on_method_and_kv_becomes_a_planner_guard(tmp_path):
    from specops.planner import RecommendRequest, recommend

    t = _table(tmp_path, {"kind": "bug", "name": "test: ngram with fp8 KV wrong (vllm#2)", "effect": "refuse",
                          "when": "method=ngram; kv_dtype=fp8*"})
    plan = recommend(RecommendRequest(model="llama-3.1-8b-instruct", gpu="H100", vllm_version="0.31.0", method="ngram"),
                     capabilities=t)
    step = next(s for s in plan.decision_path if s.rule == "vllm_version")
    assert "ngram+fp8* avoided (known bug vllm#2 in 0.31.0)" in step.outcome
    assert "ngram+fp8" not in next(s for s in default_plan_path() if s.rule == "vllm_version").outcome


def default_plan_path():
    """The same request against the shipped table (no such row): nothing avoided."""
    from specops.planner import RecommendRequest, recommend

    return recommend(RecommendRequest(model="llama-3.1-8b-instruct", gpu="H100", vllm_version="0.31.0",
                                      method="ngram")).decision_path


@pytest.mark.parametrize("row,message", [
    ({"kind": "bug", "name": "no effect"}, "has no effect"),
    ({"kind": "bug", "name": "mitigates nothing", "effect": "mitigate", "when": "method=mtp"}, "mitigates with nothing"),
    ({"kind": "bug", "name": "bad key", "effect": "warn", "when": "colour=red"}, '"colour=red" is not a condition'),
    ({"kind": "bug", "name": "bad value", "effect": "warn", "when": "architecture=huge"}, "architecture takes"),
    ({"kind": "bug", "name": "unknown method", "effect": "refuse", "when": "method=eagle4"}, "not in the method table"),
    ({"kind": "bug", "name": "unknown kv", "effect": "refuse", "when": "method=mtp; kv_dtype=int3*"}, "matches no kv_dtype"),
    ({"kind": "method", "name": "medusa2"}, "not in the method table"),
    ({"kind": "flag", "name": "--x", "effect": "warn"}, "belong to bug rows"),
    ({"kind": "colour", "name": "x"}, "line"),
])
def test_a_bad_row_is_refused_on_load_with_its_line(tmp_path, row, message):
    with pytest.raises(ConfigFileError) as e:
        _table(tmp_path, row)
    assert message in e.value.message and "capabilities.csv" in e.value.message


def test_applies_says_may_apply_when_a_fact_is_unknown():
    row = next(r for r in default_table().rows if r.kind == "bug" and "#43559" in r.name)
    assert row.applies({"method": "mtp", "architecture": "hybrid", "prefix_caching": "on"}) is True
    assert row.applies({"method": "eagle3", "architecture": "hybrid", "prefix_caching": "on"}) is False
    assert row.applies({"method": "mtp"}) is None  # architecture and prefix caching not known: may apply
    assert row.mitigation == ("--no-enable-prefix-caching",)
