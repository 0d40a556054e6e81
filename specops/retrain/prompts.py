"""Training and held-out prompts: from a data file, or from a deployment's recorded traffic.

Format (both cases): JSON Lines, one request per line, UTF-8. Each line is an object with a
``prompt`` string (a completion request), or a ``messages`` list in the OpenAI chat format (the
user turns are joined), e.g.::

    {"prompt": "Permission is hereby granted, free of charge, to any person", "ts": "2026-01-05T10:00:00Z"}
    {"messages": [{"role": "user", "content": "Summarise the GPL in one line."}]}

"From traffic" reads ``$SPECOPS_HOME/deployments/<name>/prompts.jsonl``: whatever records recent
requests (a gateway, a log shipper, or vLLM's ``--enable-log-requests`` lines turned into JSONL)
appends to it; the newest ``limit`` lines are used. Prompts are data, never logged.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

from specops.errors import ConfigFileError, InputError
from specops.jsonfile import parse_json_text


def traffic_path(deployment: str) -> Path:
    from specops.engines.layout import DeploymentFolder

    return DeploymentFolder.of(deployment).traffic


def _text(obj, path: Path, line: int) -> str:
    if isinstance(obj, str):
        return obj
    if isinstance(obj, dict):
        if isinstance(obj.get("prompt"), str):
            return obj["prompt"]
        msgs = obj.get("messages")
        if isinstance(msgs, list):
            parts = [m.get("content") for m in msgs if isinstance(m, dict) and m.get("role") in ("user", "system")]
            parts = [p for p in parts if isinstance(p, str) and p]
            if parts:
                return "\n".join(parts)
    raise ConfigFileError('a line must be {"prompt": "..."} or {"messages": [{"role": "user", "content": "..."}]}',
                          "fix or drop that line", path=str(path), line=line)


def load_prompts(path: str | Path, limit: int | None = None) -> list[str]:
    """Prompts from a JSONL file, in file order; with ``limit`` only the newest (last) ones."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise InputError(f"prompts file {p} does not exist", "give a JSONL file with one {\"prompt\": ...} per line")
    prompts = []
    with p.open(encoding="utf-8") as fh:
        for n, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            obj = parse_json_text(raw, str(p), fix="write one JSON object per line", line=n)
            text = _text(obj, p, n)
            if text.strip():
                prompts.append(text)
    if not prompts:
        raise InputError(f"prompts file {p} holds no prompts", "add lines like {\"prompt\": \"...\"}")
    return prompts[-limit:] if limit else prompts


def traffic_prompts(deployment: str, limit: int = 512) -> list[str]:
    p = traffic_path(deployment)
    if not p.is_file():
        raise InputError(f"no recorded traffic for {deployment} ({p} does not exist)",
                         f"append recent requests to {p} as JSONL (see docs/retrain.md), or pass --data FILE")
    return load_prompts(p, limit)


def write_prompts(prompts: list[str], path: Path, chat: bool = False) -> Path:
    """JSONL with ``prompt`` (or, with ``chat``, a one-turn ``messages`` list for chat-format tools)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for text in prompts:
            row = {"messages": [{"role": "user", "content": text}]} if chat else {"prompt": text}
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def data_sha256(prompts: list[str]) -> str:
    return hashlib.sha256(json.dumps(prompts, ensure_ascii=False).encode()).hexdigest()


def split_heldout(prompts: list[str], heldout: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """(train, held-out): a seeded choice of ``heldout`` prompts never trained on."""
    if heldout < 1:
        raise InputError(f"held-out prompt count {heldout} < 1", "keep at least one prompt for the train-stage check")
    if len(prompts) < heldout + 1:
        raise InputError(f"{len(prompts)} prompts are too few to hold out {heldout} for checking",
                         f"give at least {heldout + 1} prompts (more is better: the reference recipe uses 48)")
    idx = list(range(len(prompts)))
    random.Random(seed).shuffle(idx)
    held = set(idx[:heldout])
    return [p for i, p in enumerate(prompts) if i not in held], [prompts[i] for i in sorted(held)]
