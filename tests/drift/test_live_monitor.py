"""Issue 40 items 1 and 4 against a LIVE engine (one run, 2026-12-03: 64 s of test on the started pool;
τ 1.918 in every window at 1, 8 and 1 clients, 3.0 drafted tokens per step, prefix hit rate 0.0 ->
0.79), and the prefix-cache evidence of the collapse causes.

The real monitor (``drift.service.Watcher``: the registry, the real ``MetricsSource`` scraping the
engine's /metrics, the default policy in dry-run, the detectors and the collapse rules) watches the
shared pool's speculating engine (``pool.spec``: tiny target-v1 + draft-v1, draft_model γ=3,
float32; read-only: the test only sends traffic and scrapes). Nothing is faked. Prometheus is not in
the loop (its scrape interval would double the cost); the Prometheus side of the new prefix-cache
counters is one PromQL query (specops/metrics/prometheus.py, ``prefix_cache``).

1. Load that moves: two windows of one client record the baseline; then windows of eight clients,
   eight again, and one: no drift finding in any, and every window reports the drafted length it
   used (num_draft_tokens / num_drafts; 3.0 for a fixed-γ draft model) next to τ, judged on ``tau``.
2. Prefix cache: a window of requests sharing a 270-token prefix (two 128-token CPU blocks) after
   windows without shared prefixes: the monitor's per-window prefix hit rate (vLLM's
   ``vllm:prefix_cache_hits_total`` / ``vllm:prefix_cache_queries_total``, tokens) equals the raw
   counters' deltas, and the collapse rules read the jump as evidence for ``kv_without_draft_kv``
   (suspected when the launch's KV connector is not on record, ruled out when the launch has none).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from specops.drift.collapse import CauseFacts, WindowTrace, collapse_causes, prefix_evidence
from specops.drift.observe import ALL
from specops.registry import open_registry

pytestmark = [pytest.mark.engine]

NAME = "live"
DRIFT = {"ACCEPTANCE_DROP", "ACCEPTANCE_BELOW_FLOOR", "BELOW_BREAK_EVEN", "ACCEPTANCE_COLLAPSE", "CHANGED_MODEL",
         "ENGINE_STATE_SUSPECTED", "ENGINE_STATE_DECAY", "WORKLOAD_DRIFT", "DRIFT_CAUSE_UNKNOWN", "DEPLOYMENT_UNSEEN"}
PROMPTS = ["def fibonacci(n):\n    ", "import os\nimport sys\n\n\ndef main():\n",
           "    for key, value in sorted(mapping.items()):\n        if key", "def read_config(path):\n    with open(path) as f:\n"]
SHARED = "def read_config(path):\n    with open(path) as f:\n        return json.load(f)\n" * 10  # ≈ 270 tokens


def _send(endpoint: str, prompts: list[str], clients: int, max_tokens: int = 24) -> None:
    def one(p: str) -> None:
        r = httpx.post(endpoint + "/v1/completions", timeout=300,
                       json={"model": "tiny", "prompt": p, "max_tokens": max_tokens, "temperature": 0,
                             "ignore_eos": True})
        assert r.status_code == 200, r.text

    with ThreadPoolExecutor(clients) as ex:
        list(ex.map(one, prompts))


def _raw(endpoint: str) -> dict[str, float]:
    """vllm:* sample sums by name, read without the product's parser."""
    out: dict[str, float] = {}
    for line in httpx.get(endpoint + "/metrics", timeout=30).text.splitlines():
        if line.startswith("vllm:"):
            head, _, value = line.rpartition(" ")
            out[head.split("{", 1)[0]] = out.get(head.split("{", 1)[0], 0.0) + float(value)
    return out


def _watcher():
    from specops.drift.service import MonitorOptions, Watcher

    return Watcher(open_registry(), MonitorOptions(policy="default", dry_run=True, interval_s=60,
                                                   deployments=[NAME]))


def test_the_live_monitor_holds_across_load_and_reads_the_prefix_cache(engine_lock, engine_pool):
    eng = engine_pool.spec
    with open_registry() as reg:
        reg.upsert_deployment(NAME, platform="local", status="running", method="draft_model",
                              num_speculative_tokens=3, endpoint=eng.url, served_model_name=eng.served_name,
                              vllm_version="0.32.0")
    w = _watcher()
    w.cycle()  # the first scrape measures since the pool started (other tests' traffic): not ours
    seen = []  # (clients, observation, report)

    def window(prompts: list[str], clients: int):
        before = _raw(eng.url)
        _send(eng.url, prompts, clients)
        report = w.cycle()
        obs = w.monitor.watches[NAME].traces[-1]
        got = w.source.last_measurements[NAME]
        seen.append((clients, got, report, before, _raw(eng.url), obs))
        return report

    # 1. baseline at one client, then 8, 8, 1: the same prompts each time (greedy: same acceptance)
    for _ in range(2):
        window(PROMPTS * 3, 1)
    from specops.drift.store import HistoryStore

    # windows ending after our first one started: not the priming window (it ends where ours starts)
    base = HistoryStore(w.reg).record_baseline(NAME, since=seen[0][1].window_start.timestamp() + 0.5,
                                               until=seen[-1][1].window_end.timestamp() + 1)
    assert base.labels[ALL].windows == 2
    w = _watcher()  # as `specops monitor` starts: targets and the new baseline from the registry
    w.warm()
    w.cycle()
    for clients in (8, 8, 1):
        window(PROMPTS * (4 if clients > 1 else 3), clients)
    print("clients, drafts, mean drafted, tau, basis, codes")
    for clients, m, report, *_ in seen:
        print(clients, m.num_drafts, round(m.num_draft_tokens / m.num_drafts, 3), round(m.mean_acceptance_length, 3),
              w.monitor.watches[NAME].basis.get(ALL), [f.code for f in report.findings])
    judged = seen[2:]
    for clients, m, report, *_ in judged:
        assert report.outcome == "ok" and NAME in report.seen, report
        assert not {f.code for f in report.findings} & DRIFT, (clients, [f.one_line() for f in report.findings])
        assert m.num_drafts >= 50 and 0 < m.num_draft_tokens / m.num_drafts <= 3.0  # the drafted length used
    assert w.monitor.watches[NAME].basis[ALL] == "tau"
    assert w.monitor.watches[NAME].collapse.last_ratio > 0.5  # τ − 1 near its baseline's at every load

    # 2. the prefix cache: a window of a shared 270-token prefix after the windows without one
    window([SHARED + p for p in PROMPTS * 2], 1)
    *_, (_, m, report, before, after, trace) = seen
    queries = after["vllm:prefix_cache_queries_total"] - before["vllm:prefix_cache_queries_total"]
    hits = after["vllm:prefix_cache_hits_total"] - before["vllm:prefix_cache_hits_total"]
    assert queries > 0 and m.prefix_hit_rate == pytest.approx(hits / queries)
    assert trace.prefix_hit_rate == pytest.approx(hits / queries)
    rates = [t.prefix_hit_rate for *_, t in seen[2:]]
    print("prefix hit rate per window:", rates)
    traces: list[WindowTrace] = list(w.monitor.watches[NAME].traces)
    ev = prefix_evidence(traces, onset=trace.at)
    assert ev["prefix_hit_jump"] is not None and ev["prefix_hit_jump"] >= 0.2, ev
    unknown = {c["cause"]: c for c in collapse_causes(CauseFacts(method="draft_model", draft_method="draft_model"),
                                                      traces, trace.at)}
    assert unknown["kv_without_draft_kv"]["status"] == "suspected", unknown["kv_without_draft_kv"]
    assert "prefix hit rate" in unknown["kv_without_draft_kv"]["why"]
    none = {c["cause"]: c for c in collapse_causes(CauseFacts(method="draft_model", draft_method="draft_model",
                                                              kv_connector=False), traces, trace.at)}
    assert none["kv_without_draft_kv"]["status"] == "ruled out"
