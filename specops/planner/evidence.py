"""How sure a prediction is: the model's cross-validated error on published rows like it.

``cross_validate`` predicts every published row that states a speedup, a method vLLM has and γ
(playbooks/data, DATA_FILES) with acceptance priors calibrated *without that row's source*
(leave-one-source-out), and keeps the residual ln(published / predicted). ``interval`` turns the
residuals of the rows most like a prediction (same method, batch range, dense or MoE target, GPU
class; relaxed one at a time until ``MIN_ROWS`` rows are found; rows measured on serving engines
first, any harness when too few) into a range around the predicted
speedup: [speedup·e^(q10−0.1), speedup·e^(q90+0.1)] of those residuals (min/max below 5 rows; the 0.1
is for the spread between sources, see WIDEN). When only the
method, or nothing, matches, the range is marked ``near=False``: the prediction extrapolates and
says so.

Rows are predicted as the bench always did: the published target (catalog entry, else a generic
model of its size), the hardware named (A100-80GB when none), the vLLM profile for serving engines
and the eager profile for paper harnesses, 512 context / 256 output tokens (most rows do not state
them).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

from pydantic import Field

from specops.models import Strict
from specops.planner.catalog import Catalogs, generic_model, load_catalogs
from specops.planner.perfmodel import (
    DraftSpec,
    Setup,
    engine_profile,
    evaluate,
    head_params,
    memory_estimate,
)
from specops.planner.priors import DRAFT_REF_RATIO, PublishedRow, calibrate, load_published

MIN_ROWS = 3
QUANTILES = (0.1, 0.9)  # of the similar rows' residuals: the range's ends (min/max below 5 rows)
WIDEN = 0.1
"""Both ends move out by e^±0.1 for the spread between sources. Built only from other sources' rows,
the range holds 64 of 102 published speedups (36 of 53 on serving engines) - fewer than the 80% its
quantiles suggest: sources disagree more than rows within one source. A wider margin (0.2: 64 of 88 before the batch sweeps were added)
would put the lower end of well-published cases (Llama-3.1-8B + EAGLE-3 at batch 1, DeepSeek-V3 MTP)
below 1. `make bench` prints the figures for the rows shipped now."""
CLASS_GPU = {"hopper+": "H100", "a100": "A100-80GB", "consumer": "RTX4090", "other": "TPU-v4"}
SERVING_ENGINES = ("vllm", "sglang", "tensorrt-llm")

# Published target names -> catalog entries (None: estimated from params_b); first match wins.
TARGETS = [("t5-xxl", None), ("llama2-chat 70b", "llama-2-70b-chat"), ("mixtral", "mixtral-8x7b-instruct"),
           ("vicuna 7b", "vicuna-7b"), ("vicuna-7b", "vicuna-7b"), ("vicuna 13b", "vicuna-13b"),
           ("vicuna-13b", "vicuna-13b"), ("llama-instruct 3.1 8b", "llama-3.1-8b-instruct"), ("llama-3.1-8b", "llama-3.1-8b-instruct"),
           ("llama3.1-8b", "llama-3.1-8b-instruct"), ("r1-distill-llama 8b", "llama-3.1-8b-instruct"), ("gpt-oss-20b", "gpt-oss-20b"),
           ("kimi", "kimi-k2.6"), ("deepseek-v3", "deepseek-v3"), ("deepseek-r1", "deepseek-v3"),
           ("deepseek v3", "deepseek-v3"), ("qwen3-8b", "qwen3-8b"), ("llama-2-7b", "vicuna-7b"),
           ("llama2-7b", "vicuna-7b"), ("qwen3-30b-a3b", "qwen3-30b-a3b"),
           ("qwen3-235b-a22b", "qwen3-235b-a22b")]
GPUS = [("rtx 3090", "RTX3090"), ("rtx 4090", "RTX4090"), ("b300", "B200"), ("gb200", "B200"), ("b200", "B200"),
        ("h200", "H200"), ("h100", "H100"), ("a100-40", "A100-40GB"), ("a100 40", "A100-40GB"), ("a100", "A100-80GB"),
        ("l40s", "L40S"), ("mi300x", "MI300X"), ("tpu", "TPU-v4")]  # EAGLE-3 rows name the RTX 3090 first
CONTEXT, OUTPUT = 512, 256


def gpu_class(name: str) -> str:
    """hopper+ (H100/H200/B200), a100, consumer (RTX, L4/L40S, A10G, T4), other (TPU, MI300X, CPU, ...)."""
    n = name.upper()
    if n.startswith(("H100", "H200", "B200", "GB200", "B300")):
        return "hopper+"
    if n.startswith("A100"):
        return "a100"
    if n.startswith(("RTX", "L4", "L40", "A10", "T4")):
        return "consumer"
    return "other"


def looks_moe(name: str) -> bool:
    """A mixture-of-experts target by its published name (Qwen3-30B-A3B, Mixtral, DeepSeek-V3, ...),
    for rows whose target is not in the catalog."""
    n = name.lower()
    return bool(re.search(r"-a\d+(\.\d+)?b\b", n)) or any(k in n for k in ("moe", "mixtral", "deepseek", "scout",
                                                                          "maverick", "gpt-oss", "kimi", "glm-5"))


def batch_range(batch: int) -> str:
    return "1-2" if batch <= 2 else "3-16" if batch <= 16 else "17-64" if batch <= 64 else "65+"


@dataclass(frozen=True)
class Residual:
    """One published row predicted with its own source left out."""

    row: PublishedRow
    predicted: float
    log_ratio: float   # ln(published / predicted)
    gpu_class: str
    moe: bool

    @property
    def error(self) -> float:
        return abs(self.log_ratio)


class PredictionEvidence(Strict):
    """What stands behind a predicted speedup."""


    speedup_low: float = Field(description="Lower end: predicted × e^(10th percentile residual of similar rows).")
    speedup_high: float = Field(description="Upper end: predicted × e^(90th percentile residual).")
    rows: int = Field(description="Published rows the range comes from.")
    matched_on: str = Field(description="What those rows share with the prediction.")
    near: bool = Field(description="False: no published row is near (only the method, or nothing, matched).")
    median_error: float = Field(description="Median |ln(published/predicted)| of those rows, left out of the fit.")
    sources: list[str] = Field(default_factory=list, description="Up to three of the sources behind the range.")

    def line(self) -> str:
        near = "" if self.near else "; no published row is near this configuration: the range extrapolates"
        return (f"{self.speedup_low:.2f}x-{self.speedup_high:.2f}x from {self.rows} published rows with the same "
                f"{self.matched_on} (cross-validated median error {self.median_error:.2f}){near}")


def _target(row: PublishedRow, cat: Catalogs):
    name = row.target.lower()
    for key, entry in TARGETS:
        if key in name and entry:
            spec = cat.model(entry)  # the published row ran NVFP4 weights: its bytes, not a launchable checkpoint
            return spec.model_copy(update={"weight_bits": 4.5, "quantization": "nvfp4"}) if "nvfp4" in name else spec
    active = re.search(r"-a(\d+(?:\.\d+)?)b\b", name)  # Qwen-style names state the active size: -A3B
    total = row.params_b or _size_in_name(name) or 7
    return generic_model(row.target, total, float(active.group(1)) if active and looks_moe(name) else None)


def _size_in_name(name: str) -> float | None:
    m = re.search(r"(\d+(?:\.\d+)?)\s*([bt])\b", name)
    return float(m.group(1)) * (1000 if m.group(2) == "t" else 1) if m else None


def _setup(row: PublishedRow, cat: Catalogs, model, profiles=None) -> Setup:
    text = row.hardware.lower()
    gpu = next((cat.gpu(g) for key, g in GPUS if key in text), None) or cat.gpu("A100-80GB")
    m = re.search(r"(\d+)\s*x\s*", text) or re.search(r"tp=?(\d+)", text)
    count = int(m.group(1)) if m else 1
    if profiles is None:
        profile = engine_profile(row.engine)
    else:
        serving, eager = profiles
        profile = serving if row.engine in SERVING_ENGINES else eager
    while memory_estimate(Setup(model, gpu, count, profile), None, seq_tokens=1, kv_dtype="auto").weights_gib > \
            count * gpu.memory_gib * 0.95:
        count *= 2  # the source's cluster must have held the weights
    return Setup(model, gpu, count, profile)


def _draft(row: PublishedRow, model) -> DraftSpec:
    if row.method in ("ngram", "suffix"):
        return DraftSpec(row.method, None, 0.0)
    if row.method == "draft_model":
        arch = generic_model("draft", row.draft_params_b or model.params_b * DRAFT_REF_RATIO)
        return DraftSpec("draft_model", "draft", arch.params_b, model=arch)
    return DraftSpec(row.method, None, head_params(model, row.method) / 1e9, row.generation)


def predictable(row: PublishedRow) -> bool:
    """A row the model can be checked on: a speedup, a vLLM method and γ."""
    return row.speedup is not None and row.method is not None and bool(row.gamma)


def predict_row(row: PublishedRow, priors, cat: Catalogs, profiles=None):
    """(Evaluation, Setup) of the model for one published row. ``profiles``: (serving, eager) engine
    profiles (default: the shipped ones)."""
    model = _target(row, cat)
    setup = _setup(row, cat, model, profiles)
    draft = _draft(row, model)
    prior = priors.lookup(row.method, task=row.task, temperature=row.temperature, generation=row.generation,
                          structure=row.structure, draft=row.draft_id,
                          draft_ratio=draft.params_b / model.params_b if row.method == "draft_model" else None)
    verify = (row.tree_tokens + 1) if row.structure == "tree" and row.tree_tokens else None
    context = min(row.context_len or CONTEXT, model.max_context - OUTPUT)
    e = evaluate(setup, draft, prior, gamma=row.gamma, kv_dtype="auto", batch=row.batch,
                 context_len=context, output_len=OUTPUT, verify_tokens=verify)
    return e, setup


def cross_validate(rows: list[PublishedRow] | None = None, catalogs: Catalogs | None = None,
                   profiles=None) -> list[Residual]:
    """Leave-one-source-out residuals of every predictable row (``profiles``: see :func:`predict_row`)."""
    rows = rows if rows is not None else load_published()
    cat = catalogs or load_catalogs()
    by_source: dict = {}
    out = []
    for row in rows:
        if not predictable(row):
            continue
        priors = by_source.setdefault(row.source, calibrate(rows, exclude_source=row.source))
        e, setup = predict_row(row, priors, cat, profiles)
        out.append(Residual(row, e.speedup, math.log(row.speedup / e.speedup), gpu_class(setup.gpu.name),
                            setup.model.is_moe or looks_moe(row.target)))
    return out


@lru_cache(maxsize=1)
def default_residuals() -> tuple[Residual, ...]:
    """Residuals on the shipped rows: computed once per installation and kept in
    ``$SPECOPS_HOME/cache/residuals-<key>.cache``, the key hashing every input (the playbooks and the
    planner's code), so a changed row, catalog entry or formula recomputes them."""
    from specops.planner.diskcache import cached

    return tuple(cached("residuals", lambda: tuple(cross_validate())))


def _residuals_key() -> str:
    from specops.planner.diskcache import input_key

    return input_key()


def _quantile(values: list[float], q: float) -> float:
    v = sorted(values)
    pos = q * (len(v) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def interval(speedup: float, *, method: str, batch: int, gpu: str, moe: bool,
             residuals: tuple[Residual, ...] | list[Residual] | None = None) -> PredictionEvidence:
    """The range around ``speedup`` from the residuals of the published rows most like it."""
    res = list(residuals if residuals is not None else default_residuals())
    cls, rng = gpu_class(gpu), batch_range(batch)
    levels = [
        ("method, batch range, dense/MoE and GPU class",
         lambda r: r.row.method == method and batch_range(r.row.batch) == rng and r.moe == moe and r.gpu_class == cls,
         True),
        ("method, batch range and dense/MoE",
         lambda r: r.row.method == method and batch_range(r.row.batch) == rng and r.moe == moe, True),
        ("method and batch range", lambda r: r.row.method == method and batch_range(r.row.batch) == rng, True),
        ("method", lambda r: r.row.method == method, False),
        ("nothing (all rows)", lambda r: True, False),
    ]
    for label, keep, near in levels:  # noqa: B007 - the last level matches every row: the loop always breaks
        alike = [r for r in res if keep(r) and (r.row.batch_known or r.row.batch == 1)]
        serving = [r for r in alike if r.row.engine in SERVING_ENGINES]
        pick = serving if len(serving) >= MIN_ROWS else alike
        if len(pick) >= MIN_ROWS or keep is levels[-1][1]:
            label += " (serving engines)" if pick is serving else ""
            break
    logs = [r.log_ratio for r in pick] or [0.0]
    lo, hi = (_quantile(logs, QUANTILES[0]), _quantile(logs, QUANTILES[1])) if len(logs) >= 5 else (min(logs), max(logs))
    lo, hi = lo - WIDEN, hi + WIDEN
    sources = list(dict.fromkeys(r.row.source.split(",")[0][:60] for r in pick))[:3]
    errors = sorted(abs(x) for x in logs)
    return PredictionEvidence(speedup_low=round(speedup * math.exp(lo), 3), speedup_high=round(speedup * math.exp(hi), 3),
                    rows=len(pick), matched_on=label, near=near, median_error=round(_quantile(errors, 0.5), 3),
                    sources=sources)


@dataclass(frozen=True)
class SweepPoint:
    """One published batch sweep point against the sweep's smallest batch (same source, setting, γ)."""

    source: str
    method: str
    batch_ref: int
    batch: int
    published_ratio: float   # speedup(batch) / speedup(batch_ref), as published
    predicted_ratio: float   # the same ratio, predicted

    @property
    def error(self) -> float:
        return abs(math.log(self.published_ratio / self.predicted_ratio))


def sweep_points(residuals: list[Residual] | tuple[Residual, ...]) -> list[SweepPoint]:
    """How speedup changes with batch within one published setting (serving engines, stated batches):
    the part of the model a source's fixed offsets cannot hide."""
    groups: dict[tuple, list[Residual]] = {}
    for r in residuals:
        row = r.row
        if row.engine in SERVING_ENGINES and row.batch_known:
            key = (row.source, row.location, row.target, row.method, row.structure, row.gamma, row.hardware)
            groups.setdefault(key, []).append(r)
    out = []
    for group in groups.values():
        group.sort(key=lambda r: r.row.batch)
        ref = group[0]
        for r in group[1:]:
            if r.row.batch == ref.row.batch:
                continue
            out.append(SweepPoint(r.row.source, r.row.method, ref.row.batch, r.row.batch,
                                  r.row.speedup / ref.row.speedup, r.predicted / ref.predicted))
    return out


@dataclass(frozen=True)
class BaselineRow:
    """A published TPOT without speculation (playbooks/data/moe_baselines_2026-12.csv)."""

    source: str
    target: str
    gpu: str
    gpus: int
    engine: str
    batch: int
    tpot_ms: float | None
    use: bool
    notes: str


def load_baselines() -> list[BaselineRow]:
    import csv

    from specops.playbooks import playbook_path

    with open(playbook_path("data", "moe_baselines_2026-12.csv"), newline="", encoding="utf-8") as f:
        return [BaselineRow(r["source"], r["target_model"], r["hardware"], int(r["gpus"]), r["engine"],
                            int(r["batch_size"]), float(r["tpot_ms"]) if r["tpot_ms"] else None, r["use"] == "yes",
                            r["notes"]) for r in csv.DictReader(f)]


def predict_baseline(row: BaselineRow, cat: Catalogs | None = None, profile=None) -> float | None:
    """The model's TPOT without speculation for a baseline row (None: its hardware is not stated)."""
    from specops.planner.perfmodel import forward_ms

    cat = cat or load_catalogs()
    gpu = next((g for key, g in GPUS if key in row.gpu.lower()), None)
    if gpu is None:
        return None
    setup = Setup(cat.model(row.target), cat.gpu(gpu), row.gpus, profile or engine_profile(row.engine))
    return forward_ms(setup, batch=row.batch, tokens_per_seq=1, kv_len=CONTEXT + OUTPUT / 2, kv_dtype="auto")


@dataclass(frozen=True)
class DraftCostRow:
    """A published draft/target forward-time ratio (Leviathan's c) for a separate draft LM
    (playbooks/data/draft_costs_2026-12.csv)."""

    source: str
    target: str
    draft: str
    gpu: str
    gpus: int
    engine: str
    cost_ratio: float
    notes: str


def load_draft_costs() -> list[DraftCostRow]:
    import csv

    from specops.playbooks import playbook_path

    with open(playbook_path("data", "draft_costs_2026-12.csv"), newline="", encoding="utf-8") as f:
        return [DraftCostRow(r["source"], r["target_model"], r["draft_model"], r["hardware"], int(r["gpus"]),
                             r["engine"], float(r["cost_ratio"]), r["notes"]) for r in csv.DictReader(f)]


def predict_draft_cost(row: DraftCostRow, cat: Catalogs | None = None, profile=None) -> float:
    """The model's c for a draft-cost row: one draft forward over one target forward (batch 1)."""
    from specops.planner.perfmodel import draft_ms, forward_ms

    cat = cat or load_catalogs()
    gpu = next(g for key, g in GPUS if key in row.gpu.lower())
    setup = Setup(cat.model(row.target), cat.gpu(gpu), row.gpus, profile or engine_profile(row.engine))
    arch = cat.model(row.draft)
    draft = DraftSpec("draft_model", arch.id, arch.params_b, model=arch)
    kv = CONTEXT + OUTPUT / 2
    target = forward_ms(setup, batch=1, tokens_per_seq=1, kv_len=kv, kv_dtype="auto")
    return draft_ms(setup, draft, gamma=1, batch=1, kv_len=kv, kv_dtype="auto") / target
