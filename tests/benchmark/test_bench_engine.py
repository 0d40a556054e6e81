"""`specops bench`, `specops metrics` and adoption on real vLLM CPU engines (tiny models), plus the
PromQL path against a real Prometheus scraping the engine. The engines are the session's pool
(tests/engines/pool.py); only the redeploy test starts one of its own (the baseline twin)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import httpx
import pytest

from specops.metrics import delta, scrape
from specops.metrics.prometheus import PrometheusReader
from tests.benchmark.conftest import K
from tests.prometheus import (
    exporter_value,
    start_prometheus,
    wait_for_samples,
    wait_for_scrape,
    wait_until_caught_up,
)

pytestmark = [pytest.mark.engine, pytest.mark.slow]


def _traffic(url: str, n: int) -> None:
    """``n`` greedy completions, so a test does not depend on what earlier tests sent to the shared engine."""
    for i in range(n):
        r = httpx.post(url + "/v1/completions", timeout=120,
                       json={"model": "tiny", "prompt": f"def f{i}(x):\n    ", "max_tokens": 40,
                             "temperature": 0, "ignore_eos": True})
        assert r.status_code == 200, r.text


def _bench(cli, *args):
    r = cli("bench", "--concurrency", "1,4", "--requests", "8", "--max-tokens", "48", "--output", "json", *args,
            timeout=900)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_bench_reports_acceptance_speedup_and_tokens_per_s_at_two_concurrency_levels(spec_engine, base_engine,
                                                                                      cli, tmp_path):
    saved = tmp_path / "bench.json"
    data = _bench(cli, "--endpoint", spec_engine.url, "--baseline-endpoint", base_engine.url,
                  "--engine-pid", str(spec_engine.pid), "--baseline-pid", str(base_engine.pid), "--save", str(saved))
    assert json.loads(saved.read_text()) == data
    spec_runs = [r for r in data["runs"] if r["role"] == "spec"]
    base_runs = [r for r in data["runs"] if r["role"] == "baseline"]
    assert [r["concurrency"] for r in spec_runs] == [1, 4] == [r["concurrency"] for r in base_runs]
    for r in spec_runs:
        assert r["ok"] == 8 and r["acceptance_source"] == "requests" and r["acceptance_samples"] == 8
        assert 0 <= r["acceptance_p5"] <= r["acceptance_p50"] <= 1
        m = r["measurement"]
        assert m["num_speculative_tokens"] == K and m["num_drafts"] > 0
        assert m["acceptance_rate"] == pytest.approx(m["num_accepted_tokens"] / m["num_draft_tokens"])
        assert 1 <= m["mean_acceptance_length"] <= K + 1
        assert r["memory"]["rss_mib"] > 100 and r["memory"]["processes"] >= 2
    for r in data["runs"]:  # the engine's counters agree with what the client received, token for token
        cc = r["crosscheck"]
        assert cc["agree"], cc["problems"]
        assert cc["server_generation_tokens"] == cc["client_usage_tokens"] == cc["client_chunk_tokens"] == 8 * 48
        assert r["tokens_per_s"] > 0 and r["tpot_p50_s"] > 0
    assert {c["concurrency"] for c in data["comparisons"]} == {1, 4}
    for c in data["comparisons"]:
        assert c["tpot_speedup"] == pytest.approx(c["baseline_tpot_p50_s"] / c["spec_tpot_p50_s"])
    assert data["crosscheck_ok"] and not data["recorded"]
    print("\nmeasured:", json.dumps([{k: c[k] for k in ("concurrency", "tpot_speedup", "spec_tokens_per_s",
                                                          "baseline_tokens_per_s")} for c in data["comparisons"]]),
          json.dumps([{k: r[k] for k in ("concurrency", "acceptance_p50", "acceptance_p5", "acceptance_length_p50")}
                      for r in spec_runs]))


def test_bench_table_prints_acceptance_speedup_and_tokens_per_s(spec_engine, base_engine, cli):
    r = cli("bench", "--endpoint", spec_engine.url, "--baseline-endpoint", base_engine.url, "--concurrency", "1,2",
            "--requests", "4", "--max-tokens", "32", timeout=900, env={"COLUMNS": "160"})
    assert r.returncode == 0, r.stderr
    for text in ("accept P50", "accept P5", "TPOT speedup", "tokens/s", "agree"):
        assert text in r.stdout
    print("\n" + r.stdout)


def test_adopted_engine_is_benched_like_any_deployment_and_recorded(spec_engine, base_engine, cli):
    r = cli("deployment", "register", "adopted-tiny", "--endpoint", spec_engine.url + "/v1", "--target",
            "target-v1@1", "--draft", "draft-v1@1", "--method", "draft_model")
    assert r.returncode == 0, r.stderr
    assert "adopted adopted-tiny" in r.stdout and f"γ={K}" in r.stdout
    data = _bench(cli, "--deployment", "adopted-tiny", "--baseline-endpoint", base_engine.url, "--workload", "prose")
    assert data["recorded"] and data["crosscheck_ok"] and len(data["comparisons"]) == 2
    from specops.registry import open_registry

    reg = open_registry()
    ms = reg.measurements("adopted-tiny")
    assert len(ms) == 2 and {m.source for m in ms} == {"bench"} and {m.task for m in ms} == {"prose"}
    spec_runs = [r for r in data["runs"] if r["role"] == "spec"]
    assert sorted(m.acceptance_rate for m in ms) == pytest.approx(
        sorted(r["measurement"]["acceptance_rate"] for r in spec_runs))
    assert any(e.kind == "bench" for e in reg.events(subject="adopted-tiny"))
    shown = cli("deployment", "show", "adopted-tiny", "--output", "json")
    assert json.loads(shown.stdout)["status"] == "adopted"


def test_metrics_command_prints_acceptance_tau_alpha_positions_and_tpot(spec_engine, cli):
    _traffic(spec_engine.url, 2)  # counters and TPOT histograms of its own, whatever ran before
    r = cli("metrics", "--endpoint", spec_engine.url, "--output", "json")
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)
    assert m["source"] == "metrics" and m["num_speculative_tokens"] == K and len(m["per_position_rate"]) == K
    assert m["per_token_alpha"] is not None and m["tpot_p50"] is not None
    table = cli("metrics", "--endpoint", spec_engine.url, env={"COLUMNS": "120"})
    assert "mean acceptance length τ" in table.stdout and "per-token α" in table.stdout


def test_engine_without_speculation_is_refused_with_exit_2_never_a_number(base_engine, cli):
    r = cli("metrics", "--endpoint", base_engine.url)
    assert r.returncode == 2 and "no vllm:spec_decode_* counters" in r.stderr and "To fix:" in r.stderr
    assert r.stdout == ""
    b = cli("bench", "--endpoint", base_engine.url, "--concurrency", "1", "--requests", "2", "--max-tokens", "8")
    assert b.returncode == 2 and "no vllm:spec_decode_* counters" in b.stderr


@pytest.mark.prometheus
def test_promql_acceptance_equals_metrics_over_the_same_window_on_the_engine(spec_engine, tmp_path):
    address = spec_engine.url.removeprefix("http://")
    url, stop = start_prometheus([(address, {"specops_deployment": "tiny-spec"})], tmp_path)
    try:
        wait_for_samples(url, "vllm:spec_decode_num_drafts_total")
        t0 = datetime.now(timezone.utc)
        before = scrape(spec_engine.url)
        # a scrape of the counters before the traffic inside the window
        wait_for_scrape(url, "vllm:spec_decode_num_drafts_total", t0.timestamp(),
                        exporter_value(spec_engine.url, "vllm:spec_decode_num_drafts_total"))
        _traffic(spec_engine.url, 4)
        after = scrape(spec_engine.url)
        wait_until_caught_up(url, spec_engine.url)  # the last counters scraped by Prometheus
        t1 = datetime.now(timezone.utc)
        direct = delta(before, after, "tiny")
        via = PrometheusReader(url).measure(t0, t1)["tiny-spec"]
    finally:
        stop()
    assert direct.num_drafts > 0
    assert via.acceptance_rate == pytest.approx(direct.acceptance_rate, rel=1e-9)
    assert via.mean_acceptance_length == pytest.approx(direct.mean_acceptance_length, rel=1e-9)
    assert via.per_position_rate == pytest.approx(direct.per_position_rate, rel=1e-9)
    print(f"\nPromQL acceptance {via.acceptance_rate:.4f} = /metrics {direct.acceptance_rate:.4f}; "
          f"τ {direct.mean_acceptance_length:.3f}; α {direct.per_token_alpha:.3f}")


def test_baseline_redeploy_starts_the_same_engine_without_speculation_and_stops_it(spec_engine, models, cli):
    """The running spec engine stands for a local deployment: its row and the spec.yaml `specops deploy`
    keeps in the deployment folder are written here, then the real twin engine is started by bench."""
    from specops.engines.spec import DeploymentSpec, dump_spec
    from specops.registry import open_registry
    from specops.settings import deployment_dir

    spec = DeploymentSpec.model_validate({
        "name": "tiny-local", "target": {"model": str(models["target-v1"])},
        "draft": {"model": str(models["draft-v1"])},
        "speculative": {"method": "draft_model", "num_speculative_tokens": K},
        "engine": {"max_model_len": 512, "dtype": "float32",  # as the pool's engine
                   "extra_args": ["--per-request-spec-decode-metrics", "summary"]},
        "serve": {"served_model_name": "tiny", "port": int(spec_engine.url.rsplit(":", 1)[1])}})
    deployment_dir("tiny-local").mkdir(parents=True)
    (deployment_dir("tiny-local") / "spec.yaml").write_text(dump_spec(spec))
    open_registry().upsert_deployment(
        "tiny-local", platform="local", status="running", endpoint=spec_engine.url, served_model_name="tiny",
        method="draft_model", num_speculative_tokens=K, pid=spec_engine.pid)
    data = _bench(cli, "--deployment", "tiny-local", "--baseline", "redeploy")
    base_runs = [r for r in data["runs"] if r["role"] == "baseline"]
    assert len(base_runs) == 2 and all(r["measurement"]["speculation"] is False for r in base_runs)
    assert all(r["endpoint"] != spec_engine.url for r in base_runs)
    assert data["crosscheck_ok"] and data["recorded"] and {c["concurrency"] for c in data["comparisons"]} == {1, 4}
    assert all(c["tpot_speedup"] is not None for c in data["comparisons"])
    with pytest.raises(httpx.HTTPError):  # the temporary baseline engine is gone
        httpx.get(base_runs[0]["endpoint"] + "/health", timeout=2)
    print("\nredeploy baseline:", [(c["concurrency"], round(c["tpot_speedup"], 2)) for c in data["comparisons"]])
