"""Real processes writing to a real database at once, and writers killed with SIGKILL mid-transaction."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import text

from specops.registry import open_registry

WRITER = Path(__file__).with_name("writer.py")
REPO = Path(__file__).resolve().parents[2]


def _env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO)
    env.update(extra or {})
    return env


def _count(reg, prefix: str) -> set[int]:
    return {int(e.message) for e in reg.events(subject=prefix, kind="test.row", limit=100_000)}


def test_four_processes_writing_at_once_keep_every_row_and_never_report_locked(db_url):
    reg = open_registry(db_url)  # migrate first; the writers then only append
    per_writer = 300
    procs = [subprocess.Popen([sys.executable, str(WRITER), db_url, f"w{i}", str(per_writer)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
             for i in range(4)]
    results = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err
        assert "locked" not in (out + err).lower()
    for i in range(4):
        assert _count(reg, f"w{i}") == set(range(per_writer))
    assert sum(len(_count(reg, f"w{i}")) for i in range(4)) >= 1000
    reg.close()


def _integrity(reg) -> str:
    with reg.engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            return conn.execute(text("PRAGMA integrity_check")).scalar()
        conn.execute(text("SELECT count(*) FROM event")).scalar()
        return "ok"


def test_writers_killed_inside_a_transaction_leave_an_intact_database_with_every_committed_row(db_url, tmp_path):
    """The test-only hook SPECOPS_TEST_PAUSE_BEFORE_COMMIT=N:PATH parks the N-th write transaction
    (rows flushed, COMMIT not yet sent) and writes PATH; we SIGKILL the writer then."""
    reg = open_registry(db_url)
    rng = random.Random(7)
    expected: dict[str, int] = {}
    kills = 20
    for k in range(kills):
        n = rng.randint(1, 4)  # transactions 1..n-1 commit, transaction n is killed before COMMIT
        flag = tmp_path / f"paused-{k}"
        prefix = f"kill{k}"
        proc = subprocess.Popen([sys.executable, str(WRITER), db_url, prefix, "10"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env=_env({"SPECOPS_TEST_PAUSE_BEFORE_COMMIT": f"{n}:{flag}"}))
        deadline = time.monotonic() + 60
        while not flag.exists():
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "writer never reached the pause"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        committed = {int(line.split()[-1]) for line in out.splitlines() if line.startswith("committed")}
        assert committed == set(range(n - 1))
        expected[prefix] = n - 1
    reg.close()
    reg = open_registry(db_url)  # a fresh open recovers the WAL
    assert _integrity(reg) == "ok"
    for prefix, n_committed in expected.items():
        assert _count(reg, prefix) == set(range(n_committed)), prefix
    # and the database still takes writes
    reg.record_event("test.row", "after", "0")
    assert _count(reg, "after") == {0}
    reg.close()
