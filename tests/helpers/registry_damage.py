"""Damage a real SQLite registry the way a bad disk does (shared by the tests that prove each command
notices): the event table's root page overwritten with 0xff bytes."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def corrupt_inner_pages(home: Path) -> Path:
    """Fill ``home``'s registry with events, then overwrite the event table's root page (its cells then
    point nowhere sensible); returns the database file."""
    from specops.registry import open_registry

    reg = open_registry()
    for _ in range(400):
        reg.record_event("note", "web", "x" * 500, actor="test")
    db = home / "specops.db"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name='event'").fetchone()[0]
    reg.engine.dispose()
    raw = bytearray(db.read_bytes())
    at = (root - 1) * page
    raw[at + 8: at + page] = b"\xff" * (page - 8)
    db.write_bytes(bytes(raw))
    return db
