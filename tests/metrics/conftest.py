"""Fixtures for the metrics tests: a real Prometheus server factory."""

from __future__ import annotations

import pytest

from tests.prometheus import start_prometheus


@pytest.fixture
def prometheus(tmp_path):
    """``prometheus(targets) -> url``: starts real Prometheus servers, stopped after the test."""
    stops = []

    def start(targets):
        url, stop = start_prometheus(targets, tmp_path)
        stops.append(stop)
        return url

    yield start
    for stop in stops:
        stop()
