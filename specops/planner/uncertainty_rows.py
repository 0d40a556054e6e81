"""The published rows the speedup ranges are calibrated on (specops.planner.uncertainty): one name per source
across files, the rows handed over in playbooks/data/heldout_2026-12.csv, and the range `recommend` printed before
issue 38 (kept for the bench's before/after)."""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable
from dataclasses import replace

from specops.planner.evidence import SERVING_ENGINES

# --- sources ----------------------------------------------------------------------------------------

def source_key(source: str) -> str:
    """One name per source across files: an issue or PR by its number, a TensorRT-LLM tech blog by its
    number, else the source text up to its first parenthesis or comma."""
    s = source.lower()
    m = re.search(r"\b(pr|issue)\s*#\s*(\d+)", s)
    if m:
        repo = next((k for k in ("specforge", "sglang", "vllm", "llama.cpp", "eagle", "mlx", "omlx", "speculators")
                     if k in s[:m.start()]), "")
        return f"{repo} {m.group(1)} #{m.group(2)}"
    m = re.search(r"tech[ _]?blog[ _]?(\d+)|blogs?/tech_blog/blog(\d+)", s)
    if m:
        return f"tensorrt-llm tech blog {m.group(1) or m.group(2)}"
    return re.split(r"[(,]", s, maxsplit=1)[0].strip()


def unify_sources(rows: Iterable) -> list:
    """Rows whose sources share a :func:`source_key` get the first spelling of it, so leaving a source
    out leaves all of its rows out (the same SpecForge issue is spelled two ways in playbooks/data)."""
    first: dict[str, str] = {}
    out = []
    for r in rows:
        name = first.setdefault(source_key(r.source), r.source)
        out.append(r if name == r.source else replace(r, source=name))
    return out


# --- the handed-over rows of 2026-12 ------------------------------------------------------------------

HELDOUT_FILE = "heldout_2026-12.csv"
ENGINE_NAMES = {"vllm": "vllm", "sglang": "sglang", "trt-llm": "tensorrt-llm", "tensorrt-llm": "tensorrt-llm"}


def _arg(args: str, flag: str) -> str | None:
    m = re.search(rf"{flag}\s+(\S+)", args)
    return m.group(1) if m else None


def load_heldout_2026_12() -> list:
    """playbooks/data/heldout_2026-12.csv (its own columns, see its README in shared/data) as
    :class:`~specops.planner.priors.PublishedRow`: the setup from ``recommend_args``, the engine from
    ``engine_class``, γ left unstated where the source does not state it (the model's best γ is used)."""
    from specops.planner.evidence import size_in_name
    from specops.planner.priors import PublishedRow, _method, _task
    from specops.playbooks import playbook_path

    out = []
    with open(playbook_path("data", HELDOUT_FILE), newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            args = r["recommend_args"]
            method, gen = _method(r["method_published"])
            cls = re.match(r"[a-z0-9_]+", r["method_class"]).group(0)  # "dflash(proxy for dspark)" -> dflash
            method = (method or cls) if cls in ("eagle", "eagle3") else cls  # a head keeps its published generation
            gamma = int(r["gamma_published"]) if r["gamma_published"].isdigit() else None
            gpus = int(r["gpus"] or 1)
            engine = ENGINE_NAMES.get(r["engine_class"].lower(), "other")
            speedup = float(r["published_speedup"]) if r["published_speedup"] else None
            params = _arg(args, "--params-b")
            out.append(PublishedRow(
                source=r["source"], location=f"{r['location']} [{r['id']}]", target=_arg(args, "--model") or r["model"],
                params_b=float(params) if params else None, method=method, generation=gen, structure="chain",
                gamma=gamma, tree_tokens=None, task=_task(r["task_flag"]), temperature=float(r["temperature"] or 0),
                temperature_stated=bool(r["temperature"]), batch=int(r["batch"] or 1), batch_known=bool(r["batch"]),
                hardware=f"{gpus}x {r['gpu']}", engine=engine, tau=None, acceptance_rate=None, rate_is_alpha=False,
                speedup=speedup, draft_params_b=size_in_name(r["draft"].lower()) if method == "draft_model" else None,
                notes=f"engine={engine}; flags={r['flags']}; {r['notes']}", context_len=int(r["context_len"] or 0) or None,
                draft_id=r["draft"] or None, quantization=_arg(args, "--quantization"), catalog_target=True))
    return out


def _same_measurement(a, b) -> bool:
    return (source_key(a.source) == source_key(b.source) and a.method == b.method and a.batch == b.batch
            and a.speedup is not None and b.speedup is not None and abs(a.speedup - b.speedup) < 0.006)


def calibration_rows() -> list:
    """Every published row the ranges are calibrated on: DATA_FILES and the 2026-12 hand-over (its rows
    already in DATA_FILES - same source, method, batch and speedup - dropped), sources unified."""
    from specops.planner.priors import load_published

    rows = load_published()
    extra = [r for r in load_heldout_2026_12() if not any(_same_measurement(r, o) for o in rows)]
    return unify_sources(rows + extra)


# --- legacy: the range before issue 38, kept for the bench's before/after ------------------------------

def legacy_interval(speedup: float, *, method: str, batch: int, gpu_class: str, moe: bool, residuals) -> tuple:
    """(low, high) of the range `recommend` printed before this module: the 10th/90th percentile of the
    residuals of the most similar rows (min/max below 5), widened by e^±0.1, no bounds."""
    from specops.planner.evidence import batch_range

    res = list(residuals)
    rng = batch_range(batch)
    levels = [
        lambda r: r.row.method == method and batch_range(r.row.batch) == rng and r.moe == moe and r.gpu_class == gpu_class,
        lambda r: r.row.method == method and batch_range(r.row.batch) == rng and r.moe == moe,
        lambda r: r.row.method == method and batch_range(r.row.batch) == rng,
        lambda r: r.row.method == method,
        lambda r: True,
    ]
    pick_ = res
    for keep in levels:
        alike = [r for r in res if keep(r) and (r.row.batch_known or r.row.batch == 1)]
        serving = [r for r in alike if r.row.engine in SERVING_ENGINES]
        pick_ = serving if len(serving) >= 3 else alike
        if len(pick_) >= 3:
            break
    logs = sorted(r.log_ratio for r in pick_) or [0.0]
    if len(logs) >= 5:
        lo, hi = _q(logs, 0.1), _q(logs, 0.9)
    else:
        lo, hi = logs[0], logs[-1]
    return speedup * math.exp(lo - 0.1), speedup * math.exp(hi + 0.1)


def _q(v: list[float], q: float) -> float:
    pos = q * (len(v) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)
