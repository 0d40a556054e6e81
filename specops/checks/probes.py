"""The lossless check's probes (playbooks/checklists/lossless-probes.yaml): a needle placed early in a
context sized near the engine's max_model_len and asked for at the end, and JSON / tool-call prompts.
Known bugs corrupt long prompts and structured answers while short greedy prompts still pass."""

from __future__ import annotations

from collections.abc import Callable

from specops.playbooks import playbook_path

Tokenize = Callable[[str], int | None]  # prompt -> token count (None: the server cannot count)


def load_probes() -> dict:
    import yaml

    return yaml.safe_load(playbook_path("checklists", "lossless-probes.yaml").read_text())


def needle_prompt(max_model_len: int, max_tokens: int, tokenize: Tokenize | None = None) -> str:
    """fact + filler × n + question, with n as large as fits ``max_model_len - max_tokens`` (less a
    margin). Without a token count, one character per token (a byte-level BPE never does worse)."""
    p = load_probes()["needle"]
    budget = max(32, max_model_len - max_tokens - 8)

    def build(n: int) -> str:
        return p["fact"] + " " + p["filler"] * n + p["question"]

    count = (lambda s: None) if tokenize is None else tokenize
    n = max(1, (budget - len(p["fact"]) - len(p["question"])) // len(p["filler"]))
    for _ in range(4):  # scale the filler to the measured count, then step down until it fits
        used = count(build(n))
        if used is None:
            break
        if used <= budget:
            per = max(1.0, (used - count(build(0)) if n else used) / n)
            grow = int((budget - used) // per)
            if grow <= 0:
                break
            n += grow
        else:
            n = max(1, int(n * budget / used) - 1)
    while n > 1 and (c := count(build(n))) is not None and c > budget:
        n -= 1
    return build(n)


def lossless_prompts(short: list[str], max_model_len: int | None, max_tokens: int,
                     tokenize: Tokenize | None = None) -> list[tuple[str, str]]:
    """(name, prompt): the short prompts, the structured probes and, when the context length is
    known, the long-context needle."""
    out = [(f"short-{i}", p) for i, p in enumerate(short)]
    out += [(s["name"], s["prompt"]) for s in load_probes()["structured"]]
    if max_model_len:
        out.append(("needle-long", needle_prompt(max_model_len, max_tokens, tokenize)))
    return out


def http_tokenizer(endpoint: str, model: str | None, headers: dict) -> Tokenize:
    """vLLM's POST /tokenize as a counter; None when the server does not answer it."""
    from specops.engines.client import VllmClient
    from specops.errors import MeasurementError

    client = VllmClient(endpoint, headers, 30.0)

    def count(prompt: str) -> int | None:
        try:
            body = {"prompt": prompt, **({"model": model} if model else {})}
            resp = client.post("/tokenize", body)
            if resp.status != 200:
                return None
            data = client._json("/tokenize", resp, "a JSON object with count")
            return int(data["count"]) if isinstance(data.get("count"), int) else None
        except (MeasurementError, KeyError, ValueError):
            return None
    return count


def server_max_model_len(endpoint: str, headers: dict) -> int | None:
    """``max_model_len`` from /v1/models (vLLM adds it), or None."""
    from specops.engines.client import VllmClient
    from specops.errors import SpecopsError

    try:
        models = VllmClient(endpoint, headers, 10.0).models()
    except SpecopsError:
        return None
    lens = [m.get("max_model_len") for m in models if isinstance(m.get("max_model_len"), int)]
    return min(lens) if lens else None
