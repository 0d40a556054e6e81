"""``python -m specops.retrain.respond``: the target's own answers to prompts, as chat conversations.

Queries an OpenAI-compatible server (the deployment's vLLM or SGLang) at temperature 0 and writes
``{"id": ..., "conversations": [{"role": "user", ...}, {"role": "assistant", ...}]}`` lines, the
format SpecForge reads as ``data.train_data_path``. Runs on CPU; the server does the work. The API key,
if any, is read from the environment variable named by ``--api-key-env`` (never from argv).
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def respond(endpoint: str, model: str, prompts: list[str], max_tokens: int, api_key: str | None = None,
            timeout: float = 600.0) -> list[dict]:
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    rows = []
    with httpx.Client(base_url=endpoint.rstrip("/"), headers=headers, timeout=timeout) as client:
        for i, text in enumerate(prompts):
            r = _post_bounded(client, "/v1/chat/completions", {
                "model": model, "messages": [{"role": "user", "content": text}], "temperature": 0,
                "max_tokens": max_tokens}, timeout)
            r.raise_for_status()
            answer = r.json()["choices"][0]["message"]["content"] or ""
            rows.append({"id": f"p{i}", "conversations": [{"role": "user", "content": text},
                                                         {"role": "assistant", "content": answer}]})
    return rows


def _post_bounded(client, path: str, body: dict, deadline_s: float):
    """POST within ``deadline_s`` overall, body capped at 16 MiB: httpx's timeout is per read, so a
    server that drips bytes is cut off here (checked at each chunk; this job may not import
    specops.metrics, whose exchange bounds it exactly)."""
    import time

    import httpx

    t0 = time.monotonic()
    with client.stream("POST", path, json=body) as r:
        data = bytearray()
        for chunk in r.iter_raw():  # raw: the Response below decodes by its headers, once
            data += chunk
            if time.monotonic() - t0 > deadline_s or len(data) > 16 * 1024 * 1024:
                raise httpx.ReadTimeout(f"no complete answer within {deadline_s:g}s (or over 16 MiB)",
                                        request=r.request)
        return httpx.Response(r.status_code, headers=r.headers, content=bytes(data), request=r.request)


def main(argv: list[str] | None = None) -> int:
    from specops.retrain.prompts import load_prompts

    ap = argparse.ArgumentParser(prog="python -m specops.retrain.respond", description=__doc__.split("\n\n")[0])
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--model", required=True, help="served model name")
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-tokens", type=int, default=2048)
    ap.add_argument("--api-key-env", default=None, help="name of the env var holding the API key")
    args = ap.parse_args(argv)
    key = os.environ.get(args.api_key_env) if args.api_key_env else None
    rows = respond(args.endpoint, args.model, load_prompts(args.prompts), args.max_tokens, key)
    with open(args.out, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(rows)} conversations -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
