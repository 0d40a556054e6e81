"""Benchmark workloads: JSONL files of ``{"prompt": ..., "max_tokens": ...}`` or built-in sets.

Built-in sets are generated locally and deterministically (seeded), no downloads:

- ``code``: Python function/class openings (what code assistants see);
- ``prose``: openings of plain English paragraphs;
- ``long-output``: prompts asking for long continuations, ``max_tokens`` 4096+ — capped to what the
  model's ``max_model_len`` allows (the cap is reported, never hidden).
"""

from __future__ import annotations

import random
from pathlib import Path

from pydantic import Field, ValidationError

from specops.errors import ConfigFileError, InputError, did_you_mean
from specops.jsonfile import parse_json_text
from specops.models import Strict

BUILTIN = ("code", "prose", "long-output")
LONG_OUTPUT_TOKENS = 4608


class Prompt(Strict):
    """One request of a workload."""


    prompt: str = Field(min_length=1, description="Completion prompt text.")
    max_tokens: int = Field(128, ge=1, le=1_000_000, description="Output tokens to generate.")


class Workload(Strict):
    name: str = Field(description="Built-in set name or the file path.")
    prompts: list[Prompt] = Field(description="Requests, cycled when --requests exceeds their number.")
    notes: list[str] = Field(default_factory=list, description="Caps and other adjustments made.")


_FUNCS = ["parse_args", "read_config", "merge_dicts", "normalize_path", "format_table", "retry_call",
          "load_records", "split_lines", "compute_checksum", "walk_tree", "flatten", "chunked",
          "to_camel_case", "parse_header", "encode_query", "find_duplicates"]
_ARGS = ["self, path", "items, key=None", "text, width=80", "data, *, strict=False", "argv=None",
         "source, encoding='utf-8'", "values, default=0", "name, *args, **kwargs"]
_CLASSES = ["Cache", "Parser", "Registry", "Reader", "Queue", "Buffer", "Formatter", "Session"]
_SUBJECTS = ["The committee", "Our small town", "The old lighthouse keeper", "Every morning the market",
             "The river", "Scientists at the station", "The library", "A letter from my grandmother"]
_VERBS = ["decided that", "had always believed that", "opened its doors when", "reported that",
          "remembered how", "noticed that", "explained why", "wrote about how"]
_ENDINGS = ["the winter would be long", "nobody had expected the change", "the road was finally finished",
            "the lights stayed on all night", "the work would take many years", "the answer was simple"]


def _code_prompt(rng: random.Random) -> str:
    if rng.random() < 0.7:
        fn, args = rng.choice(_FUNCS), rng.choice(_ARGS)
        return f'def {fn}({args}):\n    """{fn.replace("_", " ").capitalize()}."""\n    '
    cls = rng.choice(_CLASSES)
    return f"class {cls}:\n    def __init__(self, {rng.choice(_ARGS).replace('self, ', '')}):\n        "


def _prose_prompt(rng: random.Random) -> str:
    return f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_ENDINGS)}. "


def builtin(name: str, count: int = 32, max_tokens: int | None = None, seed: int = 1) -> Workload:
    """A built-in set; ``max_tokens`` overrides the set's default output length."""
    rng = random.Random(f"{name}:{seed}")
    if name == "code":
        prompts = [Prompt(prompt=_code_prompt(rng), max_tokens=max_tokens or 128) for _ in range(count)]
    elif name == "prose":
        prompts = [Prompt(prompt=_prose_prompt(rng), max_tokens=max_tokens or 128) for _ in range(count)]
    elif name == "long-output":
        prompts = [Prompt(prompt="# A long, complete Python module\n" + _code_prompt(rng),
                          max_tokens=max_tokens or LONG_OUTPUT_TOKENS) for _ in range(count)]
    else:
        raise InputError(f'unknown workload "{name}".{did_you_mean(name, BUILTIN)}',
                         f"use one of {', '.join(BUILTIN)} or a JSONL file path")
    return Workload(name=name, prompts=prompts)


def load_jsonl(path: Path) -> Workload:
    if not path.is_file():
        raise InputError(f"workload file {path} does not exist",
                         f"pass a JSONL file or a built-in set ({', '.join(BUILTIN)})")
    prompts: list[Prompt] = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        obj = parse_json_text(line, str(path), fix='write one {"prompt": ..., "max_tokens": N} per line', line=lineno)
        try:
            prompts.append(Prompt.model_validate(obj))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "line"
            raise ConfigFileError(f"{where}: {err['msg']}", 'each line needs "prompt" (text) and optional '
                                  '"max_tokens" (int >= 1); no other keys', path=str(path), line=lineno) from None
    if not prompts:
        raise ConfigFileError("no prompts in the file", "add at least one JSONL line", path=str(path))
    return Workload(name=str(path), prompts=prompts)


def load_workload(spec: str, max_tokens: int | None = None, seed: int = 1) -> Workload:
    """A JSONL path, or a built-in set name."""
    if spec in BUILTIN:
        return builtin(spec, max_tokens=max_tokens, seed=seed)
    path = Path(spec).expanduser()
    if path.suffix in (".jsonl", ".json") or path.exists() or "/" in spec:
        w = load_jsonl(path)
        if max_tokens:
            w.prompts = [p.model_copy(update={"max_tokens": max_tokens}) for p in w.prompts]
        return w
    raise InputError(f'unknown workload "{spec}".{did_you_mean(spec, BUILTIN)}',
                     f"use one of {', '.join(BUILTIN)} or a JSONL file path")


def cap_to_context(workload: Workload, max_model_len: int | None, prompt_tokens: list[int]) -> Workload:
    """Lower max_tokens so prompt + output fits ``max_model_len``; say so in ``notes``."""
    if not max_model_len:
        return workload
    capped = 0
    out = []
    for p, n in zip(workload.prompts, prompt_tokens, strict=True):
        room = max(1, max_model_len - n - 1)
        if p.max_tokens > room:
            capped += 1
            p = p.model_copy(update={"max_tokens": room})
        out.append(p)
    workload = workload.model_copy(update={"prompts": out})
    if capped:
        asked = max(p.max_tokens for p in workload.prompts)
        workload.notes.append(f"{capped} of {len(out)} prompts capped to fit max_model_len={max_model_len} "
                              f"(max_tokens now <= {asked})")
    return workload
