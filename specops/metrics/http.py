"""One HTTP exchange with an overall deadline and a body cap, for every peer specops talks to.

httpx's ``timeout`` is per network operation: a server that sends its headers and then one byte
every few seconds never trips it, and a command waits for as long as the server likes. ``exchange``
runs the request in a daemon thread and waits for it at most ``deadline_s`` (connect, headers and
the whole body together); a miss, an unreachable server or a body over ``max_bytes`` is a
``MeasurementError`` (exit 2, "could not evaluate"), never a hang. The abandoned thread is a daemon
and stops at its next read (each read times out at the deadline too), so neither the process exit
nor a signal waits for it.
"""

from __future__ import annotations

import functools
import threading
import time
from dataclasses import dataclass

from specops.errors import MeasurementError
from specops.secrets import redact_url  # noqa: F401 - re-exported: messages redact URLs through it

MAX_BODY = 16 * 1024 * 1024  # a vLLM /metrics page is tens of KiB; a /v1/models or PromQL answer less


@functools.lru_cache(maxsize=1)
def _default_context():
    import ssl

    import certifi

    return ssl.create_default_context(cafile=certifi.where())


@dataclass
class Answer:
    status: int
    body: bytes
    content_type: str = ""

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


def exchange(method: str, url: str, *, deadline_s: float = 10.0, headers: dict | None = None,
             json: object = None, params: dict | None = None, verify: bool | str = True,
             max_bytes: int = MAX_BODY, fix: str = "check that the server is running and the URL/port is right",
             slow_fix: str = "a healthy server answers well within this", who: str | None = None) -> Answer:
    """``method url`` within ``deadline_s`` overall and ``max_bytes`` of body; ``MeasurementError``
    when it cannot be reached, misses the deadline or sends too much. Messages name the peer as
    ``who`` (e.g. "Prometheus at URL"), else by its URL, always redacted."""
    shown = who or redact_url(url).split("?", 1)[0]
    box: dict = {}
    cancelled = threading.Event()

    if verify is True:
        verify = _default_context()  # built once: loading the CA bundle costs ~10-50 ms a client
    elif isinstance(verify, str):  # a CA bundle path (httpx 0.28 wants an SSL context for it)
        import ssl

        try:
            verify = ssl.create_default_context(cafile=verify)
        except (OSError, ssl.SSLError) as exc:
            raise MeasurementError(f"cannot read the CA bundle {verify} for {shown} ({exc.__class__.__name__})",
                                   "fix prometheus_ca_file (a PEM file of the CA certificates)") from None

    def work() -> None:
        import httpx

        try:
            with httpx.Client(timeout=httpx.Timeout(deadline_s), verify=verify, follow_redirects=False) as client, \
                    client.stream(method, url, headers=headers or {}, json=json, params=params) as resp:
                chunks, size = [], 0
                for chunk in resp.iter_bytes():
                    size += len(chunk)
                    box["size"] = size
                    if size > max_bytes:
                        box["error"] = MeasurementError(f"{shown} sent more than {max_bytes // (1024 * 1024)} MiB",
                                                        fix)
                        return
                    if cancelled.is_set():
                        return
                    chunks.append(chunk)
                box["answer"] = Answer(resp.status_code, b"".join(chunks), resp.headers.get("content-type", ""))
        except httpx.HTTPError as exc:
            box["error"] = exc
        except Exception as exc:  # noqa: BLE001 - handed to the caller's thread, raised there
            box["error"] = exc

    t0 = time.monotonic()
    worker = threading.Thread(target=work, daemon=True, name="specops-http")
    worker.start()
    worker.join(deadline_s)
    if worker.is_alive():
        cancelled.set()
        got = box.get("size")
        so_far = f" ({got} bytes so far)" if got else " (no answer)"
        raise MeasurementError(f"{shown} did not finish its answer within {deadline_s:g}s{so_far}",
                               f"{fix}; {slow_fix}")
    if "answer" in box:
        return box["answer"]
    exc = box.get("error")
    if isinstance(exc, MeasurementError):
        raise exc
    import httpx

    if isinstance(exc, httpx.TimeoutException) or time.monotonic() - t0 >= deadline_s:
        raise MeasurementError(f"{shown} did not answer within {deadline_s:g}s", f"{fix}; {slow_fix}")
    if isinstance(exc, httpx.ConnectError) and "CERTIFICATE" in str(exc).upper():
        raise MeasurementError(f"TLS verification failed for {shown}", fix)
    detail = str(exc).replace(url, redact_url(url))[:120] if exc is not None else ""
    raise MeasurementError(f"cannot reach {shown} ({exc.__class__.__name__}: {detail or 'no answer'})", fix)
