"""`specops monitor` proposes γ changes: ``api.monitor`` wires the validation profile's performance
model into the Watcher (``gamma_predictor``). The real registry (SQLite), real /metrics over HTTP and
the real monitor (``api.monitor.monitor(once=True)``, what `specops monitor --once` calls); the engine
is tests/drift/fakeengine.py (vLLM's recorded exposition text, counters the test advances: per-position
acceptance α^(i+1) at γ 3). On a real engine the γ change itself is tests/engines/test_actions_engine.py."""

from __future__ import annotations

import pytest

from specops.api.monitor import gamma_predictor, monitor
from specops.drift.gamma import AcceptanceProfile
from specops.drift.service import MonitorOptions
from specops.registry import open_registry
from tests.drift.fakeengine import FakeEngine
from tests.drift.wiring import make_fleet

GAMMA = ("{mode: propose, kind: gamma, max_gamma: 5, min_gain: 0.05, min_dwell_minutes: 0, "
         "evaluate_every_windows: 1, confirm_evaluations: 1, min_drafts: 1}")


@pytest.fixture
def engine():
    e = FakeEngine()
    yield e
    e.close()


def test_the_predictor_is_the_profiles_draft_cost_model():
    assert gamma_predictor(None) is None
    predict = gamma_predictor("cpu-tiny")  # c = 0.2
    high, low = AcceptanceProfile(alpha=0.9), AcceptanceProfile(alpha=0.3)
    assert predict(high, 3, 1) == pytest.approx((1 + 0.9 + 0.81 + 0.729) / 1.6)
    assert predict(high, 5, 1) > predict(high, 3, 1)  # a good draft: longer drafts pay
    assert predict(low, 1, 1) > predict(low, 3, 1) > predict(low, 5, 1)  # a poor one: shorter ones
    assert predict(low, 0, 1) == 1.0


def _proposals(tmp_path, engine, profile):
    policy = tmp_path / "gamma.yaml"
    policy.write_text(f"name: gamma\ngamma: {GAMMA}\nrules: []\n")
    opts = MonitorOptions(policy=str(policy), interval_s=60, profile=profile)
    found = []
    for _ in range(3):  # cron: each --once run is a new monitor, warmed from the stored windows
        engine.advance(500, 0.9)
        report = monitor(opts, once=True)
        found += [f for f in report.findings if f.code == "GAMMA_CHANGE_PROPOSED"]
    return found


def test_specops_monitor_proposes_a_longer_gamma_for_a_good_draft(tmp_path, engine):
    with open_registry() as reg:
        make_fleet(reg, tmp_path, engine.url)
    found = _proposals(tmp_path, engine, "cpu-tiny")
    assert found, "no γ proposal"
    ev = found[0].evidence
    print(ev)
    assert found[0].evidence["deployment"] == "chat"
    assert max(k for _, _, k in ev["proposed"]) > 3


def test_without_a_profile_no_gamma_change_is_proposed(tmp_path, engine):
    with open_registry() as reg:
        make_fleet(reg, tmp_path, engine.url)
    assert _proposals(tmp_path, engine, None) == []
