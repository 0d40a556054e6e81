import time
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest

from specops.drift.monitor import Monitor, MonitorMetrics, SystemClock, monitor_once, serve_metrics
from specops.drift.observe import Observation, Unseen, as_observation
from specops.drift.outcomes import Fatal, Retry
from specops.drift.policy import NotifyOnlyExecutor, load_policy
from specops.drift.tracegen import FakeClock, SimDeployment, SimSource, TraceConfig, generate
from specops.drift.watch import WatchTarget

from .scenarios import baseline


class Flaky:
    """A source that fails transiently a few times, then works (wraps a real SimSource)."""

    def __init__(self, inner, failures):
        self.inner, self.failures, self.calls = inner, list(failures), 0

    def fetch(self, names):
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return self.inner.fetch(names)


def _sim_monitor(source_wrap=None, names=("a", "b"), missing=()):
    clock = FakeClock()
    sims = {n: SimDeployment(n, TraceConfig(seed=i, gaps_per_day=0)) for i, n in enumerate(names) if n not in missing}
    src = SimSource(sims, clock)
    src = source_wrap(src) if source_wrap else src
    mon = Monitor([WatchTarget(name=n) for n in names], src, load_policy("default"), NotifyOnlyExecutor(), clock)
    return mon, clock, src


def test_the_loop_backs_off_on_transient_errors_and_never_dies():
    mon, clock, src = _sim_monitor(lambda s: Flaky(s, [Retry(reason="prometheus down"), ConnectionError("reset"),
                                                       TimeoutError("slow")]))
    reports = []
    t0 = clock.now()
    mon.run(max_cycles=6, on_report=reports.append)
    assert [r.outcome for r in reports[:3]] == ["retry"] * 3
    assert [r.retry_in_s for r in reports[:3]] == [5.0, 10.0, 20.0]  # exponential backoff
    assert reports[1].unseen == {"a": "source failed: ConnectionError: reset", "b": "source failed: ConnectionError: reset"}
    assert reports[-1].outcome == "ok" and reports[-1].exit_code == 0
    assert clock.now() - t0 == 5 + 10 + 20 + 60 * 3


def test_a_retry_with_a_delay_waits_that_long():
    mon, clock, _ = _sim_monitor(lambda s: Flaky(s, [Retry(42, "rate limited")]))
    assert mon.run(max_cycles=1).retry_in_s == 42


def test_a_fatal_source_error_stops_the_loop_with_its_reason():
    mon, _, _ = _sim_monitor(lambda s: Flaky(s, [Fatal("bad credentials")]))
    last = mon.run(max_cycles=5)
    assert last.outcome == "fatal" and last.error == "bad credentials" and last.exit_code == 2


def test_an_unseen_deployment_is_named_and_makes_the_cycle_partial():
    mon, clock, _ = _sim_monitor(names=("a", "ghost"), missing=("ghost",))
    mon.run(max_cycles=2)
    r = mon.run_cycle()
    assert r.outcome == "partial" and r.exit_code == 2
    assert r.seen == ["a"] and "ghost" in r.unseen
    assert any(f.code == "DEPLOYMENT_UNSEEN" and "ghost" in f.message for f in r.findings)


def test_the_monitor_exposes_its_own_metrics_over_http():
    mon, _, _ = _sim_monitor(lambda s: Flaky(s, [Retry(5, "x")]), names=("a", "ghost"), missing=("ghost",))
    mon.run(max_cycles=3)
    server, thread = serve_metrics(mon.metrics, 0)
    try:
        text = httpx.get(f"http://127.0.0.1:{server.server_port}/metrics", timeout=5).text
    finally:
        server.shutdown()
    assert "specops_monitor_cycle_duration_seconds_count 3.0" in text
    assert "specops_monitor_deployments_unseen 1.0" in text
    assert 'specops_monitor_cycles_total{outcome="retry"} 1.0' in text
    assert "specops_monitor_last_good_cycle_timestamp_seconds 1.767" in text
    assert "python_gc" not in text  # a dedicated registry, not the global one


def test_actions_taken_are_counted_in_the_metrics():
    metrics = MonitorMetrics()
    cfg = TraceConfig(seed=2, change_at_s=600, resets_per_day=0, gaps_per_day=0)
    clock = FakeClock(cfg.start)
    src = SimSource({"d": SimDeployment("d", cfg)}, clock)
    mon = Monitor([WatchTarget(name="d", trained_against="sha256:target-v1")], src, load_policy("default"),
                  NotifyOnlyExecutor(), clock, metrics=metrics)
    mon.run(max_cycles=15)
    assert 'specops_monitor_actions_total{action="notify",outcome="done"} 1.0' in metrics.exposition().decode()


def test_monitor_once_warms_the_detectors_from_stored_history():
    base = baseline()
    cfg = TraceConfig(seed=4, drop_at_s=3600, resets_per_day=0, gaps_per_day=0)
    history = [o for o in generate(cfg, 3600 + 240, name="d") if isinstance(o, Observation)]
    clock = FakeClock(history[-1].at + 60)

    class Last:
        def fetch(self, names):
            return {"d": history[-1]}

    report = monitor_once([WatchTarget(name="d", baseline=base)], Last(), load_policy("default"),
                          NotifyOnlyExecutor(), clock, history=history[:-1])
    assert report.outcome == "ok"
    assert any(f.code == "ACCEPTANCE_DROP" for f in report.findings)


def test_a_metrics_measurement_is_adapted_to_an_observation():
    from specops.metrics.types import Measurement

    t0, t1 = datetime(2026, 1, 1, tzinfo=timezone.utc), datetime(2026, 1, 1, 0, 1, tzinfo=timezone.utc)
    m = Measurement(deployment="d", source="prometheus", window_start=t0, window_end=t1, speculation=True,
                    num_drafts=100, num_draft_tokens=300, num_accepted_tokens=180, num_speculative_tokens=3,
                    accepted_per_position=[80, 60, 40], kv_cache_usage=0.5, requests_running=7)
    obs = as_observation("d", m)
    assert isinstance(obs, Observation)
    assert obs.total.tau == 2.8 and obs.window_s == 60 and obs.running == 7 and obs.gamma == 3
    off = Measurement(deployment="d", source="metrics", window_start=t0, window_end=t1, speculation=False)
    assert isinstance(as_observation("d", off), Unseen)


@pytest.mark.prometheus
def test_the_prometheus_source_turns_reader_failures_into_retries_and_missing_series_into_unseen(tmp_path):
    """A real Prometheus (Debian package) scraping captured vLLM text for deployment "a" (tests/metrics/
    textserver.py serves it; the test switches it from a fresh engine's counters to those after 8
    requests); "b" has no series. The unreachable case is a real refused connection."""
    from specops.drift.sources import PrometheusSource
    from specops.metrics.prometheus import PrometheusReader
    from tests.metrics.engines import free_port
    from tests.metrics.textserver import TextServer
    from tests.prometheus import start_prometheus, wait_for_scrape

    data = Path(__file__).parents[1] / "metrics" / "data"
    # real time: Prometheus stores samples at wall-clock times, so the monitor must ask about those
    clock, targets = SystemClock(), [WatchTarget(name="a"), WatchTarget(name="b")]
    down = PrometheusSource(PrometheusReader(f"http://127.0.0.1:{free_port()}", timeout=2), clock)
    first = Monitor(targets, down, load_policy("default"), NotifyOnlyExecutor(), clock).run_cycle()
    assert first.outcome == "retry" and "cannot reach Prometheus" in first.error

    server = TextServer((data / "vllm-0.32-draft-k3-fresh.txt").read_text())
    url, stop = start_prometheus([(server.address, {"specops_deployment": "a"})], tmp_path)
    try:
        wait_for_scrape(url, "vllm:spec_decode_num_drafts_total", 0.0, 0.0)
        server.text = (data / "vllm-0.32-draft-k3-8-requests.txt").read_text()
        wait_for_scrape(url, "vllm:spec_decode_num_drafts_total", time.time(), 187.0)
        up = PrometheusSource(PrometheusReader(url), clock)
        second = Monitor(targets, up, load_policy("default"), NotifyOnlyExecutor(), clock).run_cycle()
    finally:
        stop()
        server.close()
    assert second.seen == ["a"] and "no vllm:* series" in second.unseen["b"]
