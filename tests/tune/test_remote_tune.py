"""`specops tune` against engines someone else runs: one real vLLM CPU engine per configuration, both the
session pool's (tests/engines/pool.py, read only): none (the baseline engine) and draft_model γ=3 (the
speculative one; it used to be an n-gram γ=2 engine started here, one engine start), given as endpoints.
Nothing is deployed or stopped by tune; both configurations are measured from their own counter deltas
(other tests' traffic on the pool engines is outside tune's windows) and a calibration is fitted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from specops.registry import open_registry

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.engine


def test_tune_measures_remote_engines_without_redeploying_them(tiny_models, tune_models, engine_pool, engine_lock,
                                                              specops_home):
    base, spec = engine_pool.base, engine_pool.spec  # float32, served "tiny": the pool's, never stopped
    assert tune_models["target-v1"] == tiny_models["target-v1"], "the pool serves the committed tiny models"
    res = subprocess.run(
        [sys.executable, "-m", "specops", "tune", "--endpoint-for", f"none={base.url}",
         "--endpoint-for", f"draft_model-g3={spec.url}", "--methods", "draft_model", "--gammas", "3",
         "--draft", str(tiny_models["draft-v1"]),
         "--concurrency", "1,2", "--passes", "1", "--max-passes", "1", "--requests", "4", "--max-tokens", "24",
         "--name", "remote", "-o", "json"],
        cwd=str(REPO), capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    # both engines still serve: tune stopped nothing it did not start
    assert httpx.get(base.url + "/health", timeout=5).status_code == 200
    assert httpx.get(spec.url + "/health", timeout=5).status_code == 200
    doc = json.loads(res.stdout)
    rows = {(r["config"]["method"], r["concurrency"]): r for r in doc["report"]["rows"]}
    assert set(rows) == {("none", 1), ("none", 2), ("draft_model", 1), ("draft_model", 2)}
    assert all(r["status"] == "ok" for r in rows.values())
    assert rows[("none", 1)]["acceptance_rate"] is None and rows[("draft_model", 1)]["acceptance_rate"] is not None
    assert doc["calibration"] == "remote@1" and doc["recommend_picks"] == []
    assert any("remote engines" in n for n in doc["report"]["notes"])
    assert open_registry().list_deployments() == []  # nothing was deployed
