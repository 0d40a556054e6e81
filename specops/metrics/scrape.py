"""Read a vLLM ``/metrics`` endpoint directly (no Prometheus needed)."""

from __future__ import annotations

from datetime import datetime, timezone
from urllib.parse import urlsplit, urlunsplit

from specops.errors import InputError, MeasurementError
from specops.metrics.http import MAX_BODY, exchange, redact_url
from specops.metrics.parse import parse_metrics_text
from specops.metrics.types import Snapshot


def base_url(endpoint: str) -> str:
    """``http://h:8000``, ``http://h:8000/v1`` or ``.../metrics`` -> ``http://h:8000`` (credentials refused)."""
    endpoint = (endpoint or "").strip()
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InputError(f'endpoint "{redact_url(endpoint)}" is not an http(s) URL',
                         "pass the engine's base URL, e.g. http://127.0.0.1:8000")
    from specops.secrets import url_credentials

    found = url_credentials(endpoint)
    if found:
        raise InputError(f"the endpoint URL contains credentials ({', '.join(found)})",
                         "remove them from the URL; pass an API key by environment variable (--api-key-env)")
    path = parts.path.rstrip("/")
    for suffix in ("/metrics", "/v1"):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def metrics_url(endpoint: str) -> str:
    return base_url(endpoint) + "/metrics"


def get_bounded(url: str, *, deadline_s: float = 10.0, headers: dict | None = None,
                max_bytes: int = MAX_BODY) -> tuple[int, bytes]:
    """GET ``url`` within one overall deadline (connect, headers and the whole body; a server that
    drips bytes cannot hold it open) and a body size cap (specops.metrics.http.exchange). Returns
    (status, body); MeasurementError when the server cannot be reached, misses the deadline or sends
    too much."""
    a = exchange("GET", url, deadline_s=deadline_s, headers=headers, max_bytes=max_bytes,
                 fix="check that the engine is running and the URL/port is right",
                 slow_fix="a healthy engine answers in milliseconds")
    return a.status, a.body


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
    """Async scrape with a caller's ``httpx.AsyncClient`` (used during benchmark runs), within one
    overall deadline of ``timeout`` seconds and the body cap."""
    import asyncio

    import httpx

    url = metrics_url(endpoint)
    fix = "check that the engine is running and the URL/port is right"

    async def get() -> tuple[int, bytes]:
        async with client.stream("GET", url, timeout=timeout) as resp:
            body = bytearray()
            async for chunk in resp.aiter_bytes():
                body += chunk
                if len(body) > MAX_BODY:
                    raise MeasurementError(f"{url} sent more than {MAX_BODY // (1024 * 1024)} MiB", fix)
            return resp.status_code, bytes(body)

    try:
        status, body = await asyncio.wait_for(get(), timeout)
    except asyncio.TimeoutError:
        raise MeasurementError(f"{url} did not finish its answer within {timeout:g}s",
                               fix + "; a healthy engine answers in milliseconds") from None
    except httpx.HTTPError as exc:
        raise MeasurementError(f"cannot reach {url} ({exc.__class__.__name__})", fix) from None
    if status != 200:
        raise MeasurementError(f"{url} answered HTTP {status}", "point at a vLLM server's base URL")
    return parse_metrics_text(body.decode("utf-8", errors="replace"), source=url,
                              taken_at=datetime.now(timezone.utc))
