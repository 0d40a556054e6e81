"""The capacity metric (issue 44): the monitor exports ``specops_capacity_requests_per_second{specops_deployment}``
(one replica's capacity within the spec's SLO at the live acceptance, interpolated on the spec's
``capacity.by_acceptance`` curve) and ``specops_load_ratio`` (requests finished per second over it).

The fast tests drive the real Monitor with Observations built in the test. The engine test takes two windows of
the shared engine pool's real speculative engine (``pool.spec``: draft_model γ=3; greedy traffic, then sampled
at temperature 1.5, which the draft predicts worse), runs a monitor cycle on each (the source replays those two
real windows: faked is only the hand-over, not the numbers), and reads both gauges back from a real Prometheus
scraping the monitor's exporter.
"""

from __future__ import annotations

import pytest

from specops.drift.capacity import interpolate
from specops.engines.spec import CapacityExpectation

CURVE = [(0.2, 2.0), (0.4, 3.0), (0.6, 4.0), (0.8, 4.5)]


def _cap(curve=CURVE) -> CapacityExpectation:
    return CapacityExpectation(tpot_slo_ms=40, ttft_slo_ms=2000, context_len=4096, output_len=512,
                               capacity_rps=3.5, by_acceptance=curve, source="test curve")


def _obs(name: str, accepted: float, draft_tokens: float = 300.0, finished: float | None = 120.0, window_s=60.0):
    from specops.drift.observe import ALL, LabelWindow, Observation

    return Observation(deployment=name, at=1000.0, window_s=window_s, gamma=3,
                       labels={ALL: LabelWindow(drafts=draft_tokens / 3, draft_tokens=draft_tokens,
                                                accepted=accepted)},
                       requests_finished=finished)


class _Replay:
    """A measurement source that hands the monitor the given windows, one per cycle."""

    def __init__(self, windows: list[dict]) -> None:
        self.windows = list(windows)

    def fetch(self, names):
        return self.windows.pop(0)


def _monitor(targets, windows, metrics=None):
    from specops.drift.monitor import Monitor
    from specops.drift.policy import NotifyOnlyExecutor, load_policy
    from specops.drift.tracegen import FakeClock

    return Monitor(targets, _Replay(windows), load_policy("default"), NotifyOnlyExecutor(), FakeClock(1000.0),
                   metrics=metrics)


def _gauge(metrics, name: str, deployment: str) -> float | None:
    return metrics.registry.get_sample_value(name, {"specops_deployment": deployment})


def test_capacity_falls_with_the_measured_acceptance_and_the_load_ratio_rises():
    from specops.drift.watch import WatchTarget

    t = WatchTarget(name="chat", gamma=3, capacity=_cap())
    mon = _monitor([t], [{"chat": _obs("chat", accepted=210)}, {"chat": _obs("chat", accepted=90)}])
    mon.run_cycle()
    high = _gauge(mon.metrics, "specops_capacity_requests_per_second", "chat")
    ratio_high = _gauge(mon.metrics, "specops_load_ratio", "chat")
    mon.run_cycle()
    low = _gauge(mon.metrics, "specops_capacity_requests_per_second", "chat")
    ratio_low = _gauge(mon.metrics, "specops_load_ratio", "chat")
    assert high == pytest.approx(4.25)  # accepted/drafted 0.7: halfway between (0.6, 4.0) and (0.8, 4.5)
    assert low == pytest.approx(2.5)  # 0.3: halfway between (0.2, 2.0) and (0.4, 3.0)
    assert ratio_high == pytest.approx(2.0 / 4.25) and ratio_low == pytest.approx(2.0 / 2.5)  # 120 req / 60 s


def test_a_window_without_drafts_removes_the_earlier_capacity():
    from specops.drift.watch import WatchTarget

    t = WatchTarget(name="chat", gamma=3, capacity=_cap())
    mon = _monitor([t], [{"chat": _obs("chat", accepted=210)}, {"chat": _obs("chat", accepted=0, draft_tokens=0)}])
    mon.run_cycle()
    assert _gauge(mon.metrics, "specops_capacity_requests_per_second", "chat") is not None
    mon.run_cycle()
    assert _gauge(mon.metrics, "specops_capacity_requests_per_second", "chat") is None
    assert _gauge(mon.metrics, "specops_load_ratio", "chat") is None


def test_no_capacity_block_or_no_drafts_sets_nothing():
    from specops.drift.monitor import MonitorMetrics
    from specops.drift.watch import WatchTarget

    m = MonitorMetrics()
    assert m.export_capacity(WatchTarget(name="a", gamma=3), _obs("a", 100)) == "no `capacity` block in the spec"
    why = m.export_capacity(WatchTarget(name="b", gamma=3, capacity=_cap()), _obs("b", 0, draft_tokens=0))
    assert why.startswith("could not evaluate")
    assert _gauge(m, "specops_capacity_requests_per_second", "a") is None
    assert _gauge(m, "specops_capacity_requests_per_second", "b") is None


def test_the_curve_is_clamped_not_extrapolated_and_bad_curves_are_refused():
    assert interpolate(CURVE, 0.05)[0] == 2.0 and interpolate(CURVE, 0.95)[0] == 4.5
    with pytest.raises(ValueError, match="accepted/drafted"):
        _cap([(1.5, 3.0)])


def _completions(url: str, temperature: float, n: int = 6) -> None:
    import httpx

    for i in range(n):
        r = httpx.post(url + "/v1/completions", timeout=300,
                       json={"model": "tiny", "prompt": f"Request {i}: count the numbers one two three",
                             "max_tokens": 40, "temperature": temperature, "seed": i, "ignore_eos": True})
        assert r.status_code == 200, r.text


@pytest.mark.engine
@pytest.mark.prometheus
def test_capacity_from_the_real_engines_acceptance_through_prometheus(engine_pool, engine_lock, tmp_path):
    import socket

    import httpx

    from specops.drift.monitor import MonitorMetrics, serve_metrics
    from specops.drift.observe import observation_from_measurement
    from specops.drift.watch import WatchTarget
    from specops.metrics.derive import delta, pick_group
    from specops.metrics.scrape import scrape
    from tests.prometheus import start_prometheus, wait_for_scrape

    url = engine_pool.spec.url  # engine_lock is held for the test: deltas around this test's own traffic only
    s0 = scrape(url + "/metrics")
    _completions(url, 0.0)
    s1 = scrape(url + "/metrics")
    _completions(url, 1.5)
    s2 = scrape(url + "/metrics")
    group = pick_group(s2, "tiny")
    windows = []
    for before, after in ((s0, s1), (s1, s2)):
        m = delta(before, after, group)
        m.deployment = "pool-spec"
        windows.append({"pool-spec": observation_from_measurement(m)})
    rates = [w["pool-spec"].total.accepted / w["pool-spec"].total.draft_tokens for w in windows]
    assert rates[1] < rates[0], f"sampling at temperature 1.5 did not lower acceptance: {rates}"
    assert all(w["pool-spec"].requests_finished == 6 for w in windows)
    lo, hi = min(rates), max(rates)  # a curve spanning the measured rates: capacity 1 + 4 × rate
    curve = [(max(0.0, lo - 0.05), 1 + 4 * max(0.0, lo - 0.05)), (min(1.0, hi + 0.05), 1 + 4 * min(1.0, hi + 0.05))]
    metrics = MonitorMetrics()
    mon = _monitor([WatchTarget(name="pool-spec", gamma=3, capacity=_cap(curve))], windows, metrics)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server, _ = serve_metrics(metrics, port)
    prom, stop = start_prometheus([f"127.0.0.1:{port}"], tmp_path)
    try:
        seen = []
        for rate in rates:
            mon.run_cycle()
            want = _gauge(metrics, "specops_capacity_requests_per_second", "pool-spec")
            assert want == pytest.approx(1 + 4 * rate)
            sel = 'specops_capacity_requests_per_second{specops_deployment="pool-spec"}'
            wait_for_scrape(prom, sel, 0.0, want)
            got = httpx.get(prom + "/api/v1/query", params={"query": sel}, timeout=10).json()["data"]["result"]
            seen.append(float(got[0]["value"][1]))
            ratio = httpx.get(prom + "/api/v1/query", params={
                "query": 'specops_load_ratio{specops_deployment="pool-spec"}'}, timeout=10).json()["data"]["result"]
            assert float(ratio[0]["value"][1]) > 0
        assert seen[1] < seen[0], seen  # acceptance fell, so did the capacity Prometheus holds
    finally:
        stop()
        server.shutdown()
