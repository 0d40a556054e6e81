"""Tune tests. ``SPECOPS_TEST_TINY_MODELS=DIR`` points ``tune_models`` at an already built copy
(target-v1, draft-v1) instead of the shared ``tiny_models`` fixture (tests/assets/tiny-models),
for local runs before the committed models exist."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def tune_models(request) -> dict[str, Path]:
    folder = os.environ.get("SPECOPS_TEST_TINY_MODELS")
    if folder:
        return {n: Path(folder) / n for n in ("target-v1", "draft-v1")}
    return request.getfixturevalue("tiny_models")
