"""Measurement sources for the monitor built on the metrics layer.

``PrometheusSource`` wraps ``specops.metrics.prometheus.PrometheusReader`` (a constant number of
PromQL queries per cycle, grouped by ``specops_deployment`` else ``model_name``). A reader failure
(``MeasurementError``: unreachable, refused, no series at all) becomes ``Retry`` so the loop backs
off; a deployment without series in the window becomes ``Unseen`` with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta, timezone

from specops.drift.observe import Observation, Unseen, observation_from_measurement
from specops.drift.outcomes import Retry
from specops.errors import MeasurementError


class PrometheusSource:
    def __init__(self, reader, clock, window_s: float = 60.0) -> None:
        self.reader, self.clock, self.window_s = reader, clock, window_s
        self.queries = 0

    def fetch(self, deployments: Iterable[str]) -> dict[str, Observation | Unseen]:
        end = datetime.fromtimestamp(self.clock.now(), tz=timezone.utc)
        self.queries += 1
        try:
            found = self.reader.measure(end - timedelta(seconds=self.window_s), end)
        except MeasurementError as exc:
            raise Retry(None, exc.one_line()) from None
        out: dict[str, Observation | Unseen] = {}
        for name in deployments:
            m = found.get(name)
            if m is None:
                out[name] = Unseen("no vllm:* series for this deployment in the window")
            elif m.empty_window:
                out[name] = Unseen("no drafts in the window (no traffic)")
            else:
                out[name] = observation_from_measurement(m)
        return out
