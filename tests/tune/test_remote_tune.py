"""`specops tune` against engines someone else runs: one real vLLM CPU engine per configuration
(none: the session pool's baseline engine, tests/engines/pool.py, read only; and ngram γ=2, started
here), given as endpoints. Nothing is deployed or stopped by tune; both configurations are measured
from their own counters and a calibration is fitted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from specops.registry import open_registry
from tests.metrics.engines import start_engine

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.engine


def test_tune_measures_remote_engines_without_redeploying_them(tiny_models, tune_models, engine_pool, engine_lock,
                                                              specops_home, tmp_path):
    base = engine_pool.base  # target-v1 without speculation (float32, served "tiny"): the pool's, never stopped
    assert tune_models["target-v1"] == tiny_models["target-v1"], "the pool serves the committed tiny models"
    spec = start_engine(tmp_path / "ngram", tune_models["target-v1"], served_name="tiny", method="ngram", k=2,
                        dtype="float32")
    try:
        res = subprocess.run(
            [sys.executable, "-m", "specops", "tune", "--endpoint-for", f"none={base.url}",
             "--endpoint-for", f"ngram-g2={spec.url}", "--methods", "ngram", "--gammas", "2",
             "--concurrency", "1,2", "--passes", "1", "--max-passes", "1", "--requests", "4", "--max-tokens", "24",
             "--name", "remote", "-o", "json"],
            cwd=str(REPO), capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stderr
        # both engines still serve: tune stopped nothing it did not start
        assert httpx.get(base.url + "/health", timeout=5).status_code == 200
        assert httpx.get(spec.url + "/health", timeout=5).status_code == 200
    finally:
        spec.stop()
    doc = json.loads(res.stdout)
    rows = {(r["config"]["method"], r["concurrency"]): r for r in doc["report"]["rows"]}
    assert set(rows) == {("none", 1), ("none", 2), ("ngram", 1), ("ngram", 2)}
    assert all(r["status"] == "ok" for r in rows.values())
    assert rows[("none", 1)]["acceptance_rate"] is None and rows[("ngram", 1)]["acceptance_rate"] is not None
    assert doc["calibration"] == "remote@1" and doc["recommend_picks"] == []
    assert any("remote engines" in n for n in doc["report"]["notes"])
    assert open_registry().list_deployments() == []  # nothing was deployed
