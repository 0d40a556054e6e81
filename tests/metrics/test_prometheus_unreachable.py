"""An unreachable Prometheus (a free loopback port nothing listens on): no Prometheus server is needed,
so these run in the fast suite (the real-server tests are in test_prometheus.py)."""

from __future__ import annotations

import pytest

from specops.errors import MeasurementError
from specops.metrics.prometheus import PrometheusReader


def test_unreachable_prometheus_is_a_measurement_error():
    from tests.metrics.engines import free_port

    reader = PrometheusReader(f"http://127.0.0.1:{free_port()}", timeout=2)
    with pytest.raises(MeasurementError, match="cannot reach Prometheus"):
        reader.ping()


def test_cli_metrics_with_unreachable_prometheus_exits_2_with_one_line(cli):
    from tests.metrics.engines import free_port

    r = cli("metrics", "--endpoint", "http://127.0.0.1:9", "--prometheus-url", f"http://127.0.0.1:{free_port()}",
            env={"SPECOPS_PROMETHEUS_TOKEN": "s3cr3t-token"})
    assert r.returncode == 2
    assert r.stderr.startswith("error: cannot reach Prometheus") and "To fix:" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "s3cr3t-token" not in r.stderr
