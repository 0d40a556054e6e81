"""Engines and transactions: SQLite in WAL mode with a busy timeout, retries on SQLITE_BUSY.

- Every SQLite connection runs ``PRAGMA busy_timeout``, ``journal_mode=WAL``, ``foreign_keys=ON``
  and ``synchronous=NORMAL`` (in WAL mode a committed transaction survives a killed process).
- pysqlite's own transaction handling is switched off and SQLAlchemy's ``begin`` emits ``BEGIN``
  (reads) or ``BEGIN IMMEDIATE`` (writes): DDL is transactional, and a writer takes the write
  lock up front, so two writers never deadlock upgrading a read lock.
- :func:`transaction` re-runs the whole unit of work with exponential backoff and jitter when the
  database stays busy past the busy timeout (or PostgreSQL reports a serialization failure / deadlock),
  so "database is locked" never reaches the user; after ``SPECOPS_DB_RETRY_SECONDS`` (default 60)
  it raises :class:`~specops.errors.RegistryError`.

Test-only hook: ``SPECOPS_TEST_PAUSE_BEFORE_COMMIT=N:PATH`` makes the N-th write transaction of the
process write PATH and sleep (before COMMIT, with its rows flushed) until it is killed. The crash
tests use it to SIGKILL a writer that is provably inside a transaction. Never set it otherwise.
"""

from __future__ import annotations

import os
import random
import time
import weakref
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeVar

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, OperationalError

from specops.errors import RegistryError

T = TypeVar("T")
BUSY_TIMEOUT_MS = 10_000
_write_count = 0


def utc_stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def redact_url(url: str) -> str:
    """Hide a password in a database URL, in its user info or its query (for messages)."""
    from sqlalchemy.engine import make_url

    from specops.secrets import redact_url as redact_any

    try:
        return redact_any(make_url(url).render_as_string(hide_password=True))
    except Exception:  # noqa: BLE001 - an unparsable URL is reported without what precedes an @
        return redact_any(url.split("@")[-1])


def make_engine(url: str) -> Engine:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise RegistryError(f'"{url}" is not a database URL', "give --db / SPECOPS_DB as a SQLAlchemy URL, e.g. "
                            "sqlite:////path/specops.db or postgresql+psycopg://user@host/db") from exc
    try:
        if parsed.get_backend_name() == "sqlite":
            return _sqlite_engine(url, parsed.database)
        return create_engine(url, pool_pre_ping=True)
    except NoSuchModuleError as exc:
        raise RegistryError(f"no database driver for {redact_url(url)}",
                            "install the driver, e.g. pip install 'specops[postgres]' for PostgreSQL") from exc


def _sqlite_engine(url: str, database: str | None) -> Engine:
    if database and database != ":memory:" and not database.startswith("file:"):
        parent = Path(database).expanduser().parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RegistryError(f"cannot create the registry folder {parent}: {exc.strerror}",
                                "set SPECOPS_HOME or --db to a writable location") from exc
    engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):  # pragma: no cover - exercised through every test
        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get("specops_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def _retryable(exc: BaseException) -> bool:
    text = str(getattr(exc, "orig", exc)).lower()
    if "database is locked" in text or "database is busy" in text or "database table is locked" in text:
        return True
    code = getattr(getattr(exc, "orig", None), "sqlstate", None)
    return code in ("40001", "40P01")  # PostgreSQL serialization failure, deadlock


def _maybe_pause() -> None:
    """The test-only hook described in the module docstring."""
    global _write_count
    spec = os.environ.get("SPECOPS_TEST_PAUSE_BEFORE_COMMIT")
    if not spec:
        return
    _write_count += 1
    n, _, path = spec.partition(":")
    if n.isdigit() and int(n) == _write_count and path:
        Path(path).write_text(str(os.getpid()))
        while True:
            time.sleep(3600)


def _retry_deadline() -> float:
    try:
        return float(os.environ.get("SPECOPS_DB_RETRY_SECONDS", "60"))
    except ValueError:
        return 60.0


def transaction(engine: Engine, fn: Callable[..., T], *, write: bool = True, orm: bool = True) -> T:
    """Run ``fn(session)`` (or ``fn(connection)`` with ``orm=False``) in one transaction, retried as a
    whole while the database is busy. ``fn`` must have no side effects outside the database."""
    from sqlmodel import Session

    deadline = time.monotonic() + _retry_deadline()
    delay = 0.005
    if write:
        check_integrity(engine)
    while True:
        try:
            if orm:
                with Session(engine, expire_on_commit=False) as session:
                    session.connection(execution_options={"specops_write": write})
                    result = fn(session)
                    if write:
                        session.flush()
                        _maybe_pause()
                    session.commit()
                    return result
            with engine.connect() as conn:
                conn.execution_options(specops_write=write)
                with conn.begin():
                    result = fn(conn)
                    if write:
                        _maybe_pause()
                return result
        except (OperationalError, DBAPIError) as exc:
            if _retryable(exc) and time.monotonic() < deadline:
                time.sleep(delay + random.uniform(0, delay))
                delay = min(delay * 2, 0.5)
                continue
            if _retryable(exc):
                raise RegistryError("the registry database stayed busy for too long",
                                    "retry later, or raise SPECOPS_DB_RETRY_SECONDS") from exc
            if _corrupt(exc):
                raise _corruption_error(engine, str(getattr(exc, "orig", exc)).splitlines()[0]) from exc
            raise RegistryError(f"registry database error: {str(getattr(exc, 'orig', exc)).splitlines()[0]}",
                                "check that --db / SPECOPS_DB points at a reachable, writable database") from exc


_checked_engines: weakref.WeakSet = weakref.WeakSet()


def _corrupt(exc: BaseException) -> bool:
    text = str(getattr(exc, "orig", exc)).lower()
    return "malformed" in text or "file is not a database" in text or "database corrupt" in text


def _corruption_error(engine: Engine, detail: str) -> RegistryError:
    where = engine.url.database or str(engine.url)
    return RegistryError(f"the registry {where} is corrupt ({detail[:200]}); nothing was written",
                         f"restore it from a backup, or salvage it with `sqlite3 {where} .recover | sqlite3 new.db` "
                         "and point --db at the new file")


def check_integrity(engine: Engine) -> None:
    """Before the first write of this process to a SQLite registry: ``PRAGMA quick_check``. A file whose
    inner pages are corrupt is refused (RegistryError, exit 2) instead of taking more rows."""
    if engine.dialect.name != "sqlite" or engine in _checked_engines:
        return
    try:
        with engine.connect() as conn:
            rows = [r[0] for r in conn.exec_driver_sql("PRAGMA quick_check(5)").all()]
    except (OperationalError, DBAPIError) as exc:
        if _corrupt(exc):
            raise _corruption_error(engine, str(getattr(exc, "orig", exc)).splitlines()[0]) from exc
        return  # busy or unreachable: the write itself reports it
    if rows != ["ok"]:
        raise _corruption_error(engine, "; ".join(str(r) for r in rows))
    _checked_engines.add(engine)
