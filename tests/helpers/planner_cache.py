"""The planner's disk cache, computed once per test session and copied into each test's SPECOPS_HOME.

Every test gets a fresh SPECOPS_HOME (tests/conftest.py ``specops_home``), so the planner's disk cache
(specops/planner/diskcache.py: catalogs, priors, decision tree, capability table, GPU names and the
uncertainty calibration's cross-validated points, all computed from the shipped playbooks) started cold
in every test: the first `specops recommend` of each test paid 5-10 s of fitting that a user pays once.
Here one `specops recommend` (in process) fills a scratch home once per session; each test's home then
gets a copy of its signing key (``cache.key``, mode 0600) and signed files: the home a user has after a
first run. Nothing else changes: a test that plants, corrupts or deletes cache files does so in its own
copies; another playbooks folder (SPECOPS_PLAYBOOKS) is another input key, so other file names, computed
afresh; a test that needs a cold cache removes ``home / "cache"`` (tests/planner/test_diskcache_signed.py
plants and checks its files over the seeded ones; that the cache is computed and written on a miss is
also what the warm-up itself does).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

_STORE: list[Path] = []  # the session's filled home (built on first use)

WARM_UP = ("recommend", "--model", "llama-3.1-8b-instruct", "--gpu", "H100", "-o", "json")


def _store() -> Path:
    if not _STORE:
        from specops.planner.diskcache import KEY_FILE
        from tests.cli.inproc import run_inprocess

        home = Path(tempfile.mkdtemp(prefix="specops-planner-cache-"))
        r = run_inprocess(*WARM_UP, env={"SPECOPS_HOME": str(home)}, cwd=None)
        if r.returncode != 0 or not (home / KEY_FILE).is_file():  # a broken planner fails its own tests
            shutil.rmtree(home, ignore_errors=True)
            home = Path(tempfile.mkdtemp(prefix="specops-planner-cache-empty-"))
        _STORE.append(home)
        import atexit

        atexit.register(shutil.rmtree, home, True)
    return _STORE[0]


def seed(home: Path) -> None:
    """Copy the session's planner cache (key and signed files) into ``home`` (a fresh SPECOPS_HOME)."""
    from specops.planner.diskcache import KEY_FILE

    store = _store()
    if not (store / KEY_FILE).is_file():
        return
    shutil.copy2(store / KEY_FILE, home / KEY_FILE)
    (home / "cache").mkdir(exist_ok=True)
    for f in (store / "cache").glob("*.cache"):
        shutil.copy2(f, home / "cache" / f.name)
