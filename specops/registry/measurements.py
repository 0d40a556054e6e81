"""Measurements, validation runs and retraining jobs (the rows that accumulate while a fleet runs)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from pydantic import Field, TypeAdapter
from sqlalchemy import JSON, DateTime, String, type_coerce
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from specops.errors import InputError, RegistryError
from specops.models import Finding, Strict
from specops.registry.schema import (
    Deployment,
    MeasurementCreate,
    MeasurementPublic,
    MeasurementRow,
    RetrainJob,
    RetrainJobCreate,
    RetrainJobPublic,
    ValidationRun,
    ValidationRunCreate,
    ValidationRunPublic,
    to_utc,
    utcnow,
)
from specops.registry.store import DeploymentsMixin, _validate, _validated
from specops.speculation import Acceptance

_MEASUREMENTS = TypeAdapter(list[MeasurementPublic])


class LeaseHeldError(RegistryError):
    """A retraining job is already running for this deployment (one at a time). Exit 2."""


class TrendPoint(Strict):
    """Aggregate of the measurements whose window ends in one bucket."""


    start: datetime = Field(description="Bucket start (UTC).")
    measurements: int = Field(description="Rows in the bucket.")
    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    acceptance_rate: float | None = Field(description="Sum accepted / sum drafted in the bucket.")
    mean_acceptance_length: float | None = Field(description="1 + sum accepted / sum drafts.")


class Trend(Strict):
    deployment: str
    since: datetime
    until: datetime
    bucket: str = Field(description="day or hour.")
    points: list[TrendPoint]


def aggregate(num_drafts: int, num_draft_tokens: int, num_accepted: int) -> tuple[float | None, float | None]:
    acc = Acceptance(num_drafts, num_draft_tokens, num_accepted)
    return acc.rate, acc.tau


class MeasurementsMixin(DeploymentsMixin):
    # --- measurements ----------------------------------------------------------------------------

    def record_measurement(self, deployment: str, *, window_start, window_end, acceptance_rate: float | None,
                           mean_acceptance_length: float | None, per_position: list[float] | None,
                           num_drafts: int, num_draft_tokens: int, num_accepted_tokens: int, task: str | None = None,
                           source: str = "metrics", extra: dict | None = None) -> MeasurementPublic:
        def work(s: Session) -> MeasurementPublic:
            dep = self._dep(s, deployment)
            create = _validate(MeasurementCreate, dict(
                deployment_id=dep.id, window_start=window_start, window_end=window_end, acceptance_rate=acceptance_rate,
                mean_acceptance_length=mean_acceptance_length, per_position=per_position, num_drafts=num_drafts,
                num_draft_tokens=num_draft_tokens, num_accepted_tokens=num_accepted_tokens, task=task, source=source,
                extra=extra))
            if create.window_end < create.window_start:
                raise InputError("measurement window ends before it starts", "pass window_start <= window_end")
            row = _validated(MeasurementRow, create)
            s.add(row)
            s.flush()
            return _mpublic(row, deployment)
        return self._tx(work)

    def latest_measurements(self) -> list[MeasurementPublic]:
        """The newest measurement (by window end) of every deployment that has one.

        One index seek per deployment (ix_measurement_deployment_end); rows are read as plain tuples
        (no ORM objects), which keeps 1,000 deployments well under 50 ms (bench/registry_bench.py)."""
        m = MeasurementRow.__table__
        latest = (select(m.c.id).where(m.c.deployment_id == Deployment.id)
                  .order_by(m.c.window_end.desc(), m.c.id.desc()).limit(1).correlate(Deployment).scalar_subquery())
        # Raw column values (ISO strings / JSON text on SQLite) are parsed by pydantic-core in one
        # validate call: far cheaper than SQLAlchemy's per-value result processors.
        cols = [type_coerce(c, String).label(c.name) if isinstance(c.type, (JSON, DateTime)) or c.name.endswith("_at")
                else c for c in m.c if c.name != "deployment_id"]
        q = (select(*cols, Deployment.name.label("deployment")).select_from(Deployment)
             .join(m, m.c.id == latest).order_by(Deployment.name))

        def work(s: Session) -> list[MeasurementPublic]:
            result = s.connection().execute(q)
            keys = list(result.keys())
            rows = [dict(zip(keys, t, strict=True)) for t in result.all()]
            for r in rows:
                for key in ("per_position", "extra"):
                    v = r[key]
                    if v is not None:
                        r[key] = None if v == "null" else json.loads(v) if isinstance(v, str) else v
            return _MEASUREMENTS.validate_python(rows)
        return self._tx(work, write=False)

    def measurements(self, deployment: str, *, since: datetime | None = None, until: datetime | None = None,
                     limit: int = 1000) -> list[MeasurementPublic]:
        """Newest first."""
        def work(s: Session) -> list[MeasurementPublic]:
            dep = self._dep(s, deployment)
            q = select(MeasurementRow).where(MeasurementRow.deployment_id == dep.id)
            if since:
                q = q.where(MeasurementRow.window_end >= to_utc(since))
            if until:
                q = q.where(MeasurementRow.window_end <= to_utc(until))
            rows = s.exec(q.order_by(MeasurementRow.window_end.desc(), MeasurementRow.id.desc()).limit(limit)).all()
            return [_mpublic(r, deployment) for r in rows]
        return self._tx(work, write=False)

    def measurement_trend(self, deployment: str, days: int = 7, *, now: datetime | None = None,
                          bucket: str = "day") -> Trend:
        """Acceptance per day (or hour) over the last ``days`` days, counter-weighted."""
        if bucket not in ("day", "hour"):
            raise InputError(f'unknown trend bucket "{bucket}"', "use day or hour")
        until = to_utc(now) or utcnow()
        since = until - timedelta(days=days)

        def work(s: Session):
            dep = self._dep(s, deployment)
            q = (select(MeasurementRow.window_end, MeasurementRow.num_drafts, MeasurementRow.num_draft_tokens,
                        MeasurementRow.num_accepted_tokens)
                 .where(MeasurementRow.deployment_id == dep.id, MeasurementRow.window_end >= since,
                        MeasurementRow.window_end <= until))
            return s.exec(q).all()
        rows = self._tx(work, write=False)
        sums: dict[datetime, list[int]] = {}
        for end, nd, ndt, na in rows:
            key = end.replace(minute=0, second=0, microsecond=0)
            if bucket == "day":
                key = key.replace(hour=0)
            acc = sums.setdefault(key, [0, 0, 0, 0])
            acc[0] += 1
            acc[1] += nd
            acc[2] += ndt
            acc[3] += na
        points = []
        for key in sorted(sums):
            n, nd, ndt, na = sums[key]
            rate, tau = aggregate(nd, ndt, na)
            points.append(TrendPoint(start=key, measurements=n, num_drafts=nd, num_draft_tokens=ndt,
                                     num_accepted_tokens=na, acceptance_rate=rate, mean_acceptance_length=tau))
        return Trend(deployment=deployment, since=since, until=until, bucket=bucket, points=points)

    # --- validation runs -------------------------------------------------------------------------

    def record_validation_run(self, deployment: str, *, checklist: str, passed: bool,
                              findings: list[Finding | dict] | None = None, summary: dict | None = None,
                              started_at: datetime | None = None, finished_at: datetime | None = None,
                              actor: str | None = None) -> ValidationRunPublic:
        def work(s: Session) -> ValidationRunPublic:
            dep = self._dep(s, deployment)
            from specops.secrets import redact_data

            items = redact_data([f.model_dump(mode="json") if isinstance(f, Finding) else
                                 Finding.model_validate(f).model_dump(mode="json") for f in findings or []])
            summary_ = redact_data(summary)
            create = ValidationRunCreate(deployment_id=dep.id, checklist=checklist, passed=passed, findings=items,
                                         summary=summary_, started_at=to_utc(started_at) or utcnow(),
                                         finished_at=to_utc(finished_at) or utcnow())
            row = _validated(ValidationRun, create)
            s.add(row)
            self._event(s, "validation.recorded", deployment,
                        f"{checklist}: {'passed' if passed else 'failed'} ({len(items)} findings)", actor=actor,
                        data={"passed": passed})
            s.flush()
            return ValidationRunPublic.model_validate({**row.model_dump(exclude={"deployment_id"}),
                                                       "deployment": deployment})
        return self._tx(work)

    def validation_runs(self, deployment: str | None = None, limit: int = 20) -> list[ValidationRunPublic]:
        def work(s: Session) -> list[ValidationRunPublic]:
            q = select(ValidationRun, Deployment.name).join(Deployment, Deployment.id == ValidationRun.deployment_id)
            if deployment:
                q = q.where(ValidationRun.deployment_id == self._dep(s, deployment).id)
            rows = s.exec(q.order_by(ValidationRun.id.desc()).limit(limit)).all()
            return [ValidationRunPublic.model_validate({**r.model_dump(exclude={"deployment_id"}), "deployment": n})
                    for r, n in rows]
        return self._tx(work, write=False)

    # --- retraining jobs (a lease: one running job per deployment) --------------------------------

    def start_retrain_job(self, deployment: str, *, backend: str, reason: str | None = None,
                          params: dict | None = None, holder: str | None = None, lease_seconds: int = 6 * 3600,
                          now: datetime | None = None, actor: str | None = None) -> RetrainJobPublic:
        """Take the deployment's retraining lease. LeaseHeldError if a job is running and its lease has
        not expired; an expired one is marked ``expired`` and taken over."""
        from specops.registry.store import default_actor

        at = to_utc(now) or utcnow()

        def work(s: Session) -> RetrainJobPublic:
            dep = self._dep(s, deployment)
            running = s.exec(select(RetrainJob).where(RetrainJob.active_key == dep.id)).first()
            if running is not None:
                if running.lease_expires_at is None or running.lease_expires_at > at:
                    raise LeaseHeldError(
                        f"retraining job {running.id} for {deployment} is still running (held by {running.holder}, "
                        f"lease until {running.lease_expires_at:%Y-%m-%d %H:%M} UTC)",
                        "wait for it to finish (its lease ends then at the latest), or finish it with finish_retrain_job")
                running.status, running.active_key, running.finished_at = "expired", None, at
                running.message = "lease expired; taken over"
                s.add(running)
                s.flush()
            create = RetrainJobCreate(deployment_id=dep.id, active_key=dep.id, backend=backend, reason=reason,
                                      params=params, holder=holder or default_actor(), started_at=at,
                                      lease_expires_at=at + timedelta(seconds=lease_seconds))
            row = _validated(RetrainJob, create)
            s.add(row)
            try:
                s.flush()
            except IntegrityError as exc:
                raise LeaseHeldError(f"another retraining job for {deployment} started at the same time",
                                     "wait for it to finish") from exc
            self._event(s, "retrain.started", deployment, f"retraining job {row.id} started ({backend})",
                        actor=actor, reason=reason, data={"job": row.id})
            return _jpublic(row, deployment)
        return self._tx(work)

    def finish_retrain_job(self, job_id: int, *, status: str = "succeeded", result_draft_ref: str | None = None,
                           message: str | None = None, actor: str | None = None) -> RetrainJobPublic:
        if status not in ("succeeded", "failed"):
            raise InputError(f'unknown job outcome "{status}"', "use succeeded or failed")

        def work(s: Session) -> RetrainJobPublic:
            row = s.get(RetrainJob, job_id)
            if row is None:
                raise InputError(f"no retraining job {job_id}", "list jobs with retrain_jobs()")
            if row.status != "running":
                raise InputError(f"retraining job {job_id} already ended ({row.status})", "start a new job")
            row.status, row.active_key, row.finished_at = status, None, utcnow()
            row.result_draft_ref, row.message = result_draft_ref, message
            s.add(row)
            dep = s.get(Deployment, row.deployment_id)
            self._event(s, "retrain.finished", dep.name, f"retraining job {job_id} {status}", actor=actor,
                        data={"job": job_id, "draft": result_draft_ref})
            s.flush()
            return _jpublic(row, dep.name)
        return self._tx(work)

    def retrain_jobs(self, deployment: str | None = None, limit: int = 50) -> list[RetrainJobPublic]:
        def work(s: Session) -> list[RetrainJobPublic]:
            q = select(RetrainJob, Deployment.name).join(Deployment, Deployment.id == RetrainJob.deployment_id)
            if deployment:
                q = q.where(RetrainJob.deployment_id == self._dep(s, deployment).id)
            return [_jpublic(r, n) for r, n in s.exec(q.order_by(RetrainJob.id.desc()).limit(limit)).all()]
        return self._tx(work, write=False)


def _mpublic(row: MeasurementRow, deployment: str) -> MeasurementPublic:
    return MeasurementPublic.model_validate({**row.model_dump(exclude={"deployment_id"}), "deployment": deployment})


def _jpublic(row: RetrainJob, deployment: str) -> RetrainJobPublic:
    data: dict[str, Any] = row.model_dump(exclude={"deployment_id", "active_key"})
    return RetrainJobPublic.model_validate({**data, "deployment": deployment})
