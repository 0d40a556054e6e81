"""Shared fixtures: every test gets its own SPECOPS_HOME (a real folder; the registry is a real
SQLite file inside it). Nothing touches the user's home."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parents[1]


# no per-example deadline anywhere: timing on a shared CPU box says nothing about a property
settings.register_profile("specops", deadline=None)
settings.load_profile("specops")


# --- random test order (opt in): every test must pass in any order -----------------------------

def pytest_addoption(parser):
    parser.addoption("--shuffle", metavar="SEED", default=os.environ.get("SPECOPS_TEST_SHUFFLE"),
                     help="run the collected tests in a random order drawn from SEED (an integer; 'random' "
                          "picks one and prints it). Also: env SPECOPS_TEST_SHUFFLE=SEED.")


def _shuffle_seed(config) -> int | None:
    raw = config.getoption("--shuffle")
    if raw in (None, ""):
        return None
    if raw == "random":
        import random

        return random.SystemRandom().randrange(1, 10**6)
    try:
        return int(raw)
    except ValueError:
        raise pytest.UsageError(f"--shuffle={raw!r} is not an integer seed. To fix: pass --shuffle=1234 "
                                "(or --shuffle=random)") from None


def pytest_configure(config):
    from tests.helpers import tiers  # the `costly` marker that `make test-fast` leaves out, and its guard

    config.pluginmanager.register(tiers, "specops-tiers")
    worker = getattr(config, "workerinput", None)  # a pytest-xdist worker: the controller's seed, not its own
    if worker is not None and "specops_shuffle_seed" in worker:
        config._specops_shuffle_seed = worker["specops_shuffle_seed"]
    else:
        config._specops_shuffle_seed = _shuffle_seed(config)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """pytest-xdist (`-n 2`): every worker shuffles with the controller's seed, so all collect the same order
    (xdist refuses workers whose collections differ) and `random` is drawn once and printed once."""
    node.workerinput["specops_shuffle_seed"] = getattr(node.config, "_specops_shuffle_seed", None)


def pytest_report_header(config):
    seed = getattr(config, "_specops_shuffle_seed", None)
    return None if seed is None else f"specops: tests shuffled with --shuffle={seed} (rerun with the same seed)"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    seed = getattr(config, "_specops_shuffle_seed", None)
    if seed is not None:  # shown with -q too: a failure in a shuffled run is only useful with its seed
        terminalreporter.write_line(f"specops: this run was shuffled with --shuffle={seed}")


def pytest_collection_modifyitems(session, config, items):
    seed = getattr(config, "_specops_shuffle_seed", None)
    if seed is not None:
        import random

        random.Random(seed).shuffle(items)  # whole-suite order, across files and classes


@pytest.fixture(scope="session", autouse=True)
def _session_vllm_cache(tmp_path_factory):
    """One vLLM cache folder (VLLM_CACHE_ROOT) for the engines this pytest session starts itself
    (tests/metrics/engines.py; SPECOPS_TEST_VLLM_CACHE): vLLM caches there what it learns about a model
    class (``modelinfos/``: its registry otherwise inspects the class in a fresh interpreter, ≈ 15 s of
    CPU per engine start). A folder of this session only: nothing is reused from an earlier run."""
    os.environ.setdefault("SPECOPS_TEST_VLLM_CACHE", str(tmp_path_factory.getbasetemp() / "vllm-cache"))


# vLLM's worker inside its EngineCore process (VLLM_ENABLE_V1_MULTIPROCESSING=0: one interpreter importing
# vLLM and torch fewer per start) with one OpenMP thread (what vLLM's own worker process gets by default here:
# it binds one thread to one core): ≈ 10 s of CPU less per engine start, and idle engines poll less
# (docs/development.md, "Engine starts"). Users' launches do not get it; a test that proves the user's
# process tree as is clears it (tests/engines/test_engine_e2e.py's dies-while-loading test).
TEST_ENGINE_ENV = "VLLM_ENABLE_V1_MULTIPROCESSING=0 OMP_NUM_THREADS=1"


@pytest.fixture(scope="session", autouse=True)
def _test_engine_env():
    """SPECOPS_TEST_ENGINE_ENV for every engine the suite starts: `specops deploy`, tune, heal, bench's twin
    (specops.engines.local.engine_env_for_tests) and tests/metrics/engines.py. Set it empty to measure
    vLLM's default."""
    os.environ.setdefault("SPECOPS_TEST_ENGINE_ENV", TEST_ENGINE_ENV)


def _seed_vllm_cache(home: Path) -> None:
    """A `specops deploy` in an engine test gets the session's vLLM model-class cache in its own cache
    folder (SPECOPS_HOME/cache/vllm: what a user's second deploy finds there); the first start of the
    session fills it (the pool's, or the first deploy's own start)."""
    src = Path(os.environ.get("SPECOPS_TEST_VLLM_CACHE", "/nonexistent")) / "modelinfos"
    if src.is_dir():
        import shutil

        shutil.copytree(src, home / "cache" / "vllm" / "modelinfos", dirs_exist_ok=True)


@pytest.fixture(autouse=True)
def specops_home(tmp_path, monkeypatch, request):
    """Also puts the whole environment back after the test, so what one test sets never reaches the next
    (the library itself leaves the environment as it found it: tests/retrain/test_environment.py)."""
    before = dict(os.environ)
    home = tmp_path / "specops-home"
    home.mkdir()
    if request.node.get_closest_marker("engine"):
        _seed_vllm_cache(home)
    monkeypatch.setenv("SPECOPS_HOME", str(home))
    for var in ("SPECOPS_DB", "SPECOPS_PROMETHEUS_URL", "SPECOPS_DEBUG", "SPECOPS_PLAYBOOKS"):
        monkeypatch.delenv(var, raising=False)
    from tests.helpers.planner_cache import install  # the planner's disk cache, computed once per session

    install(monkeypatch)
    yield home
    for key in [k for k in os.environ if k not in before]:
        del os.environ[key]
    os.environ.update(before)


def run_cli(*args: str, env: dict | None = None, timeout: float = 120, input: str | None = None):
    """Run the real `specops` CLI entry point, cwd the repository root; a CompletedProcess. In this
    process (tests/cli/inproc.py: environment, streams, caches, logging, signals rebuilt per call and
    restored; ``timeout`` enforced) unless the call needs a fresh interpreter, which it then gets."""
    from tests.cli.inproc import run_cli as run

    return run(*args, env=env, timeout=timeout, input=input)


def run_cli_subprocess(*args: str, env: dict | None = None, timeout: float = 120, input: str | None = None):
    """The real `specops` CLI in a subprocess (`python -m specops`, argv list, no shell): for the tests
    where the process boundary is what is tested (entry point, exit status, start-up, signals)."""
    from tests.cli.inproc import run_subprocess

    return run_subprocess(*args, env=env, timeout=timeout, input=input)


@pytest.fixture
def cli(request):
    """``run_cli``; for `long` tests ``run_cli_subprocess`` (minutes of real engines and a handful of CLI
    calls each: not yet run with the in-process runner, and a subprocess costs them nothing that shows)."""
    return run_cli_subprocess if request.node.get_closest_marker("long") else run_cli


@pytest.fixture
def cli_subprocess():
    return run_cli_subprocess


# --- real engines -------------------------------------------------------------------------------

TINY_MODELS = REPO / "tests" / "assets" / "tiny-models"


@pytest.fixture(scope="session")
def tiny_models() -> dict[str, Path]:
    """The tiny real models built by scripts/build_tiny_models.py (committed; rebuilt when missing).

    Layout: tokenizer is saved inside each model folder; `target-v1`, `draft-v1` (distilled/trained
    against target-v1) and `target-v2` (target-v1 fine-tuned on prose: the stale-draft case).
    """
    names = ("target-v1", "draft-v1", "target-v2")
    if not all((TINY_MODELS / n / "config.json").is_file() for n in names):
        subprocess.run([sys.executable, str(REPO / "scripts" / "build_tiny_models.py"), "--out",
                        str(TINY_MODELS)], check=True)
    return {n: TINY_MODELS / n for n in names}


@pytest.fixture
def engine_lock():
    """Serialise real vLLM engines across concurrently running test processes: two CPU engines at
    once on 2 cores would starve each other (and measure each other). tests/engines/pool.py."""
    from tests.engines.pool import engine_lock as lock

    with lock():
        yield


@pytest.fixture
def skip_vllm_check(monkeypatch):
    """SPECOPS_TEST_SKIP_VLLM_CHECK=1 for this test and its subprocesses: `specops deploy` (and tune's deploys)
    skip vLLM's pre-launch check (10-25 s each) in tests whose subject it is not. The check itself is
    tests/engines/test_vllm_check.py's (the launch it accepts, those it rejects)."""
    monkeypatch.setenv("SPECOPS_TEST_SKIP_VLLM_CHECK", "1")


@pytest.fixture(scope="session")
def engine_pool(tiny_models, tmp_path_factory):
    """The session's shared real engines (tests/engines/pool.py: read-only use, its rules)."""
    from tests.engines.pool import start_pool

    pool = start_pool(tmp_path_factory.mktemp("engine-pool"), tiny_models)
    print(f"\nengine pool: spec + base started in {pool.started_in_s:.0f} s "
          f"({'parallel' if pool.parallel else 'serial'})")
    yield pool
    pool.stop()


@pytest.fixture
def peer():
    """make(routes, **kw) -> a misbehaving HTTP peer (tests/metrics/hostile.py), closed after the test."""
    from tests.metrics.hostile import HostileServer

    servers = []

    def make(routes, **kw):
        s = HostileServer(routes, **kw)
        servers.append(s)
        return s
    yield make
    for s in servers:
        s.close()
