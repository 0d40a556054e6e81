"""A small async streaming client for vLLM's OpenAI-compatible ``/v1/completions``.

Why not guidellm / aiperf / ``vllm bench serve``: they pull heavy dependencies (``vllm bench`` needs
vLLM itself on the client), and none exposes what the cross-check needs — the token count of every
streamed chunk next to the server's own counters. With ``stream_options.include_usage`` and
``continuous_usage_stats`` vLLM puts the cumulative ``completion_tokens`` in every chunk, so the client
knows exactly how many tokens each chunk carried, when the first and the last arrived (TTFT, TPOT as
vLLM defines it: decode time / (tokens − 1)), and, with ``--per-request-spec-decode-metrics``, the
request's own acceptance from the final chunk.
"""

from __future__ import annotations

import asyncio
import time

from pydantic import Field

from specops.errors import ConfigFileError
from specops.jsonfile import parse_json_text
from specops.models import Strict


class RequestResult(Strict):
    """What the client saw for one request."""


    index: int = Field(description="Request number in the run.")
    ok: bool = Field(description="Finished with HTTP 200 and a usage chunk.")
    error: str | None = Field(None, description="Why it failed.")
    sent_at: float = Field(0.0, description="Seconds from run start when it was sent.")
    prompt_tokens: int | None = Field(None, description="usage.prompt_tokens.")
    completion_tokens: int | None = Field(None, description="usage.completion_tokens of the final chunk.")
    chunk_tokens: int = Field(0, description="Sum of per-chunk token counts (from continuous usage).")
    content_chunks: int = Field(0, description="Chunks that carried at least one token.")
    ttft_s: float | None = Field(None, description="Time to first token (s).")
    tpot_s: float | None = Field(None, description="(last token − first token) / (tokens − 1) (s).")
    e2e_s: float | None = Field(None, description="Send to last byte (s).")
    spec: dict | None = Field(None, description="Per-request speculative metrics from the server, if offered.")


def completion_body(model: str, prompt: str, max_tokens: int, stream: bool = True) -> dict:
    """A benchmark request: greedy, ``ignore_eos`` (vLLM extension: fixed output length, comparable A/B
    runs), streamed with usage (specops.engines.client.completion_body builds it)."""
    from specops.engines.client import completion_body as body

    if stream:
        return body(model, prompt, max_tokens, stream=True, ignore_eos=True,
                    stream_options={"include_usage": True, "continuous_usage_stats": True})
    return body(model, prompt, max_tokens, ignore_eos=True)


def _deadline(client) -> float | None:
    """The overall deadline of one request: the client's timeout, which httpx applies per read only
    (a server that drips bytes would otherwise hold a request, and the run, for as long as it likes)."""
    timeout = getattr(client, "timeout", None)
    value = getattr(timeout, "read", None)
    return float(value) if isinstance(value, (int, float)) else None


async def _bounded(call, client, index: int, sent_at: float) -> RequestResult:
    deadline = _deadline(client)
    try:
        return await asyncio.wait_for(call, deadline)
    except asyncio.TimeoutError:
        return RequestResult(index=index, ok=False, sent_at=sent_at,
                             error=f"no complete answer within {deadline:g}s (the request's overall deadline)")


async def plain_completion(client, url: str, body: dict, index: int, sent_at: float,
                           headers: dict | None = None) -> RequestResult:
    """One non-streaming completion within the client's timeout overall (see ``_plain_completion``)."""
    return await _bounded(_plain_completion(client, url, body, index, sent_at, headers), client, index, sent_at)


async def stream_completion(client, url: str, body: dict, index: int, sent_at: float,
                            headers: dict | None = None) -> RequestResult:
    """One streaming completion within the client's timeout overall (see ``_stream_completion``)."""
    return await _bounded(_stream_completion(client, url, body, index, sent_at, headers), client, index, sent_at)


async def _plain_completion(client, url: str, body: dict, index: int, sent_at: float,
                            headers: dict | None = None) -> RequestResult:
    """One non-streaming completion: end-to-end time and usage only (no TTFT/TPOT). The server does
    one response per request instead of one chunk per token, so on a small box the client and the API
    server take far less CPU from the engine. Never raises for server/network errors."""
    import httpx

    res = RequestResult(index=index, ok=False, sent_at=sent_at)
    t0 = time.perf_counter()
    try:
        resp = await client.post(url, json=body, headers=headers or {})
        if resp.status_code != 200:
            res.error = f"HTTP {resp.status_code}: {_error_message(resp.text)}"
            return res
        data = resp.json()
    except (httpx.HTTPError, ConfigFileError, AttributeError, TypeError) as exc:  # a peer's malformed answer
        res.error = f"{exc.__class__.__name__}: {str(exc)[:160]}"
        return res
    res.e2e_s = time.perf_counter() - t0
    usage = data.get("usage") or {}
    res.prompt_tokens, res.completion_tokens = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if res.completion_tokens is None:
        res.error = "no usage in the response"
        return res
    res.chunk_tokens, res.content_chunks = res.completion_tokens, 1  # one "chunk": the whole response
    res.ok = True
    return res


async def _stream_completion(client, url: str, body: dict, index: int, sent_at: float,
                             headers: dict | None = None) -> RequestResult:
    """Send one streaming completion and time it. Never raises for server/network errors."""
    import httpx

    res = RequestResult(index=index, ok=False, sent_at=sent_at)
    t0 = time.perf_counter()
    first = last = None
    seen = 0
    try:
        async with client.stream("POST", url, json=body, headers=headers or {}) as resp:
            if resp.status_code != 200:
                text = (await resp.aread()).decode(errors="replace")
                res.error = f"HTTP {resp.status_code}: {_error_message(text)}"
                return res
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                now = time.perf_counter()
                chunk = parse_json_text(data, "a streamed chunk", max_bytes=len(data) + 1)
                if not isinstance(chunk, dict):
                    raise ConfigFileError("a streamed chunk is not a JSON object", "point at a vLLM server")
                usage = chunk.get("usage") or {}
                total = usage.get("completion_tokens")
                has_text = any(c.get("text") for c in chunk.get("choices") or [])
                if total is not None and total > seen:
                    res.chunk_tokens += total - seen
                    res.content_chunks += 1
                    seen = total
                    first = first if first is not None else now
                    last = now
                elif total is None and has_text:  # server without continuous usage: count chunks
                    res.content_chunks += 1
                    first = first if first is not None else now
                    last = now
                if usage and not chunk.get("choices"):  # the final usage chunk
                    res.prompt_tokens = usage.get("prompt_tokens")
                    res.completion_tokens = usage.get("completion_tokens")
                    spec = (chunk.get("metrics") or {}).get("speculative_decoding")
                    if spec:
                        res.spec = spec
    except (httpx.HTTPError, ConfigFileError, AttributeError, TypeError) as exc:  # a peer's malformed answer
        res.error = f"{exc.__class__.__name__}: {str(exc)[:160]}"
        return res
    end = time.perf_counter()
    res.e2e_s = end - t0
    if first is not None:
        res.ttft_s = first - t0
    n = res.completion_tokens
    if n and n > 1 and first is not None and last is not None:
        res.tpot_s = (last - first) / (n - 1)
    if res.completion_tokens is None:
        res.error = "no usage chunk in the stream (server too old for stream_options?)"
        return res
    res.ok = True
    return res


def _error_message(text: str) -> str:
    try:
        data = parse_json_text(text, "answer", max_bytes=len(text) + 1)
        msg = data.get("message") or (data.get("error") or {}).get("message") or text
    except (ConfigFileError, AttributeError):
        msg = text
    return " ".join(str(msg).split())[:200]
