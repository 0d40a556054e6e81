"""What `specops metrics` calls: resolve a deployment or endpoint, then read /metrics or Prometheus.

- ``--endpoint URL``: the engine's ``/metrics`` directly, unless ``--prometheus-url`` is given.
- ``--deployment NAME``: Prometheus when one is configured (flag, ``SPECOPS_PROMETHEUS_URL`` or
  config.yaml), grouped by the ``specops_deployment`` label or the served model name; otherwise the
  deployment's endpoint directly.
"""

from __future__ import annotations

from specops.errors import InputError
from specops.metrics import measure_endpoint, measure_prometheus, parse_duration
from specops.metrics.types import Measurement


def registered(name: str):
    """The registry's deployment row (NotFoundError with did-you-mean when absent)."""
    from specops.registry import open_registry

    return open_registry().get_deployment(name)


def measure(deployment: str | None = None, endpoint: str | None = None, served_name: str | None = None,
            prometheus_url: str | None = None, window: str | None = None) -> Measurement:
    from specops.settings import setting

    if bool(deployment) == bool(endpoint):
        raise InputError("pass exactly one of --deployment NAME or --endpoint URL",
                         "name a registered deployment, or give the engine's base URL")
    window_s = parse_duration(window) if window else None
    if deployment:
        d = registered(deployment)
        served_name = served_name or d.served_model_name
        if setting("prometheus_url", prometheus_url):
            return measure_prometheus(prometheus_url, [deployment, served_name], window_s or 300.0)
        if not d.endpoint:
            raise InputError(f'deployment "{deployment}" has no endpoint recorded',
                             "configure Prometheus (--prometheus-url) or re-register it with --endpoint")
        endpoint = d.endpoint
    elif prometheus_url:
        return measure_prometheus(prometheus_url, [served_name], window_s or 300.0)
    return measure_endpoint(endpoint, served_name, window_s)
