"""Migrations: from an empty database and from every earlier schema, transactional, recorded.

There is one real migration so far; a test-only second migration (added to a copy of the list, never
to the real one) proves the mechanism upgrades an existing v1 database with data in it.
"""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from specops.errors import RegistryError
from specops.registry import open_registry
from specops.registry.db import make_engine
from specops.registry.migrations import MIGRATIONS, MIGRATIONS_TABLE, Migration, applied, apply_migrations
from specops.registry.schema import TABLES


def _add_notes_column(conn) -> None:
    conn.execute(text("ALTER TABLE deployment ADD COLUMN notes VARCHAR(200)"))
    conn.execute(text("CREATE INDEX ix_deployment_notes ON deployment (notes)"))


def _broken(conn) -> None:
    conn.execute(text("CREATE TABLE half_done (id INTEGER PRIMARY KEY)"))
    raise RuntimeError("migration failed halfway")


TEST_ONLY_SECOND = Migration("0002_test_only_deployment_notes", _add_notes_column)


def _tables(engine) -> set[str]:
    return set(inspect(engine).get_table_names())


def test_an_empty_database_gets_every_migration_recorded_once(db_url):
    engine = make_engine(db_url)
    assert apply_migrations(engine) == [m.name for m in MIGRATIONS]
    assert apply_migrations(engine) == []  # reopening applies nothing
    with engine.connect() as conn:
        assert applied(conn) == [m.name for m in MIGRATIONS]
        stamps = conn.execute(text(f"SELECT applied_at FROM {MIGRATIONS_TABLE}")).scalars().all()
    assert all(s.endswith("Z") for s in stamps)
    engine.dispose()


def test_the_migrated_schema_matches_the_sqlmodel_tables(db_url):
    reg = open_registry(db_url)
    insp = inspect(reg.engine)
    for table in TABLES:
        cols = {c["name"]: c["nullable"] for c in insp.get_columns(table.__tablename__)}
        want = {c.name: c.nullable for c in table.__table__.columns}
        assert cols == want, table.__tablename__
        want_idx = {i.name for i in table.__table__.indexes}
        have_idx = {i["name"] for i in insp.get_indexes(table.__tablename__)}
        assert want_idx <= have_idx, table.__tablename__
    reg.close()


def test_a_v1_database_with_data_upgrades_to_a_second_migration(db_url, models):
    reg = open_registry(db_url)  # schema v1
    reg.register_target(str(models("target")), name="tiny", version="1")
    reg.upsert_deployment("web", platform="local", status="running", target_ref="tiny")
    reg.close()
    engine = make_engine(db_url)
    assert apply_migrations(engine, [*MIGRATIONS, TEST_ONLY_SECOND]) == [TEST_ONLY_SECOND.name]
    with engine.connect() as conn:
        assert applied(conn) == sorted([*(m.name for m in MIGRATIONS), TEST_ONLY_SECOND.name])
        assert conn.execute(text("SELECT name, notes FROM deployment")).all() == [("web", None)]
    # this specops does not know the second migration: the normal open refuses it, naming both versions
    # (issue 26: a newer schema is never used without a word)
    with pytest.raises(RegistryError, match=f"newer specops.*{TEST_ONLY_SECOND.name}.*{MIGRATIONS[-1].name}"):
        open_registry(db_url)
    engine.dispose()


def test_every_earlier_schema_reaches_the_latest(db_url):
    chain = [*MIGRATIONS, TEST_ONLY_SECOND]
    for start in range(len(chain)):  # start=0: empty database
        engine = make_engine(db_url)
        apply_migrations(engine, chain[:start])
        apply_migrations(engine, chain)
        with engine.connect() as conn:
            assert applied(conn) == sorted(m.name for m in chain)
        assert "notes" in {c["name"] for c in inspect(engine).get_columns("deployment")}
        with engine.begin() as conn:  # reset for the next starting point
            for t in [*(t.__tablename__ for t in reversed(TABLES)), MIGRATIONS_TABLE]:
                conn.execute(text(f"DROP TABLE {t}"))
        engine.dispose()


def test_a_failing_migration_leaves_the_previous_schema_and_is_not_recorded(db_url):
    engine = make_engine(db_url)
    with pytest.raises(RuntimeError, match="halfway"):
        apply_migrations(engine, [*MIGRATIONS, Migration("0002_broken", _broken)])
    assert "half_done" not in _tables(engine)
    with engine.connect() as conn:
        assert applied(conn) == [m.name for m in MIGRATIONS]
    engine.dispose()
