"""The benchmark tests read from the session's engine pool (tests/engines/pool.py): ``spec_engine`` runs
draft_model speculation (target-v1 + draft-v1, γ=3, per-request spec metrics), ``base_engine`` the same
target without speculation (no spec counters: the missing-metrics case). Each test holds the engine lock
while it sends traffic."""

from __future__ import annotations

import pytest

from tests.engines.pool import K

__all__ = ["K"]


@pytest.fixture
def models(tiny_models):
    return tiny_models


@pytest.fixture
def spec_engine(engine_pool, engine_lock):
    return engine_pool.spec


@pytest.fixture
def base_engine(engine_pool, engine_lock):
    return engine_pool.base
