import pytest

from specops.drift.classify import Evidence, LabelDrop, ProbeResult, classify
from specops.drift.tracegen import TraceConfig

from .closedloop import first, run
from .scenarios import baseline


@pytest.fixture(scope="module")
def base():
    return baseline()


def test_engine_state_decay_that_recovers_on_restart_is_classified_as_such(base):
    cfg = TraceConfig(seed=1, decay_per_hour=0.03, kv_per_hour=0.08, resets_per_day=0, initial_uptime_s=0)
    reports, ex, sim = run(cfg, 4, base)
    r_s, suspected = first(reports, "ENGINE_STATE_SUSPECTED")
    r_c, confirmed = first(reports, "ENGINE_STATE_DECAY")
    assert suspected is not None and confirmed is not None
    assert r_s.at < r_c.at
    assert [c[0] for c in ex.calls].count("restart_probe") == 1
    assert confirmed.evidence["confirmed"] is True
    probe = confirmed.evidence["probe"]
    assert probe["after"] > probe["before"] and probe["recovered_share"] >= 0.6
    assert first(reports, "CHANGED_MODEL")[1] is None


def test_a_changed_target_fingerprint_is_classified_as_changed_model(base):
    cfg = TraceConfig(seed=2, change_at_s=2 * 3600)
    reports, ex, _ = run(cfg, 3, base)
    _, f = first(reports, "CHANGED_MODEL")
    assert f.evidence["live_fingerprint"] == "sha256:target-v2"
    assert f.evidence["trained_against"] == "sha256:target-v1"
    drop_report, _ = first(reports, "ACCEPTANCE_DROP")
    causes = [x for x in drop_report.findings if x.evidence.get("cause")]
    assert [c.code for c in causes] == ["CHANGED_MODEL"] and causes[0].severity == "error"
    retrains = [c for c in ex.calls if c[0] == "open_retraining"]
    assert len(retrains) == 1  # idempotent across the many cycles the finding stays active
    assert not [c for c in ex.calls if c[0] == "restart_probe"]


def test_one_label_dropping_while_others_hold_is_workload_drift(base):
    cfg = TraceConfig(seed=3, drop_at_s=3600, drop_labels=["chat"], resets_per_day=0)
    reports, ex, _ = run(cfg, 2, base)
    _, f = first(reports, "WORKLOAD_DRIFT")
    assert f.evidence["dropped"] == ["chat"] and f.evidence["stable"] == ["code"]
    assert not [c for c in ex.calls if c[0] == "restart_probe"]


def test_a_restart_that_does_not_help_rules_engine_state_out():
    drops = {"": LabelDrop("", 0.75, 0.6, 6.0, True)}
    probe = ProbeResult(at=0, before=0.6, after=0.61, baseline=0.75)
    pre = [(u * 60.0, 0.75 - 0.0005 * u, 0.5) for u in range(60)]
    f = classify(Evidence("d", drops, pre_alarm=pre, probe=probe))
    assert f.code == "DRIFT_CAUSE_UNKNOWN" and "restart did not bring it back" in f.message
    assert classify(Evidence("d", drops, pre_alarm=pre)).code == "ENGINE_STATE_SUSPECTED"


def test_a_sudden_drop_without_an_uptime_trend_is_not_blamed_on_the_engine():
    drops = {"": LabelDrop("", 0.75, 0.6, 6.0, True)}
    flat = [(u * 60.0, 0.75 + (0.01 if u % 2 else -0.01), 0.4) for u in range(60)]
    f = classify(Evidence("d", drops, pre_alarm=flat))
    assert f.code == "DRIFT_CAUSE_UNKNOWN"


def test_the_fix_gives_the_break_even_and_the_current_acceptance():
    drops = {"": LabelDrop("", 0.75, 0.6, 6.0, True)}
    flat = [(u * 60.0, 0.75 + (0.01 if u % 2 else -0.01), 0.4) for u in range(60)]
    f = classify(Evidence("d", drops, pre_alarm=flat, break_even=0.42))
    assert "α now 0.600, break-even α 0.420" in f.fix
    changed = classify(Evidence("d", drops, trained_against="f1:a", live_fingerprint="f1:b", break_even=0.42))
    assert changed.code == "CHANGED_MODEL" and "break-even α 0.420" in changed.fix
    unknown = classify(Evidence("d", drops, pre_alarm=flat))
    assert "no break-even known" in unknown.fix
