"""Read vLLM speculative-decoding metrics from Prometheus (PromQL instant queries over HTTP).

Each query is one ``GET /api/v1/query`` through specops.metrics.http.exchange (one overall deadline,
a body cap, no retries), not prometheus-api-client: its requests session has a per-read timeout
only (a Prometheus that drips its answer hung the command) and urllib3's retry warnings on stderr.

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
from specops.metrics.derive import PREFIX_COUNTERS, fill_rates, set_tpot
from specops.metrics.types import Measurement

BY = "specops_deployment, model_name"
BAD_FIX = "check what Prometheus scrapes for it (these series cannot come from a vLLM engine)"


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
    # the four prefix-cache counters in one query, told apart by a `counter` label (increase() drops __name__)
    "prefix_cache": f"sum by ({BY}, counter) (" + " or ".join(
        f'label_replace(increase({_sel(n + "_total")}[$w]), "counter", "{n}", "__name__", ".*")'
        for n in ("prefix_cache_queries", "prefix_cache_hits", "external_prefix_cache_queries",
                  "external_prefix_cache_hits")) + ")",
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
        from specops.metrics.http import redact_url

        raise InputError(f'Prometheus URL "{redact_url(url)}" is not an http(s) URL', "use e.g. http://prometheus:9090")
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
    """PromQL reads for all deployments at once. Every query is one bounded HTTP exchange
    (specops.metrics.http.exchange: ``timeout`` seconds overall, connect to last byte, and a body
    cap); ``measure`` also bounds its queries together (``budget_s``). No retries: the monitor's loop
    retries with backoff, and a one-shot command says what failed."""

    def __init__(self, url: str, token: str | None = None, verify: bool | str = True, timeout: float = 10.0,
                 budget_s: float = 30.0):
        from specops.secrets import url_credentials

        found = url_credentials(url)
        if found:  # the URL is echoed in errors, reports and validation rows: no secret may ride in it
            raise InputError(f"the Prometheus URL contains credentials ({', '.join(found)})",
                             "remove them from the URL and put a bearer token in SPECOPS_PROMETHEUS_TOKEN "
                             "(or the file named by prometheus_token_file)")
        self.url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.verify, self.timeout, self.budget_s = verify, timeout, budget_s
        self._until: float | None = None  # monotonic end of the current measure()'s budget
        self.bad: dict[str, str] = {}
        """Groups the last ``measure`` left out, with what was wrong with their samples (the others
        are still measured: one absurd series does not blind the fleet)."""

    @classmethod
    def from_settings(cls, url_flag: str | None = None) -> PrometheusReader:
        return cls(**prometheus_settings(url_flag))

    def query(self, promql: str, at: datetime | None = None) -> list[dict]:
        """One instant query: its result, a list of ``{metric, value}`` samples (MeasurementError otherwise)."""
        import time

        from specops.metrics.http import exchange

        deadline = self.timeout
        if self._until is not None:
            deadline = min(deadline, self._until - time.monotonic())
            if deadline <= 0:
                raise MeasurementError(f"Prometheus at {self.url} did not answer the {len(QUERIES)} queries of one "
                                       f"measurement within {self.budget_s:g}s",
                                       "check the Prometheus server's load and the network to it")
        params = {"query": promql}
        if at:
            params["time"] = f"{at.timestamp():.3f}"
        reach = "check --prometheus-url / SPECOPS_PROMETHEUS_URL and that it is running"
        if self.verify is not False and self.url.startswith("https://"):
            reach += ("; for a private CA set prometheus_ca_file to its bundle (prometheus_insecure: true "
                      "for a test server)")
        answer = exchange("GET", self.url + "/api/v1/query", deadline_s=deadline, headers=self._headers,
                          params=params, verify=self.verify, fix=reach,
                          slow_fix="a healthy Prometheus answers an instant query in well under a second",
                          who=f"Prometheus at {self.url}")
        from specops.errors import ConfigFileError
        from specops.jsonfile import parse_json_text

        try:
            data = parse_json_text(answer.body, "Prometheus", max_bytes=len(answer.body) + 1)
        except ConfigFileError:
            data = None
        if answer.status in (401, 403):
            raise MeasurementError(f"Prometheus at {self.url} refused the query (HTTP {answer.status})",
                                   "check SPECOPS_PROMETHEUS_TOKEN / the token file")
        if isinstance(data, dict) and data.get("status") == "error":
            kind = str(data.get("errorType", "error"))[:40]
            why = str(data.get("error", ""))[:160]
            raise MeasurementError(f"Prometheus at {self.url} refused the query (HTTP {answer.status}, {kind}: "
                                   f"{why or 'no reason given'})",
                                   "check the Prometheus version (2.x or later) and the URL")
        if answer.status != 200:
            raise MeasurementError(f"Prometheus at {self.url} answered HTTP {answer.status}"
                                   + ("" if isinstance(data, dict) else " and not JSON"),
                                   "point --prometheus-url at the Prometheus server root")
        result = data.get("data") if isinstance(data, dict) and data.get("status") == "success" else None
        if not isinstance(result, dict):
            raise MeasurementError(f"{self.url} did not answer like a Prometheus API (not a JSON object with "
                                   "status \"success\" and data)",
                                   "point --prometheus-url at the Prometheus server root")
        kind, rows = result.get("resultType"), result.get("result")
        if kind != "vector" or not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            got = f"a {kind}" if kind != "vector" else "a result that is not a list of samples"
            raise MeasurementError(f"Prometheus at {self.url} answered {str(got)[:40]} to an instant query "
                                   "(expected a vector: a list of {metric, value} samples)",
                                   "point --prometheus-url at the Prometheus server root (not a proxy that "
                                   "rewrites answers)")
        return rows

    def ping(self) -> None:
        self.query("vector(1)")

    def measure(self, start: datetime, end: datetime) -> dict[str, Measurement]:
        """Measurements of every group over [start, end] (14 queries, whatever the fleet size); a
        group with a malformed, NaN or infinite sample is left out and named in ``self.bad``."""
        seconds = max(1, math.ceil((end - start).total_seconds()))
        window = f"{seconds}s"
        import time

        self._until = time.monotonic() + self.budget_s
        try:
            results = {key: self.query(q.replace("$w", window), at=end) for key, q in QUERIES.items()}
        finally:
            self._until = None
        from specops.metrics.parse import position

        groups: dict[str, dict] = {}
        self.bad = {}
        for key, rows in results.items():
            for row in rows:
                labels = row.get("metric")
                if not isinstance(labels, dict):
                    raise MeasurementError(f"Prometheus at {self.url} answered a sample without labels for {key} "
                                           f"({str(row)[:120]})", "check the Prometheus server; a sample is "
                                           "{metric: {...}, value: [time, \"number\"]}")
                name, label = _group(labels)
                if name in self.bad:
                    continue
                try:
                    value = float(row["value"][1])
                    pos = position(labels.get("position", "0")) if key == "per_pos" else None
                    le = float(labels.get("le", "+Inf")) if key == "tpot_bucket" else None
                except (KeyError, TypeError, ValueError, IndexError):
                    self.bad[name] = (f"Prometheus at {self.url} answered a malformed sample for {key} of "
                                      f"{name or '?'} ({str(row)[:120]}; a sample is "
                                      '{metric: {...}, value: [time, "number"]})')
                    continue
                if key == "per_pos" and pos is None:
                    continue  # not a draft position (0-63)
                if key == "prefix_cache" and labels.get("counter") not in PREFIX_COUNTERS:
                    continue
                if math.isnan(value) or (math.isinf(value) and key != "tpot_bucket"):
                    self.bad[name] = (f"Prometheus at {self.url} answered {value} for {key} of {name or '?'} "
                                      "(an increase or a gauge of a vLLM engine is a finite number)")
                    continue
                slot = groups.setdefault(name, {"label": label, "per_pos": {}, "tpot_bucket": {}})
                if key == "per_pos":
                    slot["per_pos"][pos] = value
                elif key == "tpot_bucket":
                    slot["tpot_bucket"][le] = value
                elif key == "prefix_cache":
                    slot[labels["counter"]] = value
                else:
                    slot[key] = value
        for name in self.bad:
            groups.pop(name, None)
        if not groups and self.bad:
            raise MeasurementError(next(iter(self.bad.values())), BAD_FIX)
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
                "requests_finished", "kv_cache_usage", "requests_running", "requests_waiting", *PREFIX_COUNTERS):
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
