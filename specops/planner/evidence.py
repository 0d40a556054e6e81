"""The model's out-of-source errors on published rows: the residuals every range is calibrated on.

``cross_validate`` predicts every published row that states a speedup, a method vLLM has and γ
(playbooks/data, DATA_FILES; with ``unstated_gamma`` also rows that leave γ to specops, predicted at the
model's best γ) with acceptance priors - the speedup-table priors with the acceptance model attached, as
`recommend` ships them - fitted *without that row's source* (leave-one-source-out),
and keeps the residual ln(published / predicted) with the prediction's τ and target architecture.
How the residuals become ranges, P(gain) and the pick: :mod:`specops.planner.uncertainty`.

Rows are predicted as the bench always did: the published target (catalog entry, else a generic
model of its size; rows stated as `recommend` arguments resolve their --model, --params-b and
--quantization as recommend does), the hardware named (A100-80GB when none), the engine's profile,
512 context / 256 output tokens (most rows do not state them).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

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

SERVING_ENGINES = ("vllm", "sglang", "tensorrt-llm")
HARNESS_ENGINES = ("hf",)
"""The HF/PyTorch paper harness (`recommend --engine hf`); any other engine of a published row (llama.cpp, MLX, T5X,
gpt-fast-style PyTorch: engine ``other``) is a native runtime (uncertainty.engine_class)."""

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
    if "distill" in n:  # DeepSeek-R1-Distill-Llama/Qwen: dense students of an MoE teacher
        return False
    return (bool(re.search(r"-a\d+(\.\d+)?b\b|deepseek[- ]?(v\d|r1|moe|coder[- ]v2)", n))
            or any(k in n for k in ("moe", "mixtral", "scout", "maverick", "gpt-oss", "kimi", "glm-5")))


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
    tau: float = 0.0           # predicted tokens per verification step (0: not recorded)
    arch: str | None = None    # the target's ModelSpec.kind(): dense, moe, hybrid, sliding_window, None
    tau_high: float = 0.0      # τ's one-sided 95% upper bound (uncertainty.tau_ceiling; 0: not recorded)
    hardware_known: bool = True  # the row names a GPU the catalog has (else it was predicted on an A100-80GB)

    @property
    def error(self) -> float:
        return abs(self.log_ratio)


def split_residual(r: Residual) -> tuple[float, float] | None:
    """(τ half, cost half) of a held-out residual whose row publishes τ (mean accepted tokens per step: EAGLE's τ,
    Spec-Bench's #MAT): with c = τ / speedup, one speculative step's cost in baseline forwards,
    ln(published / predicted) = ln(τ_pub / τ) − ln(c_pub / c). The τ half is the acceptance model's error, the cost
    half the step-cost model's; None where the row publishes no τ or the prediction recorded none."""
    from specops.planner.stepcost import tau_cost_split  # the one split; here signed as ln(published / model)

    s = tau_cost_split(r) if r.tau else None
    return (-s.tau_log_error, s.cost_log_error) if s else None


def _target(row: PublishedRow, cat: Catalogs):
    if row.catalog_target:
        from specops.errors import SpecopsError

        try:
            return cat.model(row.target, params_b=None if cat.catalog_model(row.target) else row.params_b or 7,
                             quantization=row.quantization)
        except SpecopsError:  # a quantized checkpoint the catalog does not know: its size, 16-bit
            pass
    name = row.target.lower()
    for key, entry in TARGETS:
        if key in name and entry:
            spec = cat.model(entry)  # the published row ran NVFP4 weights: its bytes, not a launchable checkpoint
            return spec.model_copy(update={"weight_bits": 4.5, "quantization": "nvfp4"}) if "nvfp4" in name else spec
    active = re.search(r"-a(\d+(?:\.\d+)?)b\b", name)  # Qwen-style names state the active size: -A3B
    total = row.params_b or size_in_name(name) or 7
    return generic_model(row.target, total, float(active.group(1)) if active and looks_moe(name) else None)


def catalog_gpu(hardware: str) -> str:
    """The catalog GPU a published hardware text names (:data:`GPUS`, first match); '' when it names none."""
    t = hardware.lower()
    return next((g for key, g in GPUS if key in t), "")


def hardware_known(text: str) -> bool:
    """The published hardware names a GPU of the catalog (:data:`GPUS`); else the row is predicted on an
    A100-80GB, a guess (`recommend` always knows its --gpu)."""
    return bool(catalog_gpu(text))


def size_in_name(name: str) -> float | None:
    """Billions of parameters a model name states (\"70b\", \"1.5b\", \"1t\"), else None."""
    m = re.search(r"(\d+(?:\.\d+)?)\s*([bt])\b", name)
    return float(m.group(1)) * (1000 if m.group(2) == "t" else 1) if m else None


def _setup(row: PublishedRow, cat: Catalogs, model, profiles=None) -> Setup:
    text = row.hardware.lower()
    gpu = cat.gpu(catalog_gpu(text) or "A100-80GB")
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
        if model.weight_bits < arch.weight_bits:  # issue 37: the source quantised its draft as its target (draft_precision)
            arch = arch.model_copy(update={"weight_bits": model.weight_bits})
        return DraftSpec("draft_model", "draft", arch.params_b, model=arch)
    if row.method == "dflash":  # a block-diffusion draft of a head's size, as recommend's typical one
        size = head_params(model, "dflash") / 1e9
        return DraftSpec("dflash", "draft", size, model=generic_model("draft", size))
    return DraftSpec(row.method, None, head_params(model, row.method) / 1e9, row.generation)


def predictable(row: PublishedRow, *, unstated_gamma: bool = False) -> bool:
    """A row the model can be checked on: a speedup, a vLLM method and γ (or, with ``unstated_gamma``,
    a chain whose γ the source leaves unstated)."""
    return row.speedup is not None and row.method is not None and (bool(row.gamma) or unstated_gamma and
                                                                    row.structure == "chain")


BEST_GAMMA_RANGE = range(1, 8)
"""γ tried for rows that do not state it (recommend's own range at temperature ≤ 1)."""


def predict_at_best_gamma(row: PublishedRow, priors, cat: Catalogs, profiles):
    from dataclasses import replace

    from specops.planner.perfmodel import best_gamma

    evals = {g: predict_row(replace(row, gamma=g), priors, cat, profiles) for g in BEST_GAMMA_RANGE}
    best = best_gamma([e for e, _ in evals.values()]) or max((e for e, _ in evals.values()), key=lambda e: e.speedup)
    return evals[best.gamma]


def gamma_bounds(row: PublishedRow, priors, cat: Catalogs, profiles=None) -> tuple[float, float]:
    """(floor, ceiling) of a row whose source does not state γ, over every γ of BEST_GAMMA_RANGE it may have run: the
    lowest all-rejected speedup S/τ and the highest τ ceiling (uncertainty.tau_ceiling). The row is predicted at the
    model's best γ (:func:`predict_at_best_gamma`), but its published speedup was measured at the source's γ, which
    physics bounds there, not at the model's: a draft model's τ keeps growing past the best γ (TensorRT-LLM's
    draft-target examples run draft_len 4-10). bench/uncertainty_bench.py prints the rows within these bounds and
    scores with them under --gamma-bounds; `recommend` always has its γ."""
    from dataclasses import replace

    from specops.planner.uncertainty import tau_ceiling

    floors, ceilings = [], []
    for g in BEST_GAMMA_RANGE:
        at = replace(row, gamma=g)
        e, _ = predict_row(at, priors, cat, profiles)
        floors.append(min(e.speedup / max(1.0, e.tau), e.speedup))
        ceilings.append(tau_ceiling(prior_of(at, priors, cat), g, e.tau))
    return min(floors), max(ceilings)


def predict_row(row: PublishedRow, priors, cat: Catalogs, profiles=None):
    """(Evaluation, Setup) of the model for one published row. ``profiles``: (serving, eager) engine
    profiles (default: the shipped ones)."""
    model = _target(row, cat)
    setup = _setup(row, cat, model, profiles)
    draft = _draft(row, model)
    prior = _prior(row, priors, model, draft)
    verify = (row.tree_tokens + 1) if row.structure == "tree" and row.tree_tokens else None
    context = min(row.context_len or CONTEXT, model.max_context - OUTPUT)
    e = evaluate(setup, draft, prior, gamma=row.gamma, kv_dtype="auto", batch=row.batch,
                 context_len=context, output_len=OUTPUT, verify_tokens=verify)
    return e, setup


def _prior(row: PublishedRow, priors, model, draft):
    return priors.lookup(row.method, task=row.task, temperature=row.temperature, generation=row.generation,
                         structure=row.structure, draft=row.draft_id, depth=row.gamma, tree_tokens=row.tree_tokens,
                         draft_ratio=draft.params_b / model.params_b if row.method == "draft_model" else None,
                         target=model.id)


def prior_of(row: PublishedRow, priors, cat: Catalogs):
    """The acceptance prior :func:`predict_row` uses for ``row`` (for its τ range: uncertainty.tau_ceiling)."""
    model = _target(row, cat)
    return _prior(row, priors, model, _draft(row, model))


def fit_priors(rows: list[PublishedRow], *, exclude_source: str | None = None, held_out: Iterable[str] = ()):
    """The acceptance priors a held-out prediction uses, fitted without ``exclude_source`` and the ``held_out``
    sources: the one place every cross-validation here (and bench/uncertainty_bench.py's nested folds) fits them,
    so the residuals are those of the predictor `recommend` ships - the speedup-table priors with the acceptance
    model (:mod:`specops.planner.acceptance`) attached, the acceptance model fitted without the acceptance rows of
    those sources (matched by :func:`specops.planner.uncertainty.source_key`)."""
    out = {s for s in (exclude_source, *held_out) if s}
    return calibrate(rows, exclude_source=exclude_source).with_acceptance(acceptance_without(out))


def acceptance_without(sources: Iterable[str]):
    """The acceptance model fitted on playbooks/data/acceptance_2026-12.csv without the rows of these
    publications (published-row ``source`` strings); one fit per distinct set of acceptance sources left out."""
    from specops.planner.uncertainty import source_key

    keys = {source_key(s) for s in sources}
    drop = frozenset(r.source_id for r, key in _acceptance_rows() if key in keys)
    return _acceptance_fit(drop)


@lru_cache(maxsize=1)
def _acceptance_rows():
    """(row, its source_key) of every acceptance row."""
    from specops.planner.acceptance import load_rows
    from specops.planner.uncertainty import source_key

    return tuple((r, source_key(r.source)) for r in load_rows())


@lru_cache(maxsize=4096)
def _acceptance_fit(drop: frozenset[str]):
    from specops.planner.acceptance import fit

    return fit([r for r, _ in _acceptance_rows() if r.source_id not in drop])


def cross_validate(rows: list[PublishedRow] | None = None, catalogs: Catalogs | None = None,
                   profiles=None, *, unstated_gamma: bool = False, held_out: Iterable[str] = ()) -> list[Residual]:
    """Leave-one-source-out residuals of every predictable row (``profiles``: see :func:`predict_row`;
    ``unstated_gamma``: see :func:`predictable`; ``held_out``: sources also left out of every fold's acceptance
    model - a nested fold's outer source, whose speedup rows are already absent from ``rows``)."""
    from specops.planner.uncertainty import tau_ceiling

    rows = rows if rows is not None else load_published()
    cat = catalogs or load_catalogs()
    by_source: dict = {}
    out = []
    for row in rows:
        if not predictable(row, unstated_gamma=unstated_gamma):
            continue
        if row.source not in by_source:  # once per source (setdefault would calibrate for every row)
            by_source[row.source] = fit_priors(rows, exclude_source=row.source, held_out=held_out)
        priors = by_source[row.source]
        e, setup = predict_row(row, priors, cat, profiles) if row.gamma else predict_at_best_gamma(row, priors, cat, profiles)
        out.append(Residual(row, e.speedup, math.log(row.speedup / e.speedup), gpu_class(setup.gpu.name),
                            setup.model.is_moe or looks_moe(row.target), e.tau, setup.model.kind(),
                            tau_ceiling(prior_of(row, priors, cat), e.gamma, e.tau), hardware_known(row.hardware)))
    return out


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
    gpu = catalog_gpu(row.gpu)
    if not gpu:
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
    gpu = catalog_gpu(row.gpu)
    setup = Setup(cat.model(row.target), cat.gpu(gpu), row.gpus, profile or engine_profile(row.engine))
    arch = cat.model(row.draft)
    draft = DraftSpec("draft_model", arch.id, arch.params_b, model=arch)
    kv = CONTEXT + OUTPUT / 2
    target = forward_ms(setup, batch=1, tokens_per_seq=1, kv_len=kv, kv_dtype="auto")
    return draft_ms(setup, draft, gamma=1, batch=1, kv_len=kv, kv_dtype="auto") / target
