"""The vLLM HTTP client, defined once: ``/v1/models``, ``/v1/completions`` and ``/v1/chat/completions``
of an OpenAI-compatible vLLM server, each request within one overall deadline and a 16 MiB body cap
(:func:`specops.metrics.http.exchange`). A server that does not answer like vLLM is a MeasurementError
with a fix, never a KeyError. The benchmark's async streaming load generator (specops.benchmark.client)
builds its request bodies with :func:`completion_body` from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specops.errors import MeasurementError

COMPLETIONS, CHAT, MODELS = "/v1/completions", "/v1/chat/completions", "/v1/models"
"""vLLM's OpenAI-compatible routes (the async load generator and trainers' CLIs use them via :func:`route`)."""


def route(endpoint: str, path: str) -> str:
    """``endpoint``'s base URL joined with one of the routes above."""
    from specops.metrics import base_url

    return base_url(endpoint) + path


def completion_body(model: str, prompt: str, max_tokens: int, *, temperature: float = 0.0, stream: bool = False,
                    **extra) -> dict:
    """A /v1/completions request body (greedy unless ``temperature`` says otherwise)."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": temperature}
    if stream:
        body["stream"] = True
    body.update(extra)
    return body


@dataclass
class VllmClient:
    """One vLLM server. ``headers`` carries the API key (``Authorization: Bearer ...``) when it needs one."""

    endpoint: str
    headers: dict = field(default_factory=dict)
    deadline_s: float = 600.0

    @property
    def url(self) -> str:
        from specops.metrics import base_url

        return base_url(self.endpoint)

    def _shown(self) -> str:
        from specops.metrics.http import redact_url

        return redact_url(self.url)

    def post_completion(self, body: dict):
        """The raw answer of POST /v1/completions (for callers that retry on a status)."""
        return self.post(COMPLETIONS, body)

    def post(self, path: str, body: dict, *, deadline_s: float | None = None, fix: str | None = None):
        """The raw answer (status, body) of a POST; transport failures are MeasurementErrors."""
        from specops.metrics.http import exchange

        return exchange("POST", self.url + path, json=body, headers=self.headers,
                        deadline_s=deadline_s or self.deadline_s,
                        fix=fix or "check that the engine is running and the URL is right",
                        slow_fix="lower max_tokens or check the engine's load")

    def _json(self, path: str, resp, what: str) -> dict:
        if resp.status != 200:
            fix = ("pass the API key (--api-key-env VAR)" if resp.status == 401 else
                   "check the endpoint, the served model name and the API key")
            raise MeasurementError(f"{self._shown()}{path} answered HTTP {resp.status}", fix)
        from specops.errors import ConfigFileError
        from specops.jsonfile import parse_json_text

        try:
            data = parse_json_text(resp.body, f"{self._shown()}{path}", max_bytes=len(resp.body) + 1)
            if not isinstance(data, dict):
                raise TypeError("not an object")
            return data
        except (ConfigFileError, TypeError):
            raise MeasurementError(f"{self._shown()}{path} did not answer like an OpenAI-compatible server ({what})",
                                   "point the endpoint at a vLLM server's base URL") from None

    def models(self, deadline_s: float = 10.0) -> list[dict]:
        """``/v1/models``' entries (each with an ``id``; vLLM adds ``max_model_len``)."""
        from specops.metrics.http import exchange

        resp = exchange("GET", self.url + MODELS, headers=self.headers, deadline_s=deadline_s,
                        fix="check that the engine is running and the URL is right")
        data = self._json(MODELS, resp, "a JSON object whose data lists models with an id")
        entries = data.get("data")
        if not isinstance(entries, list) or not all(isinstance(m, dict) and isinstance(m.get("id"), str) and m["id"]
                                                    for m in entries):
            raise MeasurementError(f"{self._shown()}/v1/models did not answer like an OpenAI-compatible server (a "
                                   "JSON object whose data lists models with an id)",
                                   "point the endpoint at a vLLM server's base URL")
        return entries

    def only_model(self) -> str:
        """The one model the server serves (a MeasurementError when it serves several)."""
        ids = [m["id"] for m in self.models()]
        if len(ids) != 1:
            raise MeasurementError(f"{self._shown()} serves {len(ids)} models", "name the served model (--served-name)")
        return ids[0]

    def complete(self, body: dict, *, deadline_s: float | None = None, fix: str | None = None) -> dict:
        """POST /v1/completions; the parsed answer, whose ``choices[0]`` exists."""
        return self.parse_completion(self.post(COMPLETIONS, body, deadline_s=deadline_s, fix=fix))

    def parse_completion(self, resp) -> dict:
        """A /v1/completions answer (from :meth:`post`) parsed; MeasurementError unless it has choices[0]."""
        data = self._json(COMPLETIONS, resp, "a JSON object with choices[0].text")
        if not isinstance(data.get("choices"), list) or not data["choices"] or not isinstance(data["choices"][0], dict):
            raise MeasurementError(f"{self._shown()}/v1/completions did not answer like an OpenAI-compatible server "
                                   "(a JSON object with choices[0].text)", "point the endpoint at a vLLM server")
        return data

    def chat(self, body: dict, *, deadline_s: float | None = None) -> str:
        """POST /v1/chat/completions; the first choice's message content."""
        data = self._json(CHAT, self.post(CHAT, body, deadline_s=deadline_s),
                          "a JSON object with choices[0].message")
        try:
            return data["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError):
            raise MeasurementError(f"{self._shown()}/v1/chat/completions did not answer like an OpenAI-compatible "
                                   "server (choices[0].message.content)", "point the endpoint at a vLLM server") from None
