"""Named, ordered, transactional migrations, recorded in the ``specops_migrations`` table.

Each migration is a function ``(connection) -> None`` registered with :func:`migration`. They are
applied in order by :func:`apply_migrations` (called by ``open_registry``), each in its own
transaction together with the row that records it, so a failed migration leaves the database at
the previous schema. Concurrent openers serialise on the write lock (SQLite ``BEGIN IMMEDIATE``;
on PostgreSQL a ``LOCK TABLE`` on the migrations table) and re-check what is applied inside it.

The DDL of each migration is frozen here (SQLAlchemy Core on a private MetaData), never derived from
the live sqlmodel classes: a later migration that alters a table must not change what an earlier
one created. ``tests/registry/test_migrations.py`` checks that the migrated schema matches the
sqlmodel classes in :mod:`specops.registry.schema`.

To add one: write ``@migration("0002_what_it_does")`` below the last one; never edit or reorder an
applied migration.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    text,
)
from sqlalchemy.engine import Connection, Engine

MIGRATIONS_TABLE = "specops_migrations"


@dataclass(frozen=True)
class Migration:
    name: str
    apply: Callable[[Connection], None]


MIGRATIONS: list[Migration] = []


def migration(name: str) -> Callable[[Callable[[Connection], None]], Callable[[Connection], None]]:
    def deco(fn: Callable[[Connection], None]) -> Callable[[Connection], None]:
        if any(m.name == name for m in MIGRATIONS):
            raise ValueError(f"duplicate migration name {name}")
        MIGRATIONS.append(Migration(name, fn))
        return fn

    return deco


def _artifact_columns() -> list[Column]:
    return [
        Column("source", String(1000), nullable=False),
        Column("source_kind", String(10), nullable=False),
        Column("hub_revision", String(200)),
        Column("hub_commit", String(64)),
        Column("architecture", String(200)),
        Column("model_type", String(100)),
        Column("hidden_size", Integer),
        Column("target_hidden_size", Integer),
        Column("num_layers", Integer),
        Column("vocab_size", Integer),
        Column("draft_vocab_size", Integer),
        Column("tokenizer_hash", String(80)),
        Column("tokenizer_vocab_size", Integer),
        Column("weights_fingerprint", String(80)),
        Column("weights_bytes", Integer),
        Column("quantization", String(100)),
        Column("dtype", String(40)),
        Column("fingerprint", String(200)),
        Column("facts", JSON, nullable=False),
    ]


@migration("0001_initial_schema")
def _initial(conn: Connection) -> None:
    md = MetaData()
    Table("target_model", md,
          Column("id", Integer, primary_key=True),
          Column("name", String(200), nullable=False, index=True),
          Column("version", String(100), nullable=False),
          *_artifact_columns(),
          Column("created_at", DateTime(timezone=True), nullable=False),
          UniqueConstraint("name", "version", name="uq_target_name_version"),
          Index("ix_target_model_fingerprint", "fingerprint"))
    Table("draft_model", md,
          Column("id", Integer, primary_key=True),
          Column("name", String(200), nullable=False, index=True),
          Column("version", String(100), nullable=False),
          *_artifact_columns(),
          Column("method", String(30), nullable=False),
          Column("eagle_generation", String(10)),
          Column("target_id", Integer, ForeignKey("target_model.id"), nullable=False, index=True),
          Column("trained_against_fingerprint", String(200)),
          Column("trained_on", String(1000)),
          Column("trainer_cmd", String(4000)),
          Column("created_at", DateTime(timezone=True), nullable=False),
          UniqueConstraint("name", "version", name="uq_draft_name_version"),
          Index("ix_draft_model_fingerprint", "fingerprint"))
    Table("deployment", md,
          Column("id", Integer, primary_key=True),
          Column("name", String(200), nullable=False),
          Column("platform", String(40), nullable=False),
          Column("status", String(20), nullable=False),
          Column("target_ref", String(300)),
          Column("draft_ref", String(300)),
          Column("method", String(30)),
          Column("num_speculative_tokens", Integer),
          Column("vllm_version", String(40)),
          Column("endpoint", String(500)),
          Column("served_model_name", String(200)),
          Column("engine_config", JSON),
          Column("argv_redacted", JSON),
          Column("pid", Integer),
          Column("pid_start_time", Float),
          Column("port", Integer),
          Column("target_fingerprint", String(200)),
          Column("draft_fingerprint", String(200)),
          Column("api_key_env", String(200)),
          Column("labels", JSON),
          Column("created_at", DateTime(timezone=True), nullable=False),
          Column("updated_at", DateTime(timezone=True), nullable=False),
          UniqueConstraint("name", name="uq_deployment_name"))
    Table("measurement", md,
          Column("id", Integer, primary_key=True),
          Column("deployment_id", Integer, ForeignKey("deployment.id"), nullable=False),
          Column("window_start", DateTime(timezone=True), nullable=False),
          Column("window_end", DateTime(timezone=True), nullable=False),
          Column("acceptance_rate", Float),
          Column("mean_acceptance_length", Float),
          Column("per_position", JSON),
          Column("num_drafts", Integer, nullable=False),
          Column("num_draft_tokens", Integer, nullable=False),
          Column("num_accepted_tokens", Integer, nullable=False),
          Column("task", String(100)),
          Column("source", String(40), nullable=False),
          Column("granularity", String(10), nullable=False),
          Column("extra", JSON),
          Index("ix_measurement_deployment_end", "deployment_id", "window_end"),
          Index("ix_measurement_end", "window_end"))
    Table("validation_run", md,
          Column("id", Integer, primary_key=True),
          Column("deployment_id", Integer, ForeignKey("deployment.id"), nullable=False),
          Column("checklist", String(200), nullable=False),
          Column("passed", Boolean, nullable=False),
          Column("findings", JSON, nullable=False),
          Column("summary", JSON),
          Column("started_at", DateTime(timezone=True), nullable=False),
          Column("finished_at", DateTime(timezone=True), nullable=False),
          Index("ix_validation_deployment_finished", "deployment_id", "finished_at"))
    Table("retrain_job", md,
          Column("id", Integer, primary_key=True),
          Column("deployment_id", Integer, ForeignKey("deployment.id"), nullable=False),
          Column("backend", String(60), nullable=False),
          Column("status", String(20), nullable=False),
          Column("reason", String(2000)),
          Column("holder", String(200)),
          Column("params", JSON),
          Column("started_at", DateTime(timezone=True), nullable=False),
          Column("lease_expires_at", DateTime(timezone=True)),
          Column("finished_at", DateTime(timezone=True)),
          Column("result_draft_ref", String(300)),
          Column("message", String(4000)),
          Column("active_key", Integer),
          UniqueConstraint("active_key", name="uq_retrain_active"),
          Index("ix_retrain_deployment_started", "deployment_id", "started_at"))
    Table("event", md,
          Column("id", Integer, primary_key=True),
          Column("at", DateTime(timezone=True), nullable=False),
          Column("kind", String(100), nullable=False),
          Column("subject", String(300), nullable=False),
          Column("message", String(4000), nullable=False),
          Column("actor", String(200)),
          Column("reason", String(2000)),
          Column("data", JSON),
          Index("ix_event_subject", "subject", "id"),
          Index("ix_event_kind", "kind", "id"))
    md.create_all(conn)


@migration("0002_tune_runs_and_calibrations")
def _tune(conn: Connection) -> None:
    """`specops tune`: runs, their measured points (resume reads them), and named calibrations."""
    md = MetaData()
    Table("tune_run", md,
          Column("id", Integer, primary_key=True),
          Column("run_id", String(100), nullable=False),
          Column("created_at", DateTime(timezone=True), nullable=False),
          Column("options", JSON, nullable=False),
          Column("meta", JSON),
          UniqueConstraint("run_id", name="uq_tune_run_id"))
    Table("tune_point", md,
          Column("id", Integer, primary_key=True),
          Column("tune_run_id", Integer, ForeignKey("tune_run.id"), nullable=False),
          Column("key", String(200), nullable=False),
          Column("status", String(10), nullable=False),
          Column("result", JSON, nullable=False),
          Column("recorded_at", DateTime(timezone=True), nullable=False),
          UniqueConstraint("tune_run_id", "key", name="uq_tune_point_key"))
    Table("calibration", md,
          Column("id", Integer, primary_key=True),
          Column("name", String(100), nullable=False),
          Column("revision", Integer, nullable=False),
          Column("created_at", DateTime(timezone=True), nullable=False),
          Column("model", String(1000), nullable=False),
          Column("hardware", String(300), nullable=False),
          Column("engine_version", String(100), nullable=False),
          Column("workload", String(1000), nullable=False),
          Column("run_id", String(100)),
          Column("samples", Integer, nullable=False),
          Column("document", JSON, nullable=False),
          UniqueConstraint("name", "revision", name="uq_calibration_revision"),
          Index("ix_calibration_model", "model", "id"))
    md.create_all(conn)


@migration("0003_canary_tests")
def _canary_tests(conn: Connection) -> None:
    """The canary's sequential test (specops.heal.sequential): its samples, decision and error rates."""
    md = MetaData()
    Table("deployment", md, Column("id", Integer, primary_key=True))  # referenced only
    Table("canary_test", md,
          Column("id", Integer, primary_key=True),
          Column("deployment_id", Integer, ForeignKey("deployment.id"), nullable=False),
          Column("candidate", String(300), nullable=False),
          Column("incumbent", String(300)),
          Column("target", String(300)),
          Column("canary", String(300)),
          Column("traffic", String(60), nullable=False),
          Column("metric", String(100), nullable=False),
          Column("decision", String(20), nullable=False),
          Column("samples", Integer, nullable=False),
          Column("budget", Integer, nullable=False),
          Column("alpha", Float, nullable=False),
          Column("min_gain", Float, nullable=False),
          Column("power", Float),
          Column("mean_gain", Float),
          Column("verdict", JSON, nullable=False),
          Column("data", JSON, nullable=False),
          Column("started_at", DateTime(timezone=True), nullable=False),
          Column("finished_at", DateTime(timezone=True), nullable=False),
          Index("ix_canary_test_deployment", "deployment_id", "id"),
          Index("ix_canary_test_candidate", "candidate", "id"))
    md.tables["canary_test"].create(conn)


# --- applying -----------------------------------------------------------------------------------

def _ensure_table(conn: Connection) -> None:
    conn.execute(text(f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} ("
                      "name VARCHAR(200) PRIMARY KEY, applied_at VARCHAR(40) NOT NULL)"))


def applied(conn: Connection) -> list[str]:
    from sqlalchemy import inspect

    if not inspect(conn).has_table(MIGRATIONS_TABLE):
        return []
    rows = conn.execute(text(f"SELECT name FROM {MIGRATIONS_TABLE} ORDER BY name")).all()
    return [r[0] for r in rows]


def apply_migrations(engine: Engine, migrations: list[Migration] | None = None) -> list[str]:
    """Apply every pending migration, each in its own transaction. Returns the names applied now."""
    from specops.registry.db import transaction, utc_stamp

    todo = list(MIGRATIONS if migrations is None else migrations)
    have = set(transaction(engine, applied, write=False, orm=False))
    newer = sorted(have - {m.name for m in [*MIGRATIONS, *todo]})
    if newer:  # written by a newer specops: its columns and rules are unknown here, so nothing is touched
        from specops.errors import RegistryError

        raise RegistryError(f"the registry was migrated by a newer specops (schema {', '.join(newer)}; this "
                            f"specops knows up to {MIGRATIONS[-1].name})",
                            "upgrade specops (pip install -U specops), or point --db at another registry")
    if all(m.name in have for m in todo):  # fast path: one read, no write lock
        return []
    done_now: list[str] = []
    for m in todo:
        def step(conn: Connection, m: Migration = m) -> bool:
            _ensure_table(conn)
            if conn.dialect.name == "postgresql":
                conn.execute(text(f"LOCK TABLE {MIGRATIONS_TABLE} IN EXCLUSIVE MODE"))
            if m.name in set(applied(conn)):
                return False
            m.apply(conn)
            conn.execute(text(f"INSERT INTO {MIGRATIONS_TABLE} (name, applied_at) VALUES (:n, :t)"),
                         {"n": m.name, "t": utc_stamp()})
            return True

        if transaction(engine, step, orm=False):
            done_now.append(m.name)
    return done_now
