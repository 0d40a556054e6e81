"""The engine pool: two real vLLM CPU engines started once per pytest session and shared by every
test that only reads from them (sends completions, scrapes /metrics, benches, validates), instead of
each file starting its own pair.

- ``pool_spec``: target-v1 + draft-v1, ``draft_model`` γ=3, float32, per-request spec-decode metrics;
- ``pool_base``: target-v1 without speculation, float32 (the baseline, and the missing-metrics case).

Both serve the name "tiny" with ``--enforce-eager`` and ``max_model_len`` 512 (tests/metrics/engines.py).
Float32 on both, so greedy outputs with and without speculation must be identical (bf16 batched
verification can flip an argmax). They are started in parallel (two threads, each a Popen and a
``/health`` poll): vLLM's start is mostly single-threaded Python imports and initialisation, so two
starts on 2 cores take about as long as one; ``SPECOPS_TEST_POOL_SERIAL=1`` starts them one after the
other (to measure the difference). The engine lock (tests/conftest.py) is held while they start; tests
that use them take ``engine_lock`` themselves while they send traffic.

Rules for a test that uses the pool: never stop, restart or reconfigure a pool engine; never assert on
absolute counter values (take deltas around your own traffic, or a Prometheus window of your own);
register the engines in your own registry (SPECOPS_HOME is per test) under your own deployment names.
A test that needs an engine it changes starts its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tests.metrics.engines import Engine, start_engine

K = 3
SERVED = "tiny"
SPEC_ARGS = ["--per-request-spec-decode-metrics", "summary"]
LOCK = Path("/tmp") / "specops-engine-tests.lock"
_held = 0


@contextlib.contextmanager
def engine_lock() -> Iterator[None]:
    """The lock that serialises real engines across concurrently running test processes (two CPU
    engines starting at once on 2 cores starve each other). Re-entrant within this process: a test
    holding it may start the pool (flock would otherwise block on its own lock from a second fd)."""
    global _held
    if _held:
        _held += 1
        try:
            yield
        finally:
            _held -= 1
        return
    with open(LOCK, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        _held = 1
        try:
            yield
        finally:
            _held = 0
            fcntl.flock(fh, fcntl.LOCK_UN)


@dataclass
class Pool:
    spec: Engine
    base: Engine
    started_in_s: float
    parallel: bool

    def stop(self) -> None:
        for e in (self.spec, self.base):
            e.stop()


def start_pool(folder: Path, models: dict[str, Path]) -> Pool:
    """Start both engines (in parallel unless SPECOPS_TEST_POOL_SERIAL=1) under the engine lock."""
    def spec() -> Engine:
        return start_engine(folder / "spec", models["target-v1"], served_name=SERVED, method="draft_model",
                            draft=models["draft-v1"], k=K, dtype="float32", extra_args=list(SPEC_ARGS))

    def base() -> Engine:
        return start_engine(folder / "base", models["target-v1"], served_name=SERVED, dtype="float32")

    parallel = os.environ.get("SPECOPS_TEST_POOL_SERIAL") != "1"
    with engine_lock():
        t0 = time.monotonic()
        if parallel:
            with ThreadPoolExecutor(2) as ex:
                fs, fb = ex.submit(spec), ex.submit(base)
                try:
                    s = fs.result()
                except BaseException:
                    _stop_quietly(fb)
                    raise
                try:
                    b = fb.result()
                except BaseException:
                    s.stop()
                    raise
        else:
            s = spec()
            try:
                b = base()
            except BaseException:
                s.stop()
                raise
        return Pool(s, b, time.monotonic() - t0, parallel)


def _stop_quietly(future) -> None:
    try:
        future.result().stop()
    except BaseException:  # noqa: BLE001 - it failed to start: nothing to stop
        pass
