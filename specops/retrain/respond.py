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
    """Each prompt's answer within ``timeout`` overall (specops.engines.client.VllmClient)."""
    from specops.engines.client import VllmClient

    client = VllmClient(endpoint, {"Authorization": f"Bearer {api_key}"} if api_key else {}, timeout)
    rows = []
    for i, text in enumerate(prompts):
        answer = client.chat({"model": model, "messages": [{"role": "user", "content": text}], "temperature": 0,
                              "max_tokens": max_tokens})
        rows.append({"id": f"p{i}", "conversations": [{"role": "user", "content": text},
                                                     {"role": "assistant", "content": answer}]})
    return rows


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
    from specops.errors import SpecopsError

    try:
        rows = respond(args.endpoint, args.model, load_prompts(args.prompts), args.max_tokens, key)
    except SpecopsError as exc:  # one line, as every specops command reports bad input or a bad server
        print(f"error: {exc.one_line()}", file=sys.stderr)
        return 2
    with open(args.out, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(rows)} conversations -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
