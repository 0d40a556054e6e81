"""`make test-fast`, the inner loop: the fast selection minus the ``costly`` tests. `make test` runs them all.

A test is ``costly`` when it

- starts a process: a CLI subprocess (the ``cli_subprocess`` fixture), bash, a worker, a server, a wheel
  build (≈ 0.5-1 s of CPU each before the child does anything);
- loads or trains the small torch models (the ``mini_models`` and ``tiny_models`` fixtures);
- waits out a deadline of seconds by design (a peer that drips its answer, a lease that must expire).

Applied here, at collection: from the fixtures a test requests (``COSTLY_FIXTURES``) and from its own source
(``SPAWNS``: ``subprocess.``, ``sys.executable``, ``import torch``, ...); by ``@pytest.mark.costly`` on the test (or
``pytestmark`` in its module) where a helper starts the process or the test waits by design. What keeps the marks honest:
with ``SPECOPS_TEST_INNER_LOOP=1`` (`make test-fast` sets it) a test that starts a process without the
mark fails, naming the process and the fix, so the inner loop cannot grow process starts unnoticed.
Registered by tests/conftest.py's ``pytest_configure``.
"""

from __future__ import annotations

import inspect
import os
import re
import sys

import pytest

COSTLY_FIXTURES = frozenset({"cli_subprocess", "mini_models", "tiny_models", "engine_pool"})
"""Fixtures whose use makes a test costly (a process per call, or torch models loaded or trained)."""

SPAWNS = re.compile(r"\bsubprocess\.|\bsys\.executable\b|\bPopen\b|\bmultiprocessing\b|\bos\.fork\b"
                    r"|\brun_cli_subprocess\b|\bimport torch\b|\bfrom transformers import\b|\bload_causal_lm\(")
"""What in a test function's own source starts a process or loads torch/transformers (≈ 10 s the first time)."""

_SPAWN_EVENTS = ("subprocess.Popen", "os.posix_spawn", "os.fork", "os.forkpty", "os.system", "os.exec")
_state = {"guard": False, "spawned": []}


def pytest_configure(config):
    config.addinivalue_line("markers", "costly: starts a process, loads torch models or waits out a deadline: "
                                       "run by `make test`, left out of `make test-fast` (tests/helpers/tiers.py)")
    if os.environ.get("SPECOPS_TEST_INNER_LOOP") == "1" and not _state["guard"]:
        _state["guard"] = True
        sys.addaudithook(_audit)


TRIVIAL = frozenset({"uname"})
"""Processes that cost nothing worth a marker (the standard library's ``platform`` runs ``uname -p``)."""


def _audit(event, args):
    if _state["guard"] and event in _SPAWN_EVENTS:
        what = args[1] if event == "subprocess.Popen" and len(args) > 1 else args[0] if args else ""
        argv = what if isinstance(what, (list, tuple)) else [what]
        if argv and os.path.basename(str(argv[0])) in TRIVIAL:
            return
        _state["spawned"].append(f"{event} {what!r}"[:200])


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    """Before `-m` selects: the fixture rule adds the marker (tryfirst: the mark plugin deselects later)."""
    sources: dict = {}
    for item in items:
        if COSTLY_FIXTURES.intersection(getattr(item, "fixturenames", ())) or _spawns(getattr(item, "function", None),
                                                                                      sources):
            item.add_marker(pytest.mark.costly)


def _spawns(fn, sources: dict) -> bool:
    if fn not in sources:
        try:
            sources[fn] = bool(SPAWNS.search(inspect.getsource(fn)))
        except (TypeError, OSError):
            sources[fn] = False
    return sources[fn]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    _state["spawned"] = []  # fixtures' process starts count too
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    out = yield
    if _state["guard"] and _state["spawned"] and not item.get_closest_marker("costly"):
        first = _state["spawned"][0]
        pytest.fail(f"{item.nodeid} started {len(_state['spawned'])} process(es) ({first}) but is not marked costly. "
                    "To fix: run the CLI in process (the `cli` fixture) or mark the test @pytest.mark.costly "
                    "(tests/helpers/tiers.py)", pytrace=False)
    return out
