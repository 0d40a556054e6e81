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


MAX_BODY = 16 * 1024 * 1024  # a vLLM /metrics page is tens of KiB; a /v1/models answer less


def get_bounded(url: str, *, deadline_s: float = 10.0, headers: dict | None = None,
                max_bytes: int = MAX_BODY) -> tuple[int, bytes]:
    """GET ``url`` within one overall deadline (connect, headers and the whole body; a server that
    drips bytes cannot hold it open) and a body size cap. Returns (status, body); MeasurementError when
    the server cannot be reached, misses the deadline or sends too much."""
    import time

    import httpx

    t0 = time.monotonic()
    fix = "check that the engine is running and the URL/port is right"
    try:
        with httpx.stream("GET", url, timeout=httpx.Timeout(deadline_s / 2), headers=headers or {},
                          follow_redirects=False) as resp:
            chunks, size = [], 0
            for chunk in resp.iter_bytes():
                size += len(chunk)
                if size > max_bytes:
                    raise MeasurementError(f"{url} sent more than {max_bytes // (1024 * 1024)} MiB", fix)
                if time.monotonic() - t0 > deadline_s:
                    raise MeasurementError(f"{url} did not finish its answer within {deadline_s:g}s "
                                           f"({size} bytes so far)", fix + "; a healthy engine answers in milliseconds")
                chunks.append(chunk)
            return resp.status_code, b"".join(chunks)
    except httpx.HTTPError as exc:
        if isinstance(exc, httpx.TimeoutException) and time.monotonic() - t0 > deadline_s / 2:
            raise MeasurementError(f"{url} did not answer within {deadline_s:g}s", fix) from None
        raise MeasurementError(f"cannot reach {url} ({exc.__class__.__name__}: {str(exc)[:120] or 'no answer'})",
                               fix) from None


def fetch_text(endpoint: str, timeout: float = 10.0, headers: dict | None = None) -> str:
    url = metrics_url(endpoint)
    status, body = get_bounded(url, deadline_s=timeout, headers=headers)
    if status != 200:
        raise MeasurementError(f"{url} answered HTTP {status}",
                               "point --endpoint at a vLLM server; /metrics must answer 200")
    return body.decode("utf-8", errors="replace")


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
