"""The planner's disk cache, computed once per test session; a test's home gets it when it first uses it.

Every test gets a fresh SPECOPS_HOME (tests/conftest.py ``specops_home``), so the planner's disk cache
(specops/planner/diskcache.py: catalogs, priors, decision tree, capability table, GPU names and the
uncertainty calibration's cross-validated points, all computed from the shipped playbooks)
started cold in every test: the first `specops recommend` of each test paid 5-10 s of fitting that a user
pays once. Here they are computed once per session into a scratch home by what a user's first
`specops recommend` computes (the real library functions, SPECOPS_PLAYBOOKS unset). ``install`` wraps ``diskcache.cached`` for one test: at its first call
in a home that has no cache yet (no ``cache.key``, no ``cache/``), the session's signing key (mode 0600)
and signed files are copied in, then the real ``cached`` runs: the home a user has after a first run.

What a test sees is otherwise unchanged: a command that never reaches the planner leaves the home as empty
as before (the "writes nothing" tests); one that does finds the files a fresh home would have written
(those of a first recommend); planted, corrupt or deleted files stay the test's own; another playbooks
folder is another input key, so other file names, computed by the real code; a process the test starts
(a CLI subprocess) is not wrapped and computes in the home as it finds it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import sys
import tempfile
from pathlib import Path

_STORE: list[Path] = []  # the session's filled home, built on first use
_BUILDING: list[bool] = []


def _clear_specops_lru_caches() -> None:
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "specops" or name.startswith("specops.")):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, functools._lru_cache_wrapper) and getattr(value, "__module__", "") == name:
                value.cache_clear()


def _build() -> Path:
    """Compute every shipped kind into a scratch home (in-memory caches cleared before and after, so the
    results are really computed there, and nothing computed under that home stays in memory)."""
    home = Path(tempfile.mkdtemp(prefix="specops-planner-cache-"))
    saved = {k: os.environ.get(k) for k in ("SPECOPS_HOME", "SPECOPS_PLAYBOOKS")}
    os.environ["SPECOPS_HOME"] = str(home)
    os.environ.pop("SPECOPS_PLAYBOOKS", None)
    _BUILDING.append(True)
    try:
        _clear_specops_lru_caches()
        from specops.planner import RecommendRequest, recommend
        from specops.planner.names import _shipped_index
        from specops.playbooks import playbook_path

        _shipped_index(str(playbook_path("catalogs", "gpus.yaml")))
        recommend(RecommendRequest(model="llama-3.1-8b-instruct", gpu="H100"))
    except Exception:  # noqa: BLE001 - a broken planner fails its own tests; here it only costs the speed-up
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir()
    finally:
        _BUILDING.clear()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _clear_specops_lru_caches()
    import atexit

    atexit.register(shutil.rmtree, home, True)
    return home


def _seed(home: Path) -> None:
    from specops.planner.diskcache import KEY_FILE

    if not _STORE:
        _STORE.append(_build())
    store = _STORE[0]
    if not (store / KEY_FILE).is_file() or (home / KEY_FILE).exists() or (home / "cache").exists():
        return
    with contextlib.suppress(OSError):  # a home the test made unwritable: the real code meets it as it is
        home.mkdir(parents=True, exist_ok=True)
        shutil.copy2(store / KEY_FILE, home / KEY_FILE)
        (home / "cache").mkdir()
        for f in (store / "cache").glob("*.cache"):
            shutil.copy2(f, home / "cache" / f.name)


def install(monkeypatch) -> None:
    """For this test: the first ``diskcache.cached`` call in a home without a cache seeds it (module docstring)."""
    from specops.planner import diskcache
    from specops.settings import specops_home

    real = diskcache.cached
    seeded: list[str] = []

    def cached(kind, compute):
        home = specops_home()
        if not _BUILDING and str(home) not in seeded:
            seeded.append(str(home))
            _seed(home)
        return real(kind, compute)

    monkeypatch.setattr(diskcache, "cached", cached)
