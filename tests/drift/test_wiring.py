"""The drift library wired to the real registry (SQLite file), real /metrics over HTTP and real model
folders. The engine itself is a FakeEngine (tests/drift/fakeengine.py: vLLM's recorded exposition
text with counters the test advances); the real engine runs in tests/heal/test_closed_loop_engine.py."""

from __future__ import annotations

import pytest

from specops.drift.actions import EngineExecutor
from specops.drift.detectors import Baseline
from specops.drift.observe import Observation
from specops.drift.service import MonitorOptions, Watcher, run_runbook_on
from specops.drift.store import BASELINE_EVENT, HistoryStore
from specops.registry import open_registry

from .fakeengine import FakeEngine
from .wiring import make_fleet, swap_folder


class Spawned:
    """Records the retraining processes the executor would start (nothing is trained here)."""

    def __init__(self):
        self.calls = []

    def __call__(self, argv, logfile):
        self.calls.append((argv, logfile))


@pytest.fixture
def engine():
    e = FakeEngine()
    yield e
    e.close()


@pytest.fixture
def reg():
    r = open_registry()
    yield r
    r.close()


def _watcher(reg, **kw):
    spawned = Spawned()
    opts = MonitorOptions(**{"interval_s": 60.0, **kw})
    return Watcher(reg, opts, executor=EngineExecutor(reg, spawn=spawned, retrain_data=kw.get("retrain_data"))), spawned


def _baseline(reg, engine, alpha=0.7):
    """Two healthy windows stored, then the baseline recorded from them (as `--record-baseline` does)."""
    for _ in range(2):
        engine.advance(500, alpha)
        _watcher(reg, record_baseline=True)[0].once()


def _codes(report):
    return {f.code for f in report.findings}


def test_a_direct_scrape_measures_the_window_between_two_cycles(reg, tmp_path, engine):
    make_fleet(reg, tmp_path, engine.url)
    engine.advance(1000, 0.7)
    w, _ = _watcher(reg)
    first = w.cycle()  # first scrape of this engine: counters since it started
    engine.advance(200, 0.3)
    second = w.cycle()
    assert first.outcome == second.outcome == "ok" and first.seen == ["chat"]
    obs = w.store.history("chat", since=0)
    assert [o.total.drafts for o in obs] == [1000, 200]
    assert obs[0].total.alpha == pytest.approx(0.7, abs=0.01) and obs[1].total.alpha == pytest.approx(0.3, abs=0.01)
    assert obs[1].uptime_s == pytest.approx(3600, abs=120) and obs[1].gamma == 3
    assert second.queries == 0 and w.source.scrapes == 2  # no Prometheus: no PromQL at all


def test_stored_windows_come_back_as_observations_and_give_a_baseline(reg, tmp_path, engine):
    make_fleet(reg, tmp_path, engine.url)
    w, _ = _watcher(reg)
    for alpha in (0.70, 0.72, 0.68):
        engine.advance(500, alpha)
        w.cycle()
    store = HistoryStore(reg)
    hist = store.history("chat", since=0)
    assert len(hist) == 3 and all(isinstance(o, Observation) for o in hist)
    base = store.record_baseline("chat", since=0, until=hist[-1].at + 1)
    assert base.labels[""].windows == 3 and base.labels[""].mean == pytest.approx(0.70, abs=0.01)
    assert store.baselines(["chat"])["chat"] == base
    ev = reg.events(subject="chat", kind=BASELINE_EVENT)[0]
    assert "α 0.70" in ev.message and Baseline.model_validate(ev.data["baseline"]) == base


def test_a_baseline_needs_enough_stored_windows(reg, tmp_path, engine):
    from specops.errors import InputError

    make_fleet(reg, tmp_path, engine.url)
    with pytest.raises(InputError, match="not enough windows to record a baseline"):
        HistoryStore(reg).record_baseline("chat", since=0, until=2e9)


def test_a_drop_against_the_recorded_baseline_is_flagged_by_a_later_once_run(reg, tmp_path, engine):
    """Cron: each `--once` run is a new Watcher; the detectors are warmed from the stored windows."""
    make_fleet(reg, tmp_path, engine.url)
    engine.advance(100, 0.7)
    for _ in range(3):
        engine.advance(400, 0.7)
        w, _ = _watcher(reg, record_baseline=True)
        w.once()
    engine.advance(400, 0.35)
    report = _watcher(reg)[0].once()
    assert "ACCEPTANCE_DROP" in _codes(report)
    drop = next(f for f in report.findings if f.code == "ACCEPTANCE_DROP")
    assert drop.evidence["baseline"] == pytest.approx(0.7, abs=0.01) and drop.evidence["alpha_recent"] < 0.65  # mean of the last 5 windows


def test_a_swapped_target_without_a_baseline_is_a_warning_until_acceptance_drops(reg, tmp_path, engine):
    f = make_fleet(reg, tmp_path, engine.url)
    swap_folder(f["v2"], f["served"])
    engine.advance(500, 0.7)
    report = _watcher(reg)[0].once()
    changed = next(x for x in report.findings if x.code == "CHANGED_MODEL")
    assert changed.severity == "warning" and "has not dropped yet" in changed.message
    assert not any(a.action == "open_retraining" for a in report.actions)


def test_a_target_swapped_under_the_deployment_is_flagged_as_a_changed_model(reg, tmp_path, engine):
    f = make_fleet(reg, tmp_path, engine.url)
    _baseline(reg, engine)
    w, spawned = _watcher(reg, retrain_data=str(tmp_path / "prompts.jsonl"))
    engine.advance(500, 0.7)
    assert "CHANGED_MODEL" not in _codes(w.cycle())
    swap_folder(f["v2"], f["served"])
    engine.advance(500, 0.1)
    report = w.cycle()
    changed = next(x for x in report.findings if x.code == "CHANGED_MODEL")
    assert changed.severity == "error" and changed.evidence["trained_against"] == f["t1"].fingerprint
    assert changed.evidence["live_fingerprint"] == reg.get_target("tiny@2").fingerprint
    acts = {(a.action, a.outcome) for a in report.actions}
    assert ("open_retraining", "done") in acts and ("notify", "done") in acts
    argv = spawned.calls[0][0]
    assert argv[-2:] == ["--data", str(tmp_path / "prompts.jsonl")] and argv[argv.index("--deployment") + 1] == "chat"
    kinds = [e.kind for e in reg.events(subject="chat")]
    assert "monitor.open_retraining" in kinds and "monitor.notify" in kinds


def test_actions_are_not_repeated_by_the_next_once_run_for_the_same_episode(reg, tmp_path, engine):
    f = make_fleet(reg, tmp_path, engine.url)
    _baseline(reg, engine)
    swap_folder(f["v2"], f["served"])
    engine.advance(500, 0.1)
    first = _watcher(reg)[0].once()
    engine.advance(500, 0.1)
    second = _watcher(reg)[0].once()
    assert "CHANGED_MODEL" in _codes(first) and "CHANGED_MODEL" in _codes(second)
    assert any(a.action == "notify" for a in first.actions)
    # nothing the first run acted on is acted on again; the collapse reaches its second window only in the
    # second run (a new finding: the default policy notifies and would probe it, but chat allows no restart)
    assert "ACCEPTANCE_COLLAPSE" not in _codes(first) and "ACCEPTANCE_COLLAPSE" in _codes(second)
    assert {a.finding for a in second.actions} == {"ACCEPTANCE_COLLAPSE"}, second.actions
    # without prompts, the retraining job cannot be opened: recorded as failed, with the reason
    fail = next(a for a in first.actions if a.action == "open_retraining")
    assert fail.outcome == "failed" and "no prompts to retrain chat on" in fail.detail


def test_dry_run_records_what_would_happen_and_does_nothing(reg, tmp_path, engine):
    f = make_fleet(reg, tmp_path, engine.url)
    _baseline(reg, engine)
    swap_folder(f["v2"], f["served"])
    engine.advance(500, 0.1)
    w, spawned = _watcher(reg, dry_run=True, retrain_data="p.jsonl")
    report = w.once()
    assert {a.outcome for a in report.actions} == {"dry-run"} and spawned.calls == []
    ev = reg.events(subject="chat", kind="monitor.open_retraining")[0]
    assert ev.data["outcome"] == "dry-run" and ev.actor == "specops-monitor"


def test_an_engine_that_does_not_answer_is_named_unseen(reg, tmp_path, engine):
    make_fleet(reg, tmp_path, engine.url)
    make_fleet(reg, tmp_path / "b", "http://127.0.0.1:9", name="ghost")
    engine.advance(300, 0.7)
    report = _watcher(reg)[0].once()
    assert report.outcome == "partial" and report.exit_code == 2 and report.seen == ["chat"]
    assert "direct scrape failed: cannot reach http://127.0.0.1:9/metrics" in report.unseen["ghost"]


def test_only_deployments_that_speculate_and_run_are_watched(reg, tmp_path, engine):
    make_fleet(reg, tmp_path, engine.url)
    reg.upsert_deployment("plain", platform="local", status="running", method="none", endpoint=engine.url)
    reg.upsert_deployment("old", platform="local", status="stopped", method="ngram", endpoint=engine.url)
    assert _watcher(reg)[0].targets == ["chat"]


def test_every_registered_deployment_is_accounted_for_in_every_cycle(reg, tmp_path, engine):
    """Watched, unseen with the fix, or not watched with why: none silently dropped. A deployment
    registered without a method is watched when its recorded argv says what it runs."""
    make_fleet(reg, tmp_path, engine.url)
    reg.upsert_deployment("plain", platform="local", status="running", method="none", endpoint=engine.url)
    reg.upsert_deployment("old", platform="local", status="stopped", method="ngram", endpoint=engine.url)
    reg.upsert_deployment("bare", platform="local", status="adopted", endpoint=engine.url)
    reg.upsert_deployment("from-argv", platform="local", status="adopted", endpoint=engine.url,
                          argv_redacted=["vllm", "serve", "m", "--speculative-config",
                                         '{"method": "ngram", "num_speculative_tokens": 4}'])
    engine.advance(300, 0.7)
    w = _watcher(reg)[0]
    assert sorted(w.targets) == ["chat", "from-argv"]
    report = w.once()
    accounted = set(report.seen) | set(report.unseen) | set(report.not_watched)
    assert accounted == {d.name for d in reg.list_deployments()}
    assert "from-argv" in report.seen
    assert "without speculation" in report.not_watched["plain"] and "stopped" in report.not_watched["old"]
    fix = report.unseen["bare"]
    assert "without a method" in fix and "specops deployment register bare --method" in fix
    assert report.exit_code == 2
    # follow the fix: register the method, and the next cycle watches it
    reg.upsert_deployment("bare", platform="local", status="adopted", method="ngram", num_speculative_tokens=3,
                          endpoint=engine.url)
    engine.advance(300, 0.7)
    again = _watcher(reg)[0].once()
    assert "bare" in again.seen and "bare" not in again.unseen


def test_the_acceptance_drop_runbook_names_the_changed_target(reg, tmp_path, engine):
    f = make_fleet(reg, tmp_path, engine.url)
    _baseline(reg, engine)
    swap_folder(f["v2"], f["served"])
    engine.advance(500, 0.1)
    _watcher(reg)[0].once()
    r = run_runbook_on(reg, "acceptance-drop", "chat", allow_restart=True)
    by_id = {s.id: s for s in r.steps}
    assert by_id["now"].findings[0].code == "ACCEPTANCE_DROP"
    mismatch = by_id["fingerprint"].findings[0]
    assert mismatch.code == "FINGERPRINT_MISMATCH" and "now holds tiny@2" in mismatch.message
    assert "tiny-draft@1 was trained against tiny@1" in mismatch.message
    assert any(x.code == "STALE_DRAFT" for x in by_id["lineage"].findings)
    assert by_id["restart"].status == "skipped"  # the cause is known: no restart
    assert r.next_action.command == "specops retrain --deployment NAME" and "target changed" in r.next_action.recommend


def test_a_matching_pair_passes_the_fingerprint_and_lineage_steps(reg, tmp_path, engine):
    make_fleet(reg, tmp_path, engine.url)
    engine.advance(500, 0.7)
    r = run_runbook_on(reg, "draft-target-mismatch", "chat")
    codes = [x.code for s in r.steps for x in s.findings]
    assert "FINGERPRINT_OK" in codes and "LINEAGE_OK" in codes and "FINGERPRINT_MISMATCH" not in codes
    assert "open the acceptance-drop runbook" in r.next_action.recommend


def test_restart_probes_are_refused_unless_the_deployment_opted_in(reg, tmp_path, engine):
    make_fleet(reg, tmp_path, engine.url)
    w, _ = _watcher(reg)
    assert w.monitor.runner.restart_allowed == {"chat": False}
    make_fleet(reg, tmp_path / "b", engine.url, name="probe-ok", labels={"restart_allowed": "true"})
    assert _watcher(reg)[0].monitor.runner.restart_allowed["probe-ok"] is True


def test_without_a_baseline_the_acceptance_step_cannot_evaluate_until_its_fix_is_followed(reg, tmp_path, engine,
                                                                                            cli):
    """The runbook's fix for a missing baseline is run as a user would, through the real CLI."""
    import re
    import shlex

    make_fleet(reg, tmp_path, engine.url)
    engine.advance(500, 0.7)
    r = run_runbook_on(reg, "acceptance-drop", "chat")
    now = {s.id: s for s in r.steps}["now"]
    assert now.status == "error" and "no baseline is recorded" in now.detail and r.exit_code == 2
    assert r.verdict == "could not evaluate" and not any(f.code == "QUERY_OK" for f in now.findings)
    fix = re.search(r"`(specops [^`]+)`", now.detail).group(1)
    for _ in range(3):  # "while the deployment is healthy": the cron job runs it every few minutes
        engine.advance(500, 0.7)
        done = cli(*shlex.split(fix)[1:])
        assert done.returncode == 0, done.stderr
    engine.advance(500, 0.7)
    again = run_runbook_on(reg, "acceptance-drop", "chat")
    assert {s.id: s for s in again.steps}["now"].status == "ran" and again.exit_code == 0, again.steps


def _save_spec(name: str, served, draft, expectations: dict | None) -> None:
    from specops.engines.spec import DeploymentSpec, dump_spec
    from specops.settings import deployment_dir

    body = {"name": name, "target": {"model": str(served)}, "draft": {"model": str(draft)},
            "speculative": {"method": "draft_model", "num_speculative_tokens": 3}}
    if expectations:
        body["expectations"] = expectations
    ddir = deployment_dir(name)
    ddir.mkdir(parents=True, exist_ok=True)
    (ddir / "spec.yaml").write_text(dump_spec(DeploymentSpec.model_validate(body)))


def test_the_slower_than_baseline_runbook_gives_break_even_and_the_current_rate(reg, tmp_path, engine):
    """The saved spec's expectations carry the break-even; the acceptance step compares the live rate
    with it and names both numbers. Without expectations it says none is known and how to get one."""
    f = make_fleet(reg, tmp_path, engine.url)
    _baseline(reg, engine)
    _save_spec("chat", f["served"], f["draft"], None)
    engine.advance(500, 0.3)
    step = next(s for s in run_runbook_on(reg, "spec-slower-than-baseline", "chat").steps if s.id == "acceptance")
    assert "no break-even known" in step.findings[0].message and "recommend -o deployment" in step.findings[0].message
    _save_spec("chat", f["served"], f["draft"], {"acceptance_rate": 0.6, "break_even_acceptance_rate": 0.35,
                                                   "source": "specops recommend (predicted)"})
    engine.advance(500, 0.3)
    step = next(s for s in run_runbook_on(reg, "spec-slower-than-baseline", "chat").steps if s.id == "acceptance")
    low = step.findings[0]
    assert low.code == "BELOW_BREAK_EVEN" and "break-even 0.350" in low.message
    assert f"{low.evidence['acceptance_rate']:.3f}" in low.message and low.evidence["acceptance_rate"] < 0.35
    engine.advance(2000, 0.9)
    step = next(s for s in run_runbook_on(reg, "spec-slower-than-baseline", "chat").steps if s.id == "acceptance")
    assert step.findings[0].code != "BELOW_BREAK_EVEN" and "break-even 0.350" in step.findings[0].message


def test_the_monitor_takes_break_even_from_the_spec_expectations_and_names_it(reg, tmp_path, engine):
    """Issue 23's leftover: the monitor's break-even α comes from the deployed spec's expectations (the
    break-even accepted/drafted rate at γ, converted to α), not only from a validation profile; a
    deployment without either is told how to get one."""
    from specops.drift.fleet import watch_targets
    from specops.speculation import alpha_from_rate, rate_of_alpha

    f = make_fleet(reg, tmp_path, engine.url)
    _save_spec("chat", f["served"], f["draft"], None)
    (target,), _ = watch_targets(reg, names=["chat"])
    assert target.break_even_alpha is None
    _save_spec("chat", f["served"], f["draft"], {"acceptance_rate": 0.6, "break_even_acceptance_rate": 0.35,
                                                   "source": "specops recommend (predicted)"})
    (target,), _ = watch_targets(reg, names=["chat"])
    gamma = target.gamma
    assert gamma >= 1 and target.break_even_alpha == pytest.approx(alpha_from_rate(0.35, gamma))
    assert rate_of_alpha(target.break_even_alpha, gamma) == pytest.approx(0.35, abs=1e-6)
    # below it, the monitor's finding names the number (classify.Evidence.versus_break_even)
    from specops.drift.classify import Evidence, LabelDrop

    drop = {"": LabelDrop("", baseline=0.7, recent=target.break_even_alpha - 0.05, sigmas=5.0, alarmed=True)}
    ev = Evidence("chat", drop, break_even=target.break_even_alpha)
    assert f"break-even α {target.break_even_alpha:.3f}" in ev.versus_break_even()
    assert "recommend -o deployment" in Evidence("chat", drop).versus_break_even()
