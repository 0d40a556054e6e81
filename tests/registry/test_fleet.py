"""Deployments, measurements, validation runs, retraining leases, events and prune (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from specops.errors import InputError, NotFoundError
from specops.registry import LeaseHeldError

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


def _measure(reg, dep, end, *, drafts=10, draft_tokens=30, accepted=15, task=None, per_position=None):
    return reg.record_measurement(dep, window_start=end - timedelta(minutes=1), window_end=end,
                                  acceptance_rate=accepted / draft_tokens, mean_acceptance_length=1 + accepted / drafts,
                                  per_position=per_position, num_drafts=drafts, num_draft_tokens=draft_tokens,
                                  num_accepted_tokens=accepted, task=task)


def test_upsert_creates_then_updates_only_given_fields_and_logs_status_changes(reg):
    a = reg.upsert_deployment("web", platform="local", status="starting", pid=42, port=8000, method="ngram",
                              argv_redacted=["vllm", "serve", "--api-key", "***"], api_key_env="VLLM_KEY")
    b = reg.upsert_deployment("web", platform="local", status="running", endpoint="http://127.0.0.1:8000")
    assert (b.pid, b.port, b.method, b.endpoint, b.status) == (42, 8000, "ngram", "http://127.0.0.1:8000", "running")
    assert b.created_at == a.created_at and b.updated_at >= a.updated_at
    c = reg.set_deployment_status("web", "stopped", pid=None, reason="user asked")
    assert (c.status, c.pid) == ("stopped", None)
    kinds = [(e.kind, (e.data or {}).get("to")) for e in reg.events(subject="web")]
    assert kinds == [("deployment.status", "stopped"), ("deployment.status", "running"), ("deployment.created", None)]
    assert [d.name for d in reg.list_deployments()] == ["web"]


def test_deployment_refs_to_registered_models_are_pinned_to_a_version(reg, models):
    reg.register_target(str(models("target")), name="tiny", version="3")
    dep = reg.upsert_deployment("web", platform="kubernetes", status="pending", target_ref="tiny",
                                draft_ref="not-registered")
    assert (dep.target_ref, dep.draft_ref) == ("tiny@3", "not-registered")


@pytest.mark.parametrize("status", ["running ", "RUNNING", "gone"])
def test_bad_statuses_and_fields_are_refused(reg, status):
    with pytest.raises(InputError, match="status"):
        reg.upsert_deployment("web", platform="local", status=status)
    with pytest.raises(InputError, match="unknown deployment field"):
        reg.upsert_deployment("web", platform="local", status="pending", colour="red")
    assert reg.list_deployments() == []


def test_unknown_deployment_suggests_the_closest_name(reg):
    reg.upsert_deployment("chat-prod", platform="local", status="running")
    with pytest.raises(NotFoundError, match='Did you mean "chat-prod"'):
        reg.get_deployment("chat-prd")


def test_latest_measurements_pick_the_newest_window_of_each_deployment(reg):
    for name in ("a", "b"):
        reg.upsert_deployment(name, platform="local", status="running")
    _measure(reg, "a", T0 + timedelta(hours=2), accepted=20)
    _measure(reg, "a", T0 + timedelta(hours=1), accepted=5)  # recorded later, older window
    _measure(reg, "b", T0, accepted=9)
    reg.upsert_deployment("c", platform="local", status="running")  # nothing measured
    latest = {m.deployment: m.num_accepted_tokens for m in reg.latest_measurements()}
    assert latest == {"a": 20, "b": 9}


def test_trend_weights_each_day_by_its_counters(reg):
    reg.upsert_deployment("a", platform="local", status="running")
    now = T0 + timedelta(days=10)
    _measure(reg, "a", now - timedelta(days=1, hours=1), drafts=10, draft_tokens=10, accepted=10)
    _measure(reg, "a", now - timedelta(days=1, hours=2), drafts=30, draft_tokens=90, accepted=0)
    _measure(reg, "a", now - timedelta(days=9))  # outside the 7 days
    trend = reg.measurement_trend("a", days=7, now=now)
    assert len(trend.points) == 1
    p = trend.points[0]
    assert (p.measurements, p.acceptance_rate, p.mean_acceptance_length) == (2, 10 / 100, 1 + 10 / 40)


def test_a_window_that_ends_before_it_starts_is_refused(reg):
    reg.upsert_deployment("a", platform="local", status="running")
    with pytest.raises(InputError, match="ends before it starts"):
        reg.record_measurement("a", window_start=T0, window_end=T0 - timedelta(seconds=1), acceptance_rate=0.5,
                               mean_acceptance_length=2, per_position=None, num_drafts=1, num_draft_tokens=1,
                               num_accepted_tokens=1)


def test_only_one_retraining_job_runs_per_deployment_until_it_ends_or_its_lease_expires(reg):
    reg.upsert_deployment("a", platform="local", status="running")
    reg.upsert_deployment("b", platform="local", status="running")
    job = reg.start_retrain_job("a", backend="local", lease_seconds=60, now=T0)
    with pytest.raises(LeaseHeldError, match="still running"):
        reg.start_retrain_job("a", backend="local", now=T0 + timedelta(seconds=30))
    reg.start_retrain_job("b", backend="local", now=T0)  # other deployments are independent
    taken = reg.start_retrain_job("a", backend="local", now=T0 + timedelta(seconds=61))
    statuses = {j.id: j.status for j in reg.retrain_jobs("a")}
    assert statuses == {job.id: "expired", taken.id: "running"}
    done = reg.finish_retrain_job(taken.id, status="succeeded", result_draft_ref="d@v2")
    assert done.status == "succeeded"
    reg.start_retrain_job("a", backend="local")
    with pytest.raises(InputError, match="already ended"):
        reg.finish_retrain_job(taken.id)


def test_validation_runs_keep_their_findings(reg):
    from specops.models import Finding

    reg.upsert_deployment("a", platform="local", status="running")
    f = Finding(code="LOW_ACCEPTANCE", severity="error", message="0.1 < 0.3", fix="retrain")
    run = reg.record_validation_run("a", checklist="basic", passed=False, findings=[f], summary={"rate": 0.1})
    assert reg.validation_runs("a")[0].findings == [f.model_dump(mode="json")] == run.findings


def test_events_are_filtered_newest_first_and_limited(reg):
    for i in range(5):
        reg.record_event("note", "x" if i % 2 else "y", str(i), actor="tester", reason="because", data={"i": i})
    assert [e.message for e in reg.events(subject="y")] == ["4", "2", "0"]
    assert [e.message for e in reg.events(kind="note", limit=2)] == ["4", "3"]
    assert reg.events(subject="x")[0].actor == "tester"


def test_prune_reports_first_then_downsamples_and_deletes(reg):
    reg.upsert_deployment("a", platform="local", status="running")
    now = T0 + timedelta(days=400)
    for minute in range(6):  # one hour 10 days ago: 6 raw rows -> 1 hourly row
        _measure(reg, "a", now - timedelta(days=10) + timedelta(minutes=minute), per_position=[0.5, 0.25])
    for hour in range(3):  # one day 60 days ago: 3 rows -> 1 daily row
        _measure(reg, "a", now - timedelta(days=60) + timedelta(hours=hour))
    _measure(reg, "a", now - timedelta(days=380))  # beyond the horizon
    _measure(reg, "a", now - timedelta(hours=1))  # recent: untouched
    dry = reg.prune(now=now)
    assert (dry.dry_run, dry.deleted, dry.to_hourly, dry.hourly_rows, dry.to_daily, dry.daily_rows, dry.remaining) == \
        (True, 1, 6, 1, 3, 1, 3)
    assert len(reg.measurements("a")) == 11  # the dry run changed nothing
    done = reg.prune(now=now, apply=True)
    assert not done.dry_run and done.remaining == 3
    rows = {m.granularity: m for m in reg.measurements("a")}
    assert set(rows) == {"raw", "hourly", "daily"}
    assert rows["hourly"].num_drafts == 60 and rows["hourly"].per_position == [0.5, 0.25]
    assert rows["hourly"].extra == {"aggregated_rows": 6} and rows["daily"].acceptance_rate == 0.5
    assert reg.prune(now=now).to_hourly == 0  # idempotent
