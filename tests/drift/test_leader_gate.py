"""A monitor that does not lead observes but never acts.

The gate is a scripted stand-in for ``specops.k8s.leader.LeaderGate`` (whose Lease protocol is tested
against the emulated API in tests/k8s/test_leader.py); the trace source, detectors, policy, runner
and event log are the drift library's own. The trace swaps the target at 600 s, which the default
policy answers with a ``notify`` action."""

from __future__ import annotations

import pytest

from specops.drift.monitor import Monitor, MonitorMetrics
from specops.drift.policy import MemoryEvents, NotifyOnlyExecutor, load_policy
from specops.drift.tracegen import FakeClock, SimDeployment, SimSource, TraceConfig
from specops.drift.watch import WatchTarget

HELD = "not the leader: lease specops/specops-monitor is held by replica-b; observing only, no actions"


class ScriptedGate:
    """Leads while ``leads(minutes since the trace started)``; ``raises`` makes it fail."""

    def __init__(self, leads=lambda minute: True, raises: Exception | None = None) -> None:
        self.leads, self.raises, self.clock = leads, raises, None

    def is_leader(self) -> bool:
        if self.raises:
            raise self.raises
        return self.leads((self.clock.now() - START) / 60)

    def status(self) -> str:
        return HELD


CFG = TraceConfig(seed=2, change_at_s=600, resets_per_day=0, gaps_per_day=0)
START = CFG.start


def _monitor(gate=None, on_elected=None):
    cfg = CFG
    clock = FakeClock(cfg.start)
    if gate is not None:
        gate.clock = clock
    events, metrics = MemoryEvents(), MonitorMetrics()
    mon = Monitor([WatchTarget(name="d", trained_against="sha256:target-v1")], SimSource({"d": SimDeployment("d", cfg)}, clock),
                  load_policy("default"), NotifyOnlyExecutor(), clock, events=events, metrics=metrics, gate=gate,
                  on_elected=on_elected)
    return mon, events, metrics


def _run(mon, cycles=15):
    reports = []
    mon.run(max_cycles=cycles, on_report=reports.append)
    return reports


def test_the_leader_acts_on_the_swapped_target():
    mon, events, metrics = _monitor(ScriptedGate())
    reports = _run(mon)
    assert [a.action for r in reports for a in r.actions] == ["notify"]
    assert all(r.leader for r in reports) and events.events
    assert "specops_monitor_is_leader 1.0" in metrics.exposition().decode()


def test_a_replica_that_does_not_lead_observes_but_takes_no_actions():
    mon, events, metrics = _monitor(ScriptedGate(lambda m: False))
    reports = _run(mon)
    assert any(f.code == "CHANGED_MODEL" for r in reports for f in r.findings)  # it still sees the drift
    assert [a for r in reports for a in r.actions] == []
    assert events.events == [] and mon.runner.ledger == {}
    assert all(not r.leader and HELD in r.notes for r in reports)
    text = metrics.exposition().decode()
    assert "specops_monitor_is_leader 0.0" in text and "specops_monitor_actions_total{" not in text


def test_a_replica_acts_from_the_cycle_it_is_elected_after_reloading_the_ledger():
    calls = []
    mon, _, _ = _monitor(ScriptedGate(lambda m: m >= 12), on_elected=lambda: calls.append(mon.clock.now()))
    reports = _run(mon, cycles=20)
    first_led = next(i for i, r in enumerate(reports) if r.leader)
    assert first_led == 12 and calls == [reports[12].at]
    acted = [i for i, r in enumerate(reports) if r.actions]
    assert acted and min(acted) >= first_led


def test_a_leader_that_loses_the_lease_stops_acting_at_the_next_cycle():
    mon, events, _ = _monitor(ScriptedGate(lambda m: m < 5))
    reports = _run(mon)
    assert [r.leader for r in reports[:6]] == [True] * 5 + [False]
    assert [a for r in reports[5:] for a in r.actions] == [] and events.events == []


@pytest.mark.parametrize("gate, on_elected, note", [
    (ScriptedGate(raises=ConnectionError("API down")), None, "the leader gate failed (ConnectionError: API down)"),
    (ScriptedGate(), lambda: 1 / 0, "elected, but ZeroDivisionError"),
])
def test_a_failing_gate_or_ledger_reload_means_no_actions(gate, on_elected, note):
    mon, events, _ = _monitor(gate, on_elected)
    reports = _run(mon)
    assert [a for r in reports for a in r.actions] == [] and events.events == []
    assert all(not r.leader and any(note in n for n in r.notes) for r in reports)


def test_without_a_gate_the_monitor_leads_and_asks_nobody():
    mon, _, metrics = _monitor()
    reports = _run(mon)
    assert all(r.leader and not r.notes for r in reports) and any(r.actions for r in reports)
    assert "specops_monitor_is_leader 1.0" in metrics.exposition().decode()


def test_leadership_is_asked_again_right_before_acting():
    """A fetch that outlasts the lease: led when the cycle started, not any more when acting."""
    gate = ScriptedGate(lambda minute: round(minute * 60) % 80 < 10)  # true only at each cycle's start
    mon, events, _ = _monitor(gate)
    inner = mon.source

    class SlowSource:
        def fetch(self, names):
            out = inner.fetch(names)
            mon.clock.sleep(20)
            return out

    mon.source = SlowSource()
    reports = _run(mon)
    assert any(f.code == "CHANGED_MODEL" for r in reports for f in r.findings)
    assert [a for r in reports for a in r.actions] == [] and events.events == []
    assert any(not r.leader and HELD in r.notes for r in reports)
