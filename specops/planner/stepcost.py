"""The step-cost model judged on its own: published no-speculation timings against the roofline.

A speedup is acceptance × cost; this module checks the cost half alone. Every row of
``playbooks/data/baselines_2026-12.csv`` is a published decode TPOT/ITL, TTFT, request latency or
throughput without speculation, with its model, GPU, tensor-parallel layout, batch, prompt and
output lengths, engine and whether CUDA graphs ran. :func:`predict_row` turns the perfmodel's step
time into the row's own metric:

- ``tpot_ms``: one decode step of ``batch`` sequences at KV length context + output/2;
- ``ttft_ms``: the prefill of one prompt;
- ``e2e_ms``: prefill of the batch + (output − 1) decode steps;
- ``user_tok_s`` / ``total_tok_s`` / ``static_tok_s``: output tokens over that latency (one request,
  or the whole batch).

:func:`fit_engine_profiles` fits, per engine class (vLLM, SGLang, TensorRT-LLM), the constants
the rows identify — the fixed step overhead and the achieved bandwidth — on the rows it is given,
shrinking toward the shared value when a class has few rows; :func:`step_loso` scores each source
with a fit made without it (:mod:`specops.planner.loso`).
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from specops.planner.catalog import Catalogs, load_catalogs
from specops.planner.loso import Scored, leave_one_source_out
from specops.planner.perfmodel import (
    EAGER_PROFILE,
    ENGINE_PROFILES,
    EngineProfile,
    Setup,
    eager_profile,
    forward_ms,
    prefill_ms,
)

DATA_FILE = "baselines_2026-12.csv"
METRICS = ("tpot_ms", "ttft_ms", "e2e_ms", "user_tok_s", "total_tok_s", "static_tok_s")
ENGINE_CLASSES = ("vllm", "sglang", "tensorrt-llm")


@dataclass(frozen=True)
class StepRow:
    """One published timing without speculation (a row of baselines_2026-12.csv)."""

    id: str
    source: str
    url: str
    location: str
    model: str
    engine: str
    gpu: str
    gpus: int
    tp: int
    weight_bits: float | None
    kv_dtype: str
    cuda_graphs: bool
    batch: int
    context_len: int
    output_len: int
    metric: str
    value: float
    derived: bool
    notes: str

    @property
    def engine_class(self) -> str:
        return self.engine if self.engine in ENGINE_CLASSES else "other"

    @property
    def decode(self) -> bool:
        """The metric is dominated by decode steps (everything but TTFT)."""
        return self.metric != "ttft_ms"


def load_step_rows() -> list[StepRow]:
    from specops.playbooks import playbook_path

    return list(_load(str(playbook_path("data", DATA_FILE))))


@lru_cache(maxsize=4)
def _load(path: str) -> tuple[StepRow, ...]:
    out = []
    with open(path, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if r["metric"] not in METRICS:
                raise ValueError(f"{DATA_FILE} row {r['id']}: unknown metric {r['metric']!r}")
            out.append(StepRow(
                id=r["id"], source=r["source"], url=r["url"], location=r["location"], model=r["model"],
                engine=r["engine"], gpu=r["gpu"], gpus=int(r["gpus"]), tp=int(r["tp"] or r["gpus"]),
                weight_bits=float(r["weight_bits"]) if r["weight_bits"] else None,
                kv_dtype=r["kv_dtype"] or "auto", cuda_graphs=r["cuda_graphs"] != "no", batch=int(r["batch"]),
                context_len=int(r["context_len"]), output_len=int(r["output_len"]), metric=r["metric"],
                value=float(r["value"]), derived=r["derived"] == "yes", notes=r["notes"]))
    return tuple(out)


def row_setup(row: StepRow, profile: EngineProfile, cat: Catalogs | None = None) -> Setup:
    model, gpu = _hardware(row, cat)
    return Setup(model, gpu, row.tp, eager_profile(profile) if not row.cuda_graphs else profile)


_HW: dict[str, tuple] = {}


def _hardware(row: StepRow, cat: Catalogs | None):
    key = row.id
    if key not in _HW or cat is not None:
        cat = cat or load_catalogs()
        model = cat.model(row.model)
        if row.weight_bits is not None:
            model = model.model_copy(update={"weight_bits": row.weight_bits})
        _HW[key] = (model, cat.gpu(row.gpu))
    return _HW[key]


def loaded_step_ms(setup: Setup, *, batch: int, context_len: int, output_len: int, kv_dtype: str,
                   step_ms: float | None = None) -> float:
    """Inter-token latency of ``batch`` requests served continuously: the decode step plus the prefills that
    share its steps. Each request is prefilled once per ``output_len`` decode steps, so the other batch − 1
    requests add (batch − 1)/output_len prefills of ``context_len`` tokens per step (their compute without
    the fixed per-forward overhead). One request alone (batch 1) pays none."""
    step = step_ms if step_ms is not None else forward_ms(
        setup, batch=batch, tokens_per_seq=1, kv_len=context_len + output_len / 2, kv_dtype=kv_dtype)
    if batch <= 1 or output_len <= 0:
        return step
    prefill = prefill_ms(setup, context_len, kv_dtype) - setup.profile.step_overhead_ms - setup.profile.prefill_overhead_ms
    return step + (batch - 1) / output_len * max(0.0, prefill)


def predict_row(row: StepRow, profile: EngineProfile, cat: Catalogs | None = None) -> float:
    """The model's value of the row's metric with ``profile``'s constants."""
    setup = row_setup(row, profile, cat)
    kv = row.kv_dtype
    if row.metric == "ttft_ms":
        return prefill_ms(setup, row.context_len, kv)
    step = forward_ms(setup, batch=row.batch, tokens_per_seq=1, kv_len=row.context_len + row.output_len / 2, kv_dtype=kv)
    if row.metric == "tpot_ms":  # inter-token latency under continuous serving: other requests' prefills share steps
        return loaded_step_ms(setup, batch=row.batch, context_len=row.context_len, output_len=row.output_len,
                              kv_dtype=kv, step_ms=step)
    prefill = forward_ms(setup, batch=row.batch, tokens_per_seq=row.context_len, kv_len=row.context_len / 2, kv_dtype=kv,
                         scored=row.batch) + setup.profile.prefill_overhead_ms
    e2e = prefill + max(0, row.output_len - 1) * step
    if row.metric == "e2e_ms":
        return e2e
    if row.metric == "user_tok_s":
        return row.output_len * 1000 / e2e
    return row.batch * row.output_len * 1000 / e2e  # total_tok_s, static_tok_s


def today_profile(row: StepRow) -> EngineProfile:
    """The profile the shipped model uses for a row: its engine's (made eager by :func:`row_setup` when
    CUDA graphs were off)."""
    return ENGINE_PROFILES.get(row.engine, EAGER_PROFILE)


# What a fit may move, per engine class, and the values it tries (coordinate descent, two passes).
GRID: dict[str, tuple[float, ...]] = {
    "step_overhead_ms": (0.05, 0.1, 0.2, 0.3, 0.4, 0.6, 0.8, 1.0, 1.3, 1.6, 2.0, 2.5, 3.0),
    "bandwidth_efficiency": (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95),
    "compute_efficiency": (0.35, 0.45, 0.55, 0.65, 0.75, 0.85),
    "prefill_compute_efficiency": (0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95),
    "prefill_overhead_ms": (0.0, 2.0, 5.0, 10.0, 20.0, 40.0),
    "expert_half_mb": (1.0, 2.0, 3.0, 4.7, 6.5, 9.4, 14.0),
    "moe_layer_overhead_ms": (0.0, 0.02, 0.04, 0.06, 0.08, 0.12, 0.16),
    # the TP all-reduce latency per interconnect, scaled together (x 1/4 ... 2 of the shipped values)
    "allreduce_ms_per_layer": tuple({k: v * f for k, v in ENGINE_PROFILES["vllm"].allreduce_ms_per_layer.items()}
                                    for f in (0.25, 0.5, 0.75, 1.0, 1.5, 2.0)),
}
MIN_CLASS_SOURCES = 3
"""An engine class is fitted on its own rows only when they come from at least this many sources;
otherwise it takes the fit pooled over every class (partial pooling by source count)."""


def weighted_median_error(scored: Sequence[tuple[StepRow, float]]) -> float:
    """Median |ln(published/predicted)| with each source weighing as one (a source's rows share 1)."""
    if not scored:
        return float("nan")
    per_source: dict[str, int] = {}
    for r, _ in scored:
        per_source[r.source] = per_source.get(r.source, 0) + 1
    items = sorted((abs(math.log(r.value / p)), 1 / per_source[r.source]) for r, p in scored if p > 0)
    half, acc = sum(w for _, w in items) / 2, 0.0
    for e, w in items:
        acc += w
        if acc >= half:
            return e
    return items[-1][0]


def weighted_mean_error(scored: Sequence[tuple[StepRow, float]]) -> float:
    """Mean |ln(published/predicted)| with each source weighing as one: the fit's objective (smoother than the
    median on a grid, and no source outvotes the others by publishing more rows)."""
    per_source: dict[str, int] = {}
    for r, _ in scored:
        per_source[r.source] = per_source.get(r.source, 0) + 1
    tot = sum(abs(math.log(r.value / p)) / per_source[r.source] for r, p in scored if p > 0)
    return tot / len(per_source) if per_source else float("nan")


PRIOR_WEIGHT = 0.0
"""The fit's pull toward the shipped constant: objective = weighted mean |ln error| + PRIOR_WEIGHT · Σ |ln(v/v₀)|
over the fitted constants (v₀: the shipped value), so a constant moves only when the rows clearly ask for it."""


def _fit_one(rows: Sequence[StepRow], start: EngineProfile, keys: Sequence[str]) -> EngineProfile:
    best, prior = start, ENGINE_PROFILES["vllm"]

    def penalty(prof: EngineProfile) -> float:
        tot = 0.0
        for k in keys:
            v, v0 = getattr(prof, k), getattr(start, k) if getattr(start, k) is not None else getattr(prior, k)
            if v0 is None:
                v0 = prof.compute_efficiency
            if isinstance(v, dict):  # the all-reduce latencies scale together: compare the NVLink one
                v, v0 = v.get("nvlink"), v0.get("nvlink")
            if v and v0:
                tot += abs(math.log(v / v0))
        return PRIOR_WEIGHT * tot

    for _ in range(2):
        for key in keys:
            trial = [best.model_copy(update={key: v}) for v in GRID[key]]
            scores = [weighted_mean_error([(r, predict_row(r, prof)) for r in rows]) + penalty(prof) for prof in trial]
            best = trial[min(range(len(trial)), key=scores.__getitem__)]
    return best


@dataclass(frozen=True)
class StepFit:
    """Engine profiles fitted on a set of baseline rows, and how each class got its constants."""

    profiles: dict[str, EngineProfile]
    how: dict[str, str]

    def profile(self, row: StepRow) -> EngineProfile:
        return self.profiles.get(row.engine_class, self.profiles["pooled"])


CLASS_KEYS = ("step_overhead_ms", "prefill_overhead_ms")
"""Fitted per engine class: the fixed cost of one forward (scheduler, launch, sampler) - what differs between
engines. The efficiencies are physics of the GPU and kernels, fitted once over every class's rows."""
SHARED_KEYS = ("expert_half_mb", "prefill_compute_efficiency", "allreduce_ms_per_layer")
"""Fitted once over every class's graph-captured rows. expert_half_mb (how efficiently grouped GEMMs read small
experts) joined in issue 37's third round: before, it was fixed at the 9.4 MB fitted on moe_baselines_2026-12.csv
and the held-out SGLang rows (Qwen3-30B-A3B at TP2/TP4, gpt-oss-20b) could not move it."""


def fit_engine_profiles(rows: Sequence[StepRow]) -> StepFit:
    """Fit the shared efficiencies on every graph-captured row, then each engine class's step overhead (and its
    MoE layer cost, when its MoE rows come from enough sources) on its own rows; a class with rows from fewer
    than MIN_CLASS_SOURCES sources keeps its shipped constants with the shared efficiencies."""
    graphs = [r for r in rows if r.cuda_graphs]
    shared = _fit_one(graphs, ENGINE_PROFILES["vllm"], SHARED_KEYS) if SHARED_KEYS else ENGINE_PROFILES["vllm"]
    update = {k: getattr(shared, k) for k in SHARED_KEYS}
    profiles = {"pooled": shared.model_copy(update={"name": "pooled"})}
    how = {"pooled": f"efficiencies fitted on {len(graphs)} rows from {len({r.source for r in graphs})} sources"}
    for cls in ENGINE_CLASSES:
        own = [r for r in graphs if r.engine_class == cls]
        n_src = len({r.source for r in own})
        start = ENGINE_PROFILES[cls].model_copy(update=update)
        if n_src >= MIN_CLASS_SOURCES:
            keys = list(CLASS_KEYS)
            if len({r.source for r in own if _hardware(r, None)[0].is_moe}) >= MIN_CLASS_SOURCES:
                pass  # keys.append("moe_layer_overhead_ms")
            profiles[cls] = _fit_one(own, start, keys)
            how[cls] = f"{', '.join(keys)} fitted on {len(own)} rows from {n_src} sources"
        else:
            profiles[cls] = start
            how[cls] = f"shipped constants ({len(own)} rows from {n_src} sources: fewer than {MIN_CLASS_SOURCES})"
    return StepFit(profiles, how)


def step_loso(rows: Sequence[StepRow]) -> list[Scored[StepRow]]:
    """Each source's rows predicted by profiles fitted on the other sources only."""
    return leave_one_source_out(rows, fit=fit_engine_profiles, predict=lambda fit, r: predict_row(r, fit.profile(r)),
                                published=lambda r: r.value)


IDEAL = EngineProfile(name="roofline-floor", bandwidth_efficiency=1.0, compute_efficiency=1.0, overlap_penalty=0.0,
                      step_overhead_ms=0.0, draft_step_overhead_ms=0.0, draft_layer_overhead_ms=0.0, draft_lm_overhead_ms=0.0,
                      token_overhead_ms=0.0,
                      allreduce_ms_per_layer={"nvlink": 0.0, "xgmi": 0.0, "pcie": 0.0, "none": 0.0}, sampler_bytes=0.0,
                      expert_half_mb=1e-6, moe_layer_overhead_ms=0.0, moe_link_gbs={}, prefill_overhead_ms=0.0)
"""Peak bandwidth and FLOP/s, no overheads: what no run of the stated setup can beat."""
FLOOR_MARGIN = 0.05


def beats_roofline(row: StepRow, cat: Catalogs | None = None) -> bool:
    """True when the published value is more than FLOOR_MARGIN better than the datasheet roofline of the row's
    stated setup allows (faster than reading its weights at peak bandwidth, or than its FLOPs at peak compute):
    the setup is misread or the measurement is not what its label says, so the row is shown but not scored.
    Only batch-1 rows are checked (at larger batch uniform routing over-counts a MoE's experts)."""
    if row.batch != 1:
        return False
    ideal = predict_row(row, IDEAL, cat)
    faster_is_lower = row.metric in ("tpot_ms", "ttft_ms", "e2e_ms")
    return row.value < ideal * (1 - FLOOR_MARGIN) if faster_is_lower else row.value > ideal * (1 + FLOOR_MARGIN)


def scored_rows(rows: Sequence[StepRow]) -> tuple[list[StepRow], list[StepRow]]:
    """(rows the LOSO scores, rows that beat their roofline and are only shown)."""
    bad = [r for r in rows if beats_roofline(r)]
    return [r for r in rows if r not in bad], bad


def loso_today(rows: Sequence[StepRow]) -> list[Scored[StepRow]]:
    """Today's constants are not fitted on these rows: every row is held out by construction."""
    return leave_one_source_out(rows, fit=lambda train: None, predict=lambda _m, r: predict_row(r, today_profile(r)),
                                published=lambda r: r.value)


def rows_for_model(model_id: str) -> list[str]:
    """Ids of the baseline rows measured on this catalog model (what its step cost has been checked against)."""
    return [r.id for r in load_step_rows() if r.model == model_id]


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


@dataclass(frozen=True)
class TauCostSplit:
    """A held-out speedup residual split into its two halves. The model's speedup is τ_m / c_m (c_m: the speculative
    step over the baseline step); a published row that also states its acceptance length τ_p says which half missed:
    ``cost_needed`` = τ_p / S_p is the step cost the published speedup S_p implies at the published τ, and
    ``speedup_at_published_tau`` = τ_p / c_m is the model's speedup with its own cost and the published τ."""

    published_speedup: float
    published_tau: float
    model_speedup: float
    model_tau: float

    @property
    def model_cost(self) -> float:
        return self.model_tau / self.model_speedup

    @property
    def cost_needed(self) -> float:
        return self.published_tau / self.published_speedup

    @property
    def speedup_at_published_tau(self) -> float:
        return self.published_tau / self.model_cost

    @property
    def tau_log_error(self) -> float:
        """ln(model τ / published τ): the acceptance half of ln(model speedup / published speedup)."""
        return math.log(self.model_tau / self.published_tau)

    @property
    def cost_log_error(self) -> float:
        """ln(cost needed / model cost): the cost half; the two halves sum to the speedup's log error."""
        return math.log(self.cost_needed / self.model_cost)


def tau_cost_split(residual) -> TauCostSplit | None:
    """Split an :class:`specops.planner.evidence.Residual` whose row states τ (None when it does not)."""
    if not residual.row.tau or not residual.row.speedup:
        return None
    return TauCostSplit(residual.row.speedup, residual.row.tau, residual.predicted, residual.tau)
