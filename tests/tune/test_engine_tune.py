"""A real, short tune run on the tiny models with the vLLM CPU engine (3 engine starts; vLLM's pre-launch
check skipped by the skip_vllm_check fixture, tests/engines/test_vllm_check.py is where it is tested):

1. `specops tune` runs in a subprocess over none, ngram γ=2 and draft_model γ=2 with a draft folder
   that does not exist; it is interrupted (SIGINT, as Ctrl-C) right after its first point is stored;
2. the run is resumed from the registry: the stored point is not measured again, the remaining points are, the
   draft_model configuration is recorded as failed and the grid goes on;
3. the fitted per-position acceptance equals the engine counters' ratios.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specops.api.tune import deployment_name
from specops.registry import open_registry
from specops.settings import deployment_dir
from specops.tune.calibration import load_calibration
from specops.tune.fit import fit_acceptance
from specops.tune.store import PointStore, list_runs

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.engine


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_short_real_tune_fails_one_config_resumes_and_fits_the_counters(tune_models, engine_lock, specops_home,
                                                                          skip_vllm_check):
    args = ["tune", "--model", str(tune_models["target-v1"]), "--draft", "/nonexistent/draft",
            "--methods", "ngram,draft_model", "--gammas", "2", "--concurrency", "1,4", "--passes", "1", "--max-passes", "1",
            "--requests", "4", "--max-tokens", "24", "--enforce-eager", "--name", "ci-tiny", "--output", "json"]
    # Ctrl-C as a terminal sends it: SIGINT with its default disposition in the child, even when this test
    # runs as a background job (which inherits SIGINT ignored, and so would `specops tune`)
    proc = subprocess.Popen([sys.executable, "-m", "specops", *args], cwd=str(REPO), env=dict(os.environ),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 600
    run_id = None
    while time.time() < deadline and proc.poll() is None:
        runs = list_runs() if (specops_home / "specops.db").exists() else []
        if runs and runs[0].points > 0:
            run_id = runs[0].run_id
            break
        time.sleep(0.5)
    assert run_id is not None, proc.stderr.read() if proc.poll() is not None else "no point within 600 s"
    engine_file = deployment_dir(deployment_name(run_id)) / "engine.json"  # written by `specops deploy`
    engine_pid = json.loads(engine_file.read_text())["pid"] if engine_file.exists() else None
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=120)
    assert proc.returncode == 130
    if engine_pid:
        for _ in range(60):
            if not _alive(engine_pid):
                break
            time.sleep(1)
        assert not _alive(engine_pid), "the interrupted run left its engine running"
    first = PointStore(run_id).load()  # the point in flight may have finished during the interrupt
    assert first[0].point.key == "none@c1#r0" and len(first) < 6

    resumed = subprocess.run([sys.executable, "-m", "specops", "tune", "--resume", run_id, "--output", "json"],
                             cwd=str(REPO), capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0, resumed.stderr
    doc = json.loads(resumed.stdout)
    points = PointStore(run_id).load()
    keys = [r.point.key for r in points]
    assert points[:len(first)] == first and all(keys.count(r.point.key) == 1 for r in first)  # not re-measured
    assert set(keys) == {"none@c1#r0", "none@c4#r0", "ngram-g2@c1#r0", "ngram-g2@c4#r0",
                         "draft_model-g2@c1#r0", "draft_model-g2@c4#r0"}
    failed = [r for r in points if r.status == "failed"]
    assert {r.point.config.method for r in failed} == {"draft_model"}
    assert all("engine failed to start" in r.error for r in failed)
    assert all(r.status == "ok" for r in points if r.point.config.method != "draft_model")

    # the fit's acceptance is exactly the engine counters' ratios, pooled over the ngram runs
    ngram = [r.sample for r in points if r.point.config.method == "ngram"]
    assert all(s.num_drafts > 0 for s in ngram)
    drafts = sum(s.num_drafts for s in ngram)
    expected = [sum(s.accepted_per_position[i] for s in ngram) / drafts for i in range(2)]
    fitted = next(a for a in doc["acceptance"] if a["method"] == "ngram")
    assert fitted["per_position"] == pytest.approx(expected, rel=1e-12)
    assert fit_acceptance(points)[0].per_position == pytest.approx(expected, rel=1e-12)
    assert doc["calibration"] == "ci-tiny@1" and load_calibration("ci-tiny").run_id == run_id
    rows = {(r["config"]["method"], r["concurrency"]): r for r in doc["report"]["rows"]}
    # every configuration was a redeploy of one registered deployment, stopped at the end
    dep = open_registry().get_deployment(deployment_name(run_id))
    assert dep.platform == "local" and dep.status == "stopped" and dep.target_ref
    statuses = [e.message for e in open_registry().events(subject=dep.name, limit=200)]
    assert sum(m.endswith("-> running") for m in statuses) >= 3  # none (twice: interrupted, resumed), ngram-g2
    assert rows[("draft_model", 1)]["status"] == "failed" and rows[("ngram", 4)]["predicted_tokens_per_s"] > 0
