"""The closed loop on the real CPU engine (CI variant of scripts/closed_loop.py; no mocks). Three engine
starts: target-v1 + draft-v1 (baseline), target-v2 pushed into the served folder and restarted (the
stale-draft case of vllm#36223), and the canary with the distilled draft, which the promotion adopts.

The first two starts are also issue 9's done-when with real Prometheus (Debian's, scraping the
deployment): `specops monitor --once --prometheus-url` records the baseline, then flags CHANGED_MODEL and
the acceptance drop, and `specops runbook run acceptance-drop` names the changed target and the retrain
to run. That was tests/drift/test_engine_drift.py, two engine starts of `make test` for exactly these two
deploys (same spec, same prompts); it now rides on this test's own two.

The distillation is short (32 training prompts, 150 steps); the canary's sequential test (24 held-out
prompts, alpha 0.05, margin 0.05, heal's default) compares per-request acceptance on both engines and must
stop "better"; then the same test with the promoted engine as both arms (an A/A: the same draft against
itself) must not say "better". It also carries what tests/retrain/test_tiny_models.py proved with the same
distillation outside the loop (heal's retrain and train-validation steps run it; the lineage of the new and
the stale draft)."""

from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path

import httpx
import pytest

from specops.engines import local
from specops.engines.local import free_port
from specops.registry import open_registry
from specops.retrain.prompts import write_prompts
from tests.helpers.cli import CODE_PROMPTS, ok
from tests.prometheus import exporter_value, start_prometheus, wait_for_scrape, wait_until_caught_up
from tests.retrain.minimodels import prose_prompts

pytestmark = [pytest.mark.engine, pytest.mark.prometheus, pytest.mark.slow, pytest.mark.long]

PARAMS = {"steps": 150, "threads": 1, "max_new_tokens": 48, "batch_size": 16, "lr": 2e-3}
CODE = CODE_PROMPTS
# the monitor's windows (was tests/drift/test_engine_drift.py's traffic): greedy, fixed code prompts, so the drop
# after the swap is large and repeatable (two runs on 2026-12-01: per-token acceptance 0.539 -> 0.386 and
# 0.530 -> 0.367, CUSUM 12.0 >= 6.0 both times)
WINDOW = [
    "def fibonacci(n):\n    ",
    "import os\nimport sys\n\n\ndef main():\n",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n",
    "    for key, value in sorted(mapping.items()):\n        if key",
    "def read_config(path):\n    with open(path) as f:\n",
    "    except KeyError:\n        raise ValueError(",
]
DRAFTS = 'vllm:spec_decode_num_drafts_total{specops_deployment="loop"}'



def _traffic(endpoint: str, prompts: list[str]) -> None:
    for p in prompts:
        r = httpx.post(endpoint + "/v1/completions", timeout=300,
                       json={"model": "tiny", "prompt": p, "max_tokens": 48, "temperature": 0, "ignore_eos": True})
        assert r.status_code == 200, r.text


def _swap(src: Path, dst: Path) -> None:
    for p in dst.iterdir():
        p.unlink() if p.is_file() else shutil.rmtree(p)
    for p in src.iterdir():
        if p.is_file():
            shutil.copy2(p, dst / p.name)


def _scraped_from_now(prom: str, endpoint: str) -> None:
    """Until Prometheus stores a scrape, taken from now on, of what the engine exports now (its zero counters,
    right after a deploy; an earlier engine's zeros on the same port do not count)."""
    wait_for_scrape(prom, DRAFTS, time.time(), exporter_value(endpoint, DRAFTS.split("{")[0]))


def _monitor(cli, t0: float, prom: str, endpoint: str, *extra: str):
    """One `specops monitor --once` over Prometheus' window since ``t0``, once Prometheus holds the traffic."""
    wait_until_caught_up(prom, endpoint, DRAFTS)
    window = str(math.ceil(time.time() - t0 + 2))
    return ok(cli("monitor", "--once", "--prometheus-url", prom, "--interval", window, "--dry-run", "--deployment",
                  "loop", *extra, timeout=300))


def test_a_stale_draft_is_retrained_canaried_and_promoted_and_acceptance_recovers(cli, tmp_path, tiny_models,
                                                                                   engine_lock):
    t_begin = time.monotonic()
    models = tmp_path / "models"
    for n in ("target-v1", "draft-v1", "target-v2"):
        shutil.copytree(tiny_models[n], models / n)
    served = tmp_path / "serve" / "target"
    shutil.copytree(models / "target-v1", served)
    with open_registry() as reg:
        reg.register_target(str(served), name="tiny", version="1")
        reg.register_target(str(models / "target-v2"), name="tiny", version="2")
        reg.register_draft(str(models / "draft-v1"), target="tiny@1", name="tiny-draft", version="1",
                           method="draft_model")
    port = free_port()
    spec = tmp_path / "loop.yaml"
    spec.write_text(f"name: loop\ntarget: {{model: {served}, ref: tiny@1}}\n"
                    f"draft: {{model: {models / 'draft-v1'}, ref: tiny-draft@1}}\n"
                    "speculative: {method: draft_model, num_speculative_tokens: 3}\n"
                    "engine: {max_model_len: 512, dtype: bfloat16, max_num_seqs: 4}\n"
                    f"serve: {{port: {port}, served_model_name: tiny}}\nlocal: {{startup_timeout_s: 900}}\n")
    endpoint = f"http://127.0.0.1:{port}"
    traffic = prose_prompts(6, offset=3000, stride=700) + CODE
    data = write_prompts(prose_prompts(32, offset=1000, stride=600) + prose_prompts(24, offset=19800, stride=460),
                         tmp_path / "prompts.jsonl")
    timings = {}
    prom, stop_prom = start_prometheus([(f"127.0.0.1:{port}", {"specops_deployment": "loop"})], tmp_path)
    try:
        t = time.monotonic()
        ok(cli("deploy", str(spec), "--no-check", timeout=1200))  # engine start 1
        timings["deploy v1"] = time.monotonic() - t
        # Prometheus holds the new engine's zero counters before any traffic: a window's increase() starts from a
        # series' first sample, and six completions on the tiny engine can end before the first 1 s scrape
        _scraped_from_now(prom, endpoint)
        t0 = time.time()
        for i in range(2):  # two healthy windows, then the baseline from them
            _traffic(endpoint, WINDOW)
            r = _monitor(cli, t0, prom, endpoint, *(["--record-baseline"] if i else []))
            t0 = time.time()
        assert "loop: baseline recorded" in r.stdout, r.stdout
        assert "CHANGED_MODEL" not in r.stdout

        ok(cli("stop", "loop", timeout=300))
        _swap(models / "target-v2", served)  # the fine-tuned target pushed under the same path
        t = time.monotonic()
        ok(cli("deploy", str(spec), "--no-check", "--force", "--reason", "target pushed without its draft",
                timeout=1200))  # engine start 2
        timings["restart with v2"] = time.monotonic() - t
        _scraped_from_now(prom, endpoint)  # the restarted engine's zero counters, as above
        t0 = time.time()
        _traffic(endpoint, WINDOW)
        r = _monitor(cli, t0, prom, endpoint)
        print(r.stdout)
        assert "[error] CHANGED_MODEL: loop: the live target" in r.stdout, r.stdout
        # the drop is one code: BELOW_FLOOR would be a different finding
        assert "[warning] ACCEPTANCE_DROP: loop: per-token acceptance fell from its baseline" in r.stdout, r.stdout
        assert "ACCEPTANCE_BELOW_FLOOR" not in r.stdout
        r = ok(cli("runbook", "run", "acceptance-drop", "--deployment", "loop", "--prometheus-url", prom,
                   timeout=300))
        print(r.stdout)
        assert "FINGERPRINT_MISMATCH: loop: the target changed under the draft" in r.stdout, r.stdout
        assert "now holds tiny@2" in r.stdout and "tiny-draft@1 was trained against tiny@1" in r.stdout, r.stdout
        assert "run: specops retrain --deployment loop" in r.stdout, r.stdout

        t = time.monotonic()
        r = ok(cli("heal", "--deployment", "loop", "--data", str(data), "--params", json.dumps(PARAMS),
                    "--min-gain", "0.05", "--handover", "adopt", "--output", "json", timeout=1800))  # start 3
        timings["heal"] = time.monotonic() - t
        out = json.loads(r.stdout)
        print(json.dumps({k: round(v, 1) for k, v in timings.items()}),
              [(s["step"], s["seconds"]) for s in out["steps"]])
        assert out["status"] == "promoted", out["reason"]
        assert [s["step"] for s in out["steps"]] == ["resolve-target", "retrain", "train-validation", "canary",
                                                      "promote"]
        c = out["canary"]
        stale = c["incumbent"]["acceptance"]["acceptance_rate"]
        fresh = c["candidate_run"]["acceptance"]["acceptance_rate"]
        print(f"engine counters, {c['candidate_run']['acceptance']['num_prompts']} held-out prompts: "
              f"stale draft {stale:.3f} -> distilled {fresh:.3f}")
        assert c["incumbent"]["acceptance"]["num_draft_tokens"] > 100
        assert fresh >= stale + 0.15
        v = c["verdict"]  # the sequential test stopped "better" within its budget of 24 held-out prompts
        print(f"canary test {c['canary_test_id']}: {v['decision']} after {v['samples']}/{v['budget']} prompt pairs, "
              f"mean gain {v['mean_gain']:+.3f}, wealth {v['wealth_better']:.1f} (threshold {1 / v['alpha']:g})")
        assert v["decision"] == "better" and v["stopped"] and 2 <= v["samples"] <= v["budget"] == 24
        assert v["alpha"] == 0.05 and v["min_gain"] == 0.05 and v["wealth_better"] >= 1 / v["alpha"]
        assert c["traffic"].startswith("replayed-prompts")
        new = out["candidate_draft"]
        assert out["serving_draft"] == new and out["live_target"] == "tiny@2"

        with open_registry() as reg:
            row = reg.get_deployment("loop")
            assert row.status == "running" and local.alive(row.pid, row.pid_start_time)
            assert row.draft_ref == new and row.target_ref == "tiny@2" and row.endpoint == c["canary_endpoint"]
            assert reg.get_deployment("loop-canary").status == "stopped"
            assert reg.check_lineage("tiny@2", new).ok
            # was tests/retrain/test_tiny_models.py (the same distillation, PARAMS and prompts, run alone):
            # the distilled draft is recorded against the new target, and the stale one is not compatible
            assert reg.get_draft(new).target == "tiny@2" and not reg.check_lineage("tiny@2", "tiny-draft@1").ok
            test = reg.get_canary_test(c["canary_test_id"])  # the verdict as evidence, linked from the promotion
            assert (test.decision, test.samples, test.candidate, test.incumbent) == ("better", v["samples"], new,
                                                                                   "tiny-draft@1")
            assert len([x for x in test.data if x["d"] is not None]) == test.samples
            promoted = next(e for e in reg.events(subject="loop", kind="heal.promoted", limit=5))
            assert promoted.data["canary_test"] == test.id
            kinds = {e.kind for e in reg.events(subject="loop", limit=200)}
            assert {"heal.started", "heal.target", "heal.step", "heal.promoted", "heal.finished",
                    "retrain.decision"} <= kinds
            assert [j.status for j in reg.retrain_jobs(limit=10) if j.status == "running"] == []
        # A/A: the same test with the promoted engine as both arms (the same draft against itself, on the
        # same held-out prompts) must not promote
        from specops.heal.canarytest import EngineArm, paired_test
        from specops.heal.run import heal_prompts
        from specops.heal.sequential import SequentialTest

        held = heal_prompts("loop", data, False, 24, 0)
        arm = EngineArm("loop", row.endpoint, "tiny", {})
        seq, samples = paired_test(arm, arm, held, SequentialTest(alpha=0.05, min_gain=0.05, budget=24), max_tokens=48)
        aa = seq.verdict(with_power=False)
        print(f"A/A on the promoted engine: {aa.line()}; per-prompt differences "
              f"{sorted({s['d'] for s in samples})}")
        assert aa.decision == "worse" or (aa.decision == "no-decision" and aa.samples == 24)
        assert all(s["incumbent"][1] > 0 for s in samples)
        tree_show = ok(cli("lineage", "show", new, "--output", "json")).stdout
        assert json.loads(tree_show)[0]["canary_tests"][0]["decision"] == "better"
        # the promoted engine serves the new draft, and its own counters show the recovery
        _traffic(row.endpoint, traffic[:3])
        tree = json.loads(ok(cli("lineage", "tree", "--output", "json")).stdout)
        by_ref = {t["ref"]: t for t in tree}
        assert [d["ref"] for d in by_ref["tiny@1"]["drafts"]] == ["tiny-draft@1"]
        v2 = {d["ref"]: d for d in by_ref["tiny@2"]["drafts"]}
        assert {"name": "loop", "status": "running"} in v2[new]["deployments"]
        print(ok(cli("lineage", "tree")).stdout)
        print(f"CI closed loop: {time.monotonic() - t_begin:.0f}s in all")
    finally:
        cli("stop", "loop", timeout=300)
        cli("stop", "loop-canary", timeout=300)
        stop_prom()
