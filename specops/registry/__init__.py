"""The draft/target lineage registry: models, lineage, deployments, measurements, events.

Open it with :func:`open_registry` (SQLite by default, any SQLAlchemy URL for a shared registry)::

    from specops.registry import open_registry

    reg = open_registry()                     # $SPECOPS_HOME/specops.db, or --db / SPECOPS_DB
    t = reg.register_target("/models/llama-8b", version="2024-07")   # -> TargetPublic
    d, warnings = reg.register_draft("/models/llama-8b-eagle3", target="llama-8b@2024-07")
    report = reg.check_lineage("llama-8b", "llama-8b-eagle3")       # report.ok, report.findings

Interface (every method is one transaction; errors are :mod:`specops.errors` classes):

Models — referred to as ``NAME`` (latest version) or ``NAME@VERSION``:
    ``register_target(path_or_id, *, name=None, version=None) -> TargetPublic`` fingerprints a local
    Hugging Face folder (config.json, tokenizer, sampled weight blocks; see :mod:`.fingerprint`) or
    records a hub id ``org/name[@revision]`` as given. Missing folder, unreadable config.json or a
    duplicate version -> InputError (exit 2), nothing written.
    ``register_draft(path_or_id, *, target, name=None, version=None, method=None, trained_on=None,
    trainer_cmd=None) -> (DraftPublic, list[Finding])``: the findings are warnings (vocab, tokenizer,
    hidden-size disagreement); registration succeeds. ngram/suffix/mtp "drafts" need no folder.
    ``get_target(ref)``, ``get_draft(ref)`` (NotFoundError with did-you-mean), ``list_targets()``,
    ``list_drafts(target=None)``, ``find_by_path(path) -> TargetPublic | DraftPublic | None``.
    ``check_lineage(target_ref, draft_ref, *, vllm_version="0.33.0", method=None) -> LineageReport``
    with ``.ok`` and ``.findings`` (``specops.models.Finding``; codes in :mod:`.lineage`).

Deployments — status is one of pending, starting, running, stopped, failed, adopted:
    ``upsert_deployment(name, *, platform, status, target_ref=None, draft_ref=None, method=None,
    num_speculative_tokens=None, vllm_version=None, endpoint=None, served_model_name=None,
    engine_config=None, argv_redacted=None, pid=None, pid_start_time=None, port=None,
    target_fingerprint=None, draft_fingerprint=None, api_key_env=None, labels=None) -> DeploymentPublic``
    (on update only the non-None fields change), ``set_deployment_status(name, status, **fields)``
    (None clears a field), ``get_deployment(name)``, ``list_deployments()``.

Measurements, validation, retraining:
    ``record_measurement(deployment, *, window_start, window_end, acceptance_rate,
    mean_acceptance_length, per_position, num_drafts, num_draft_tokens, num_accepted_tokens,
    task=None, source="metrics", extra=None) -> MeasurementPublic``; ``latest_measurements()`` (one
    per deployment), ``measurements(deployment, since=, until=, limit=)``,
    ``measurement_trend(deployment, days=7, now=None, bucket="day") -> Trend``.
    ``record_validation_run(deployment, *, checklist, passed, findings=None, summary=None,
    started_at=None, finished_at=None)``, ``validation_runs(deployment=None)``.
    ``start_retrain_job(deployment, *, backend, reason=None, params=None, holder=None,
    lease_seconds=21600, now=None)`` takes the deployment's lease (LeaseHeldError while another job
    runs and its lease has not expired); ``finish_retrain_job(job_id, *, status="succeeded"|"failed",
    result_draft_ref=None, message=None)``; ``retrain_jobs(deployment=None)``.

Events (append-only): ``record_event(kind, subject, message, *, actor=None, reason=None,
data=None)``, ``events(subject=None, kind=None, limit=100)`` newest first. Registration, deployment
status changes, validation runs and retraining jobs record their own events.

Tune runs and calibrations (:mod:`.tune`): ``create_tune_run(run_id, *, options, meta=None)``,
``get_tune_run(run_id)``, ``has_tune_run(run_id)``, ``tune_runs(limit=100)``; ``add_tune_point(run_id, *,
key, status, result)`` (a key once per run), ``tune_points(run_id)``; ``save_calibration(name, *, model,
hardware, engine_version, workload, samples, document, run_id=None) -> CalibrationPublic`` (next
revision), ``get_calibration("NAME" | "NAME@REV")``, ``calibrations(model=None)`` newest first.

Canary tests (:mod:`.canary`): ``record_canary_test(deployment, *, candidate, verdict, traffic, metric,
data, incumbent=None, target=None, canary=None)``, ``get_canary_test(id)``, ``canary_tests(deployment=None,
draft=None)`` newest first.

Transfer: ``export_data(with_events=False) -> dict``, ``import_data(doc)``, ``prune(now=None,
raw_for=7d, hourly_for=30d, horizon=365d, apply=False) -> PruneReport``.

Concurrency: SQLite runs in WAL mode with a busy timeout; writers take the lock up front and whole
transactions are retried with backoff, so "database is locked" never reaches the caller.
"""

from __future__ import annotations

from specops.models import Finding
from specops.registry.canary import CanaryMixin
from specops.registry.lineage import LineageReport
from specops.registry.measurements import LeaseHeldError, Trend, TrendPoint
from specops.registry.schema import (
    CalibrationPublic,
    DeploymentPublic,
    DraftPublic,
    EventPublic,
    MeasurementPublic,
    RetrainJobPublic,
    TargetPublic,
    TunePointPublic,
    TuneRunPublic,
    ValidationRunPublic,
)
from specops.registry.transfer import PruneReport, TransferMixin
from specops.registry.tune import TuneMixin

__all__ = ["CalibrationPublic", "DeploymentPublic", "DraftPublic", "EventPublic", "Finding", "LeaseHeldError", "LineageReport",
           "MeasurementPublic", "PruneReport", "Registry", "RetrainJobPublic", "TargetPublic", "Trend", "TrendPoint", "TunePointPublic", "TuneRunPublic",
           "ValidationRunPublic", "open_registry"]


class Registry(TransferMixin, TuneMixin, CanaryMixin):
    """The registry API (see the module docstring). Build it with :func:`open_registry`."""


def open_registry(url: str | None = None, *, migrate: bool = True) -> Registry:
    """Open (creating if needed) the registry at ``url`` (default ``specops.settings.database_url()``)
    and apply pending migrations."""
    from specops.registry.db import make_engine
    from specops.registry.migrations import apply_migrations
    from specops.settings import database_url

    url = database_url(url)
    engine = make_engine(url)
    if migrate:
        apply_migrations(engine)
    return Registry(engine, url)
