"""Real vLLM CPU engines shared by the engine tests of one module (started once, under the engine lock):
``spec_engine`` runs draft_model speculation (target-v1 + draft-v1, γ=3, per-request spec metrics),
``base_engine`` the same target without speculation (no spec counters: the missing-metrics case)."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest

from tests.metrics.engines import start_engine

K = 3


@pytest.fixture(scope="module")
def module_engine_lock():
    """Same lock file as tests/conftest.py's `engine_lock`, held for a whole module of engine tests."""
    with open(Path("/tmp") / "specops-engine-tests.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@pytest.fixture(scope="module")
def models(tiny_models):
    return tiny_models


@pytest.fixture(scope="module")
def spec_engine(module_engine_lock, models, tmp_path_factory):
    engine = start_engine(tmp_path_factory.mktemp("spec-engine"), models["target-v1"], method="draft_model",
                          draft=models["draft-v1"], k=K,
                          extra_args=["--per-request-spec-decode-metrics", "summary"])
    yield engine
    engine.stop()


@pytest.fixture(scope="module")
def base_engine(module_engine_lock, models, tmp_path_factory):
    engine = start_engine(tmp_path_factory.mktemp("base-engine"), models["target-v1"])
    yield engine
    engine.stop()
