"""Read vLLM speculative-decoding metrics from Prometheus (PromQL through ``prometheus-api-client``).

One query per quantity, each ``sum by (specops_deployment, model_name)`` over all deployments at
once (a constant number of queries, however large the fleet). A group is the ``specops_deployment``
label where present, else ``model_name``. ``increase()`` handles counter resets itself; ``resets()``
tells whether one happened so the measurement can say so.

Settings: URL from ``--prometheus-url`` / ``SPECOPS_PROMETHEUS_URL`` / config.yaml ``prometheus_url``;
bearer token from ``SPECOPS_PROMETHEUS_TOKEN`` or the file named by ``prometheus_token_file``; TLS
verification on unless ``prometheus_insecure`` is true (a CA bundle path may be given as
``prometheus_ca_file``). The token goes into a request header only; it is never logged or shown.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from pathlib import Path

from specops.errors import InputError, MeasurementError
from specops.metrics.derive import fill_rates, set_tpot
from specops.metrics.types import Measurement

BY = "specops_deployment, model_name"


def _sel(name: str) -> str:
    """A selector matching both vLLM's colon names and the underscore form (client_python#1177)."""
    return '{__name__=~"vllm[:_]' + name + '"}'


def _increase(name: str, by: str = BY) -> str:
    return f"sum by ({by}) (increase({_sel(name)}[$w]))"


QUERIES = {
    "num_drafts": _increase("spec_decode_num_drafts_total"),
    "num_draft_tokens": _increase("spec_decode_num_draft_tokens_total"),
    "num_accepted_tokens": _increase("spec_decode_num_accepted_tokens_total"),
    "per_pos": _increase("spec_decode_num_accepted_tokens_per_pos_total", BY + ", position"),
    "generation_tokens": _increase("generation_tokens_total"),
    "requests_finished": _increase("request_success_total"),
    "tpot_bucket": _increase("request_time_per_output_token_seconds_bucket", BY + ", le"),
    "tpot_sum": _increase("request_time_per_output_token_seconds_sum"),
    "tpot_count": _increase("request_time_per_output_token_seconds_count"),
    "kv_cache_usage": f"max by ({BY}) ({_sel('kv_cache_usage_perc')})",
    "requests_running": f"sum by ({BY}) ({_sel('num_requests_running')})",
    "requests_waiting": f"sum by ({BY}) ({_sel('num_requests_waiting')})",
    # one name only: resets() drops __name__, and several names would collide on the same labels
    "resets": f"sum by ({BY}) (resets({_sel('spec_decode_num_drafts_total')}[$w]))",
}


def prometheus_settings(url_flag: str | None = None) -> dict:
    """Resolve URL, token and TLS settings (token never returned in anything printed)."""
    from specops.settings import setting

    url = setting("prometheus_url", url_flag)
    if not url:
        raise InputError("no Prometheus URL configured",
                         "pass --prometheus-url URL or set SPECOPS_PROMETHEUS_URL")
    url = str(url).rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise InputError(f'Prometheus URL "{url}" is not an http(s) URL', "use e.g. http://prometheus:9090")
    token = setting("prometheus_token")
    token_file = setting("prometheus_token_file")
    if not token and token_file:
        path = Path(str(token_file)).expanduser()
        try:
            token = path.read_text().strip()
        except OSError as exc:
            raise InputError(f"cannot read the Prometheus token file {path} ({exc.strerror})",
                             "fix SPECOPS_PROMETHEUS_TOKEN_FILE or prometheus_token_file") from None
    insecure = str(setting("prometheus_insecure", default="false")).lower() in ("1", "true", "yes")
    ca_file = setting("prometheus_ca_file")
    verify: bool | str = False if insecure else (str(ca_file) if ca_file else True)
    return {"url": url, "token": token or None, "verify": verify}


class PrometheusReader:
    """PromQL reads for all deployments at once."""

    def __init__(self, url: str, token: str | None = None, verify: bool | str = True, timeout: float = 10.0):
        from urllib.parse import urlsplit

        from prometheus_api_client import PrometheusConnect
        from urllib3.util.retry import Retry

        parts = urlsplit(url)
        if parts.username or parts.password:  # it would be echoed in errors, reports and the registry
            raise InputError("the Prometheus URL contains credentials",
                             "remove them from the URL and put a bearer token in SPECOPS_PROMETHEUS_TOKEN "
                             "(or the file named by prometheus_token_file)")
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else None
        self._conn = PrometheusConnect(url=self.url, headers=headers, disable_ssl=verify is False,
                                       retry=Retry(total=1, backoff_factor=0.1), timeout=timeout)
        if isinstance(verify, str):
            self._conn._session.verify = verify

    @classmethod
    def from_settings(cls, url_flag: str | None = None) -> PrometheusReader:
        return cls(**prometheus_settings(url_flag))

    def query(self, promql: str, at: datetime | None = None) -> list[dict]:
        import requests
        from prometheus_api_client import PrometheusApiClientException

        params = {"time": f"{at.timestamp():.3f}"} if at else None
        try:
            result = self._conn.custom_query(promql, params=params)
            if not isinstance(result, list) or not all(isinstance(r, dict) for r in result):
                raise ValueError("result is not a list of series")
            return result
        except requests.exceptions.SSLError:
            raise MeasurementError(f"TLS verification failed for Prometheus at {self.url}",
                                   "set prometheus_ca_file to its CA bundle (or prometheus_insecure: true "
                                   "for a test server)") from None
        except requests.exceptions.RequestException as exc:
            raise MeasurementError(f"cannot reach Prometheus at {self.url} ({exc.__class__.__name__})",
                                   "check --prometheus-url / SPECOPS_PROMETHEUS_URL and that it is running") from None
        except PrometheusApiClientException as exc:
            status = str(exc).split("(", 1)[0].strip()
            hint = ("check SPECOPS_PROMETHEUS_TOKEN / the token file" if "401" in status or "403" in status
                    else "check the Prometheus version (2.x or later) and the URL")
            raise MeasurementError(f"Prometheus at {self.url} refused the query ({status})", hint) from None
        except (ValueError, KeyError, TypeError, AttributeError):
            raise MeasurementError(f"{self.url} did not answer like a Prometheus API (a malformed or error "
                                   "answer to an instant query)",
                                   "point --prometheus-url at the Prometheus server root") from None

    def ping(self) -> None:
        self.query("vector(1)")

    def measure(self, start: datetime, end: datetime) -> dict[str, Measurement]:
        """Measurements of every group over [start, end] (13 queries, whatever the fleet size)."""
        seconds = max(1, math.ceil((end - start).total_seconds()))
        window = f"{seconds}s"
        results = {key: self.query(q.replace("$w", window), at=end) for key, q in QUERIES.items()}
        from specops.metrics.parse import position

        groups: dict[str, dict] = {}
        for key, rows in results.items():
            for row in rows:
                try:
                    labels = row.get("metric") or {}
                    name, label = _group(labels)
                    value = float(row["value"][1])
                    pos = position(labels.get("position", "0")) if key == "per_pos" else None
                    le = float(labels.get("le", "+Inf")) if key == "tpot_bucket" else None
                except (KeyError, TypeError, ValueError, IndexError, AttributeError):
                    raise MeasurementError(f"Prometheus at {self.url} answered a malformed sample for {key} "
                                           f"({str(row)[:120]})", "check the Prometheus server and what it "
                                           "scrapes; a sample is {metric: {...}, value: [time, \"number\"]}") from None
                if math.isnan(value) or (key == "per_pos" and pos is None):
                    continue  # no sample, or not a draft position (0-63)
                if math.isinf(value) and key != "tpot_bucket":
                    raise MeasurementError(f"Prometheus at {self.url} answered {value} for {key} of {name or '?'}: "
                                           "an increase or a gauge is a finite number",
                                           "check what Prometheus scrapes; these series cannot come from a vLLM engine")
                slot = groups.setdefault(name, {"label": label, "per_pos": {}, "tpot_bucket": {}})
                if key == "per_pos":
                    slot["per_pos"][pos] = value
                elif key == "tpot_bucket":
                    slot["tpot_bucket"][le] = value
                else:
                    slot[key] = value
        if not groups:
            raise MeasurementError(f"Prometheus at {self.url} holds no vllm:* series in the {window} before "
                                   f"{end.isoformat(timespec='seconds')}",
                                   "check that Prometheus scrapes the engine's /metrics and the window is right")
        return {name: _measurement(name, slot, start, end) for name, slot in groups.items()}


def _group(labels: dict) -> tuple[str, str]:
    if labels.get("specops_deployment"):
        return labels["specops_deployment"], "specops_deployment"
    return labels.get("model_name", ""), "model_name"


def _measurement(name: str, slot: dict, start: datetime, end: datetime) -> Measurement:
    speculation = all(k in slot for k in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"))
    m = Measurement(deployment=name, group_label=slot["label"], source="prometheus",
                    window_start=start.astimezone(timezone.utc), window_end=end.astimezone(timezone.utc),
                    speculation=speculation)
    for key in ("num_drafts", "num_draft_tokens", "num_accepted_tokens", "generation_tokens",
                "requests_finished", "kv_cache_usage", "requests_running", "requests_waiting"):
        if key in slot:
            setattr(m, key, slot[key])
    if slot["per_pos"]:
        k = max(slot["per_pos"]) + 1
        m.num_speculative_tokens = k
        m.accepted_per_position = [slot["per_pos"].get(i, 0.0) for i in range(k)]
    if slot["tpot_bucket"]:
        set_tpot(m, slot["tpot_bucket"], slot.get("tpot_count"), slot.get("tpot_sum"))
    if slot.get("resets", 0) > 0:
        m.counter_reset = True
        m.reset_counters = ["spec_decode counters"]
        m.notes.append(f"{int(slot['resets'])} counter reset(s) in the window (the engine restarted); "
                       "Prometheus' increase() counts across the restart")
    return fill_rates(m)
