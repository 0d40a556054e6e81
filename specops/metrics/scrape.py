"""Read a vLLM ``/metrics`` endpoint directly (no Prometheus needed)."""

from __future__ import annotations

from datetime import datetime, timezone
from urllib.parse import urlsplit, urlunsplit

from specops.errors import InputError, MeasurementError
from specops.metrics.parse import parse_metrics_text
from specops.metrics.types import Snapshot


def base_url(endpoint: str) -> str:
    """``http://h:8000``, ``http://h:8000/v1`` or ``.../metrics`` -> ``http://h:8000`` (credentials refused)."""
    endpoint = (endpoint or "").strip()
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InputError(f'endpoint "{endpoint}" is not an http(s) URL',
                         "pass the engine's base URL, e.g. http://127.0.0.1:8000")
    if parts.username or parts.password:
        raise InputError("the endpoint URL contains credentials",
                         "remove them from the URL; pass an API key by environment variable (--api-key-env)")
    path = parts.path.rstrip("/")
    for suffix in ("/metrics", "/v1"):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def metrics_url(endpoint: str) -> str:
    return base_url(endpoint) + "/metrics"


def fetch_text(endpoint: str, timeout: float = 10.0, headers: dict | None = None) -> str:
    import httpx

    url = metrics_url(endpoint)
    try:
        resp = httpx.get(url, timeout=timeout, headers=headers or {}, follow_redirects=False)
    except httpx.HTTPError as exc:
        raise MeasurementError(f"cannot reach {url} ({exc.__class__.__name__}: {str(exc)[:120] or 'no answer'})",
                               "check that the engine is running and the URL/port is right") from None
    if resp.status_code != 200:
        raise MeasurementError(f"{url} answered HTTP {resp.status_code}",
                               "point --endpoint at a vLLM server; /metrics must answer 200")
    return resp.text


def scrape(endpoint: str, timeout: float = 10.0, headers: dict | None = None) -> Snapshot:
    """Fetch and parse ``/metrics`` now."""
    text = fetch_text(endpoint, timeout, headers)
    return parse_metrics_text(text, source=metrics_url(endpoint), taken_at=datetime.now(timezone.utc))


async def ascrape(client, endpoint: str, timeout: float = 10.0) -> Snapshot:
    """Async scrape with a caller's ``httpx.AsyncClient`` (used during benchmark runs)."""
    import httpx

    url = metrics_url(endpoint)
    try:
        resp = await client.get(url, timeout=timeout)
    except httpx.HTTPError as exc:
        raise MeasurementError(f"cannot reach {url} ({exc.__class__.__name__})",
                               "check that the engine is running and the URL/port is right") from None
    if resp.status_code != 200:
        raise MeasurementError(f"{url} answered HTTP {resp.status_code}", "point at a vLLM server's base URL")
    return parse_metrics_text(resp.text, source=url, taken_at=datetime.now(timezone.utc))
