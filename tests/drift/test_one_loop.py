"""Issue 15, "one monitor loop": specops/drift holds exactly one loop that runs monitor cycles
(``monitor.run_loop``); ``Monitor.run`` and ``Watcher.run`` delegate to it. Checked on the source."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import specops.drift
from tests.helpers.source import parsed

DRIFT = Path(specops.drift.__file__).parent


def _name(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _cycle_loops() -> list[str]:
    """Every ``while`` loop in specops/drift that calls a cycle (``run_cycle``, ``cycle``, ...): the
    shape both loops had before the merge (``Monitor.run`` and ``Watcher.run``)."""
    found = []
    for path in sorted(DRIFT.glob("*.py")):
        tree = parsed(path)
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.While) and any(
                        isinstance(c, ast.Call) and _name(c).endswith("cycle")
                        for c in ast.walk(node)):
                    found.append(f"{path.name}:{fn.name}")
    return found


def test_specops_drift_has_exactly_one_monitor_loop():
    assert _cycle_loops() == ["monitor.py:run_loop"]


def test_both_entry_points_delegate_to_it():
    from specops.drift.monitor import Monitor
    from specops.drift.service import Watcher

    assert "run_loop(" in inspect.getsource(Monitor.run)
    assert "run_loop(" in inspect.getsource(Watcher.run)
