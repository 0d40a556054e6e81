"""Speculative-decoding metrics: the only package that parses ``/metrics`` or talks to Prometheus.

- :func:`scrape` / :func:`parse_metrics_text`: one ``/metrics`` scrape -> :class:`Snapshot`;
- :func:`delta`: two snapshots -> :class:`Measurement` (counter resets and empty windows flagged);
- :class:`PrometheusReader`: the same :class:`Measurement` from PromQL, all deployments at once;
- :func:`measure_endpoint` / :func:`measure_prometheus`: what ``specops metrics`` calls.
"""

from __future__ import annotations

import math
import time
from datetime import datetime, timedelta, timezone

from specops.errors import InputError
from specops.metrics.derive import (
    all_deltas,
    alpha_from_tau,
    delta,
    histogram_quantile,
    pick_group,
    require_speculation,
)
from specops.metrics.parse import parse_metrics_text
from specops.metrics.scrape import base_url, metrics_url, scrape
from specops.metrics.types import GroupValues, Measurement, Snapshot

__all__ = [
    "GroupValues", "Measurement", "Snapshot", "alpha_from_tau", "all_deltas", "base_url", "delta",
    "histogram_quantile", "measure_endpoint", "measure_prometheus", "metrics_url", "parse_duration",
    "parse_metrics_text", "pick_group", "require_speculation", "scrape",
]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


MAX_WINDOW_S = 31 * 86400
"""Longest window accepted (31 days): Prometheus keeps 15 days by default; ``inf`` is no window."""


def parse_duration(text: str, *, flag: str = "--window", max_s: float = MAX_WINDOW_S) -> float:
    """'30s', '5m', '1h', '90' (seconds) -> seconds; finite, above 0 and at most ``max_s``."""
    t = (text or "").strip().lower()
    try:
        if t and t[-1] in _UNITS:
            value = float(t[:-1]) * _UNITS[t[-1]]
        else:
            value = float(t)
    except ValueError:
        value = -1
    if not math.isfinite(value) or value <= 0:
        raise InputError(f'{flag} "{text[:40]}" is not a duration', "use e.g. 30s, 5m or 1h")
    if value > max_s:
        raise InputError(f'{flag} "{text[:40]}" is out of range (at most {max_s:g} s)',
                         f"give {flag} of at most {max_s:g} seconds, e.g. 5m")
    return value


def measure_endpoint(endpoint: str, served_name: str | None = None, window_s: float | None = None,
                     sleep=time.sleep) -> Measurement:
    """Measure one engine from its ``/metrics``.

    Without a window: counters since the engine started (one scrape). With ``window_s``: two scrapes
    that far apart, and the delta between them.
    """
    after = scrape(endpoint)
    group = pick_group(after, served_name)
    if window_s is None:
        start = after.process_start or after.taken_at
        before = Snapshot(source=after.source, taken_at=start, groups={})
    else:
        before = after
        sleep(window_s)
        after = scrape(endpoint)
    m = delta(before, after, group)
    if window_s is None:
        m.notes.append("window: since the engine started (cumulative counters)")
    require_speculation(m, metrics_url(endpoint))
    return m


def measure_prometheus(url: str | None, groups: list[str | None], window_s: float = 300.0,
                       end: datetime | None = None) -> Measurement:
    """Measure the first of ``groups`` that Prometheus knows, over the last ``window_s`` seconds."""
    from specops.errors import MeasurementError, did_you_mean
    from specops.metrics.prometheus import PrometheusReader

    reader = PrometheusReader.from_settings(url)
    end = end or datetime.now(timezone.utc)
    found = reader.measure(end - timedelta(seconds=window_s), end)
    wanted = [g for g in groups if g]
    if not wanted:
        if len(found) != 1:
            raise MeasurementError(f"Prometheus holds several deployments ({', '.join(sorted(found))})",
                                   "pick one with --deployment or --served-name")
        wanted = list(found)
    group = next((g for g in wanted if g in found), None)
    bad = next((reader.bad[g] for g in wanted if g in reader.bad), None)
    if group is None and bad:
        from specops.metrics.prometheus import BAD_FIX

        raise MeasurementError(bad, BAD_FIX)
    if group is None:
        raise MeasurementError(f'Prometheus has no vllm:* series for "{wanted[0]}" in the window.'
                               f"{did_you_mean(wanted[0], found)} (seen: {', '.join(sorted(found))})",
                               "check the specops_deployment / model_name label and the window")
    m = found[group]
    require_speculation(m, f"Prometheus at {reader.url}")
    return m
