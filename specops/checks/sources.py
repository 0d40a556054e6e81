"""Where checks get their facts: live metric windows, the registry, the engines themselves.

Everything is reached through :class:`Sources`, built once per run. Each source is a plain callable
or object handed in, so tests pass real captured data (or a real registry file) without patching;
:func:`default_sources` wires the real ones (Prometheus or ``/metrics``, the registry, HTTP
completions). A source that cannot answer raises a :class:`~specops.errors.SpecopsError`: the check
becomes ``error`` (exit 2), never a pass.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from specops.errors import InputError, MeasurementError
from specops.progress import Progress, waiting

Windows = Callable[[float, int], list]  # (window_s, count) -> list[specops.metrics.Measurement]

RUN_DEADLINE_S = 120.0
"""No metric source is started more than this long after a validation run began (the windows
themselves last ``profile.window_s``; each exchange has its own bounded deadline)."""
Complete = Callable[[str, str | None, list[str], int, dict], list[dict]]


@dataclass
class Sources:
    """The facts one validation run may use (all optional; a check that needs a missing one errors)."""

    deployment: dict
    windows: Windows | None = None
    registry: Any = None
    baseline_endpoint: str | None = None
    complete: Complete | None = None
    bench_events: list[dict] | None = None
    now: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    deadline_s: float = RUN_DEADLINE_S
    _cache: dict = field(default_factory=dict)
    _started: float = field(default_factory=time.monotonic)
    _windows_error: Exception | None = None

    def metric_windows(self, window_s: float, count: int) -> list:
        """The metric windows every metric check of the run shares. A source that failed fails every
        later check at once with the same error (a slow or dead peer costs its timeout once per run,
        not once per check), and none starts after the run's deadline (:data:`RUN_DEADLINE_S`)."""
        key = ("windows", window_s, count)
        if key not in self._cache:
            if self.windows is None:
                raise MeasurementError("no metrics source for this deployment (no Prometheus URL and no endpoint)",
                                       "pass --prometheus-url (or set SPECOPS_PROMETHEUS_URL), or register the "
                                       "deployment's endpoint")
            if self._windows_error is not None:
                raise self._windows_error
            if time.monotonic() - self._started > self.deadline_s:
                raise MeasurementError(f"the run's deadline ({self.deadline_s:g}s) passed before the metrics were read",
                                       "check that the metrics source answers promptly, then run again")
            try:
                self._cache[key] = self.windows(window_s, count)
            except (MeasurementError, InputError) as exc:
                self._windows_error = exc
                raise
        return self._cache[key]

    def need_registry(self):
        if self.registry is None:
            raise InputError("this check needs the registry", "run it with the registry available (--db)")
        return self.registry


def prometheus_windows(url: str | None, groups: list[str], *, end: Callable[[], datetime] | None = None) -> Windows:
    """``count`` consecutive sub-windows of the last ``window_s`` seconds, from PromQL."""
    from specops.metrics.prometheus import PrometheusReader

    def windows(window_s: float, count: int) -> list:
        reader = PrometheusReader.from_settings(url)
        reader.ping()  # one clear "cannot reach Prometheus" before any window query
        stop = end() if end else datetime.now(timezone.utc)
        step = window_s / count
        out = []
        for i in range(count):
            a = stop - timedelta(seconds=window_s - i * step)
            try:
                found = reader.measure(a, a + timedelta(seconds=step))
            except MeasurementError as exc:
                if "holds no vllm" in exc.message:
                    continue  # no series in this sub-window: an empty window, not an outage
                raise
            for g in groups:
                if g and g in found:
                    out.append(found[g])
                    break
        return out
    return windows


def endpoint_windows(endpoint: str, served_name: str | None, sleep=time.sleep,
                     progress: Progress | None = None) -> Windows:
    """Without Prometheus: scrape ``/metrics`` ``count + 1`` times over ``window_s`` seconds (live). A
    sample longer than a few seconds reports each sub-window to ``progress`` with the time left."""
    from specops.metrics import delta, pick_group, scrape

    def windows(window_s: float, count: int) -> list:
        snaps = [scrape(endpoint)]
        group = pick_group(snaps[0], served_name)
        step = window_s / count
        for i in range(count):
            if progress and window_s >= 5:
                progress(waiting(f"{endpoint}/metrics samples (window {i + 1} of {count})", i * step, window_s))
            sleep(step)
            snaps.append(scrape(endpoint))
        if progress and window_s >= 5:
            progress(f"sampled {endpoint}/metrics for {window_s:g}s ({count} windows)")
        return [delta(a, b, group) for a, b in zip(snaps, snaps[1:], strict=False)]
    return windows


def http_complete(endpoint: str, model: str | None, prompts: list[str], max_tokens: int,
                  headers: dict, deadline_s: float = 600.0) -> list[dict]:
    """Greedy completions (temperature 0) with token ids where the server returns them; each
    request within ``deadline_s`` overall (specops.metrics.http.exchange), a miss is could-not-evaluate."""
    from specops.engines.client import VllmClient, completion_body

    client = VllmClient(endpoint, headers, deadline_s)
    out = []
    if model is None:
        model = client.only_model()
    for p in prompts:
        body = completion_body(model, p, max_tokens, seed=0, logprobs=1, return_tokens_as_token_ids=True)
        resp = client.post_completion(body)
        if resp.status == 400:  # an older server without token-id logprobs: compare text
            body = {k: v for k, v in body.items() if k not in ("logprobs", "return_tokens_as_token_ids")}
            resp = client.post_completion(body)
        choice = client.parse_completion(resp)["choices"][0]
        logprobs = choice.get("logprobs")
        tokens = logprobs.get("tokens") if isinstance(logprobs, dict) else None
        out.append({"text": str(choice.get("text", "")), "tokens": tokens})
    return out


def deployment_facts(row: Any) -> dict:
    """A registry deployment row as the plain dict checks read (γ and schedule from the argv too)."""
    d = row.model_dump(mode="json") if hasattr(row, "model_dump") else dict(row)
    sc = _speculative_config(d)
    if sc:
        d.setdefault("speculative_config", sc)
        if not d.get("num_speculative_tokens") and sc.get("num_speculative_tokens"):
            d["num_speculative_tokens"] = sc["num_speculative_tokens"]
    return d


def speculative_config(row: Any) -> dict | None:
    """The --speculative-config a registry deployment row records (engine_config, else its argv)."""
    return _speculative_config(row.model_dump(mode="json") if hasattr(row, "model_dump") else dict(row))


def _speculative_config(d: dict) -> dict | None:
    cfg = d.get("engine_config") or {}
    for key in ("speculative_config", "speculative"):
        if isinstance(cfg.get(key), dict):
            return cfg[key]
    argv = d.get("argv_redacted") or []
    for i, a in enumerate(argv):
        text = None
        if a in ("--speculative-config", "-sc") and i + 1 < len(argv):
            text = argv[i + 1]
        elif a.startswith("--speculative-config="):
            text = a.split("=", 1)[1]
        if text:
            from specops.errors import ConfigFileError
            from specops.jsonfile import parse_json_text

            try:
                sc = parse_json_text(text, "--speculative-config")
            except ConfigFileError:
                return None
            return sc if isinstance(sc, dict) else None
    return None


def auth_headers(deployment: dict) -> dict:
    import os

    var = deployment.get("api_key_env")
    if not var:
        return {}
    value = os.environ.get(var)
    if not value:
        raise InputError(f"environment variable {var} (the deployment's API key) is not set",
                         f"export {var}=... before running")
    return {"Authorization": f"Bearer {value}"}


def bench_events(registry: Any, deployment: str) -> list[dict]:
    """Stored ``bench`` events of a deployment (newest first), as plain dicts."""
    return [e.model_dump(mode="json") for e in registry.events(subject=deployment, kind="bench", limit=50)]


def default_sources(deployment: str, *, prometheus_url: str | None = None, baseline_endpoint: str | None = None,
                    registry: Any = None, progress: Progress | None = None) -> Sources:
    """Real sources for a registered deployment."""
    from specops.registry import open_registry
    from specops.settings import setting

    reg = registry or open_registry()
    facts = deployment_facts(reg.get_deployment(deployment))
    url = setting("prometheus_url", prometheus_url)
    if url:
        windows = prometheus_windows(str(url), [deployment, facts.get("served_model_name") or ""])
    elif facts.get("endpoint"):
        windows = endpoint_windows(facts["endpoint"], facts.get("served_model_name"), progress=progress)
    else:
        windows = None
    baseline = baseline_endpoint or (facts.get("labels") or {}).get("baseline_endpoint")
    return Sources(deployment=facts, windows=windows, registry=reg, baseline_endpoint=baseline,
                   complete=http_complete)
