"""The in-process CLI runner (tests/cli/inproc.py) resets the module-level state a call can change; this
reads specops' source (ast) for module-level private mutable state and fails on any the runner does
not know, so that a new cache or counter is not silently shared between in-process calls."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.cli.inproc import CLEARED_STATE, FRESH_STATE, HARMLESS_STATE
from tests.helpers.source import parsed

PKG = Path(__file__).resolve().parents[2] / "specops"
MUTATORS = {"append", "add", "update", "setdefault", "clear", "pop", "popitem", "extend", "insert", "discard",
            "remove", "appendleft"}


def _mutated(tree: ast.Module) -> set[str]:
    """Names rebound through ``global``, assigned into (``X[k] = v``) or changed by a mutating method."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            out.update(node.names)
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                    out.add(t.value.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS \
                and isinstance(node.func.value, ast.Name):
            out.add(node.func.value.id)
    return out


def _module_state() -> set[tuple[str, str]]:
    """Private module-level names that code in the same module changes after import."""
    found = set()
    for path in PKG.rglob("*.py"):
        module = ".".join(path.relative_to(PKG.parent).with_suffix("").parts).removesuffix(".__init__")
        tree = parsed(path)
        changed = _mutated(tree)
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, ast.AnnAssign) else []
            for t in targets:
                if isinstance(t, ast.Name) and t.id.startswith("_") and not t.id.startswith("__") and t.id in changed:
                    found.add((module, t.id))
    return found


def test_every_module_level_mutable_state_is_reset_or_known_harmless():
    known = {(m, a) for m, attrs in FRESH_STATE.items() for a in attrs} | CLEARED_STATE | HARMLESS_STATE
    found = _module_state()
    assert found - known == set(), "add each to FRESH_STATE / CLEARED_STATE (or HARMLESS_STATE) in tests/cli/inproc.py"
    assert known - found == set(), "no longer in specops: remove from tests/cli/inproc.py"
