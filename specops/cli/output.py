"""Rendering helpers: one data structure, shown as a rich table for people or JSON/YAML for machines."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from typing import Any

from specops.errors import InputError

FORMATS = ("table", "json", "yaml")



def check_format(fmt: str, allowed: tuple[str, ...] = FORMATS) -> str:
    fmt = (fmt or "table").lower()
    if fmt not in allowed:
        from specops.errors import did_you_mean

        raise InputError(f'unknown output format "{fmt}".{did_you_mean(fmt, allowed)}',
                         f"use --output {'|'.join(allowed)}")
    return fmt


def check_writable(path: str, flag: str, *, makes_folders: bool = False) -> str:
    """Refuse an output file that cannot be written, before any work starts (exit 2): see
    :func:`specops.outputs.check_output` (a FIFO or a device is refused too)."""
    from specops.outputs import check_output

    check_output(path, flag, makes_folders=makes_folders)
    return path


def to_jsonable(data: Any) -> Any:
    """Plain JSON data; a non-finite float (NaN, ±Inf) becomes null, so the output stays JSON."""
    if hasattr(data, "model_dump"):
        return to_jsonable(data.model_dump(mode="json"))
    if isinstance(data, dict):
        return {k: to_jsonable(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [to_jsonable(v) for v in data]
    if isinstance(data, float) and not math.isfinite(data):
        return None
    return data


def dumps(data: Any) -> str:
    """JSON text of ``data`` (strict: never NaN or Infinity)."""
    return json.dumps(to_jsonable(data), indent=2, sort_keys=False, allow_nan=False)


def versioned(data: Any) -> Any:
    """``data`` as plain JSON data with ``schema_version`` first in it (in each object of a list):
    specops.api.schemas.SCHEMA_VERSION, the version of docs/schemas/."""
    from specops.api.schemas import SCHEMA_VERSION

    data = to_jsonable(data)
    if isinstance(data, dict):
        return {"schema_version": SCHEMA_VERSION, **{k: v for k, v in data.items() if k != "schema_version"}}
    if isinstance(data, list):
        return [versioned(v) if isinstance(v, dict) else v for v in data]
    return data


def emit(data: Any, fmt: str, table: Callable[[Any], None] | None = None) -> None:
    """Print ``data`` as JSON, YAML (both with ``schema_version``) or (via ``table``) for people."""
    fmt = check_format(fmt, FORMATS if table else ("json", "yaml"))
    if fmt == "json":
        sys.stdout.write(dumps(versioned(data)) + "\n")
    elif fmt == "yaml":
        import yaml

        sys.stdout.write(yaml.safe_dump(versioned(data), sort_keys=False))
    else:
        assert table is not None
        table(data)


def console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr)


_last = {"t": 0.0, "waiting": False}
QUIET_PLAIN_S = 10.0
"""Without a terminal, a repeated "waiting for ..." line is printed at most this often (logs, CI)."""


def progress(msg: str) -> None:
    """The one progress display of the CLI (deploy, restart, stop, validate, bench, promote): messages go
    to stderr; "waiting for ..." messages (which carry the time left) update one line in place on a
    terminal, and without one are printed when they start and then every QUIET_PLAIN_S seconds; others are
    printed as they come."""
    import time

    waiting = msg.startswith("waiting for")
    if sys.stderr.isatty():
        sys.stderr.write(("\r\033[K" if waiting and _last["waiting"] else "\n" if _last["waiting"] else "")
                         + f"  … {msg}" + ("" if waiting else "\n"))
        sys.stderr.flush()
    elif not waiting or not _last["waiting"] or time.monotonic() - _last["t"] >= QUIET_PLAIN_S:
        sys.stderr.write(f"  … {msg}\n")
        sys.stderr.flush()
        _last["t"] = time.monotonic()
    _last["waiting"] = waiting

