"""Capacity with speculation (issue 44): which layout of a GPU pool serves a request rate within a TPOT/TTFT SLO
with the fewest GPUs, with or without speculation, and the rate above which speculation stops paying.

The pipeline (inputs → candidates → cost table → choose), every step reusing what `specops recommend` already has:

- candidates: every GPU count a replica can use (:func:`specops.planner.layout.gpu_counts`, the one layout
  enumerator: a TP size that divides the attention heads inside a node, whole nodes of 8 with pipeline stages
  over it), up to the pool; a mixture-of-experts model runs its experts expert-parallel over the same ranks
  (``--enable-expert-parallel``; the step-cost model prices the token exchange over those ranks either way,
  planner/moe.py ``all_to_all_ms``), and also gets data-parallel-attention layouts (``--data-parallel-size n
  --enable-expert-parallel``, TP 1 a rank: one copy of each sequence's KV, the dense weights on every rank;
  planner/perfmodel.py ``Setup.dp_attention``). More replicas of one layout are separate vLLM replicas. Per layout two configurations: no speculation, and
  the method and draft `recommend` picks for that layout at a light load.
- cost: one replica's capacity is the highest request rate whose plan (``recommend --qps``: Little's law over
  the step-cost model with prefill and decode sharing the GPU, the prompts' chunks riding on the decode steps,
  planner/load.py and planner/chunked_prefill.py) converges and whose loaded TPOT
  (and TTFT, when given) meets the SLO, found by bisection between 0 and the rate the prefills alone fill the GPU
  at. Meeting the SLO is taken to be monotone in the rate (TPOT and TTFT grow with it in the load model).
- choose: replicas = ceil(Q / capacity); the configuration that fits the pool with the fewest GPUs wins; ties go to
  the most headroom (replicas × capacity / Q − 1), then to no speculation (the simpler deployment).
- crossover: on the chosen layout, the per-replica rate above which the speculative plan's loaded TPOT is no
  lower than the baseline's (γ chosen by `recommend` at each rate, its per-batch schedule included).
- none fits: :class:`CapacityRefused` (exit 2) names the nearest feasible answer (the fewest GPUs that would
  serve Q, and the most one pool of N GPUs serves) as a fix the user can run.

Everything is passed in: ``plan_at(request) -> Plan`` is `recommend` with this installation's priors
(specops.api.capacity), so tests and the bench call it with the shipped defaults.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic import Field, model_validator

from specops.errors import InputError, SpecopsError
from specops.models import Strict
from specops.planner.types import Plan

if TYPE_CHECKING:
    from specops.planner.types import RecommendRequest

CROSSOVER_POINTS = 10
"""Rates scanned (geometric) for the crossover before it is bisected."""


class CapacityRefused(InputError):
    """No layout of the pool serves the rate within the SLO (exit 2); ``nearest`` is the closest answer."""


class CapacityRequest(Strict):
    """The question: a pool of GPUs, a request rate and an SLO (the workload and model are the base request's)."""

    gpus_available: int = Field(ge=1, le=4096, description="GPUs in the pool (--gpus-available).")
    qps: float = Field(gt=0, le=1e6, allow_inf_nan=False, description="Request rate the pool must serve (req/s).")
    tpot_slo_ms: float = Field(gt=0, le=1e5, allow_inf_nan=False,
                               description="Time per output token every request must meet under the load (ms).")
    ttft_slo_ms: float | None = Field(None, gt=0, le=1e7, allow_inf_nan=False,
                                      description="Time to first token under the load (ms); none: not checked.")


class CapacityRow(Strict):
    """One layout × configuration of the search: what one replica sustains within the SLO and what Q needs."""

    gpus_per_replica: int = Field(description="GPUs one replica uses (TP × PP).")
    tensor_parallel_size: int = Field(description="--tensor-parallel-size.")
    pipeline_parallel_size: int = Field(description="--pipeline-parallel-size (nodes of 8 GPUs).")
    expert_parallel: bool = Field(description="Experts split over the replica's GPUs (--enable-expert-parallel).")
    data_parallel_size: int = Field(1, description="Attention data-parallel ranks (--data-parallel-size; MoE: each "
                                    "rank caches only its own sequences, the experts expert parallel over the ranks).")
    method: str = Field(description="Speculative method (none: no speculation).")
    draft: str | None = Field(None, description="The draft (hub id), for draft-based methods.")
    capacity_rps: float = Field(description="Highest request rate one replica serves within the SLO (req/s; 0: "
                                "not even a light load meets it).")
    limited_by: str = Field(description="What stops the rate rising: TPOT, TTFT, prefill (the prompts alone fill "
                            "the GPU), queue (the batch that fits cannot keep up), memory, or an error.")
    replicas: int | None = Field(None, description="Replicas Q needs (null: capacity 0).")
    gpus_total: int | None = Field(None, description="replicas × GPUs per replica.")
    fits_pool: bool = Field(description="gpus_total ≤ the pool.")
    headroom: float | None = Field(None, description="replicas × capacity / Q − 1 (0.25: 25% spare).")
    note: str = Field("", description="Why a layout has no answer, or the plan's own note at the capacity.")


class CapacityPlan(Strict):
    """`specops recommend --gpus-available N --qps Q --tpot-slo MS`: the layouts tried and the one chosen."""

    model: str
    gpu: str
    gpus_available: int
    qps: float
    tpot_slo_ms: float
    ttft_slo_ms: float | None
    context_len: int
    output_len: int
    task: str
    rows: list[CapacityRow] = Field(description="Every layout × configuration tried.")
    chosen: CapacityRow = Field(description="The configuration that serves Q with the fewest GPUs.")
    per_replica_qps: float = Field(description="Q / replicas: the rate each replica of the chosen one serves.")
    plan: Plan = Field(description="`recommend`'s plan for one chosen replica at that rate (launch, evidence).")
    speculation_gain: float | None = Field(None, description="Chosen layout: capacity with speculation / without "
                                           "(null: no speculative configuration on it).")
    gpus_without_speculation: int | None = Field(None, description="Fewest GPUs of the pool that serve Q without "
                                                 "speculation (null: none does).")
    crossover_rps_per_replica: float | None = Field(None, description="Chosen layout: the per-replica rate above "
                                                    "which speculation's loaded TPOT is no better than none's.")
    crossover_rps: float | None = Field(None, description="That rate over the chosen replicas (the fleet's).")
    crossover_note: str = Field("", description="How the crossover was found, or why there is none.")
    capacity_low_rps: float | None = Field(None, description="Chosen speculative replica's capacity at the low end "
                                           "of the speedup's range (the uncertainty model's), per replica.")
    capacity_high_rps: float | None = Field(None, description="... at the high end of that range.")
    evidence: str = Field("", description="Where the chosen prediction's speedup and range come from.")
    evidence_near: bool | None = Field(None, description="False: no published row is near this configuration.")
    notes: list[str] = Field(default_factory=list, description="Assumptions and what was not modelled.")

    @model_validator(mode="after")
    def _chosen_fits(self):
        if not self.chosen.fits_pool:
            raise ValueError("the chosen configuration must fit the pool")
        return self


PlanAt = Callable[["RecommendRequest"], "Plan"]


def _verdict(plan: Plan, slo: CapacityRequest) -> tuple[bool, str]:
    """(meets the SLO, what fails) for a plan made at a rate."""
    ld = plan.load
    if ld is None or not ld.converged or ld.tpot_ms is None or ld.ttft_ms is None:
        return False, ("prefill" if ld is not None and ld.latency_s is None else "queue")
    if ld.tpot_ms > slo.tpot_slo_ms:
        return False, "TPOT"
    if slo.ttft_slo_ms is not None and ld.ttft_ms > slo.ttft_slo_ms:
        return False, "TTFT"
    return True, ""


def _rate_at_batch(n: int, prefill_ms: float, tpot_ms: float, output_len: int, slo: CapacityRequest,
                   ranks: int = 1, prefill_cost_ms: float | None = None,
                   own_prefill: float | None = None) -> tuple[float, str]:
    """(highest rate a batch of ``n`` keeps up with within ``slo``, what binds above it), by bisection over
    planner/load.py's ``loaded`` (prefills take ρ = rate × prefill of each second; TPOT/(1 − ρ); Little's law:
    rate × latency ≤ n). Every condition only gets worse as the rate rises."""
    from specops.planner.load import loaded

    def fails(q: float) -> str:
        ld = loaded(q, prefill_ms=prefill_ms, tpot_ms=tpot_ms, output_len=output_len, ranks=ranks,
                    prefill_cost_ms=prefill_cost_ms, own_prefill=own_prefill)
        if not ld.feasible:
            return "prefill"
        if q * ld.latency_s > n:
            return "queue"
        if ld.tpot_ms > slo.tpot_slo_ms:
            return "TPOT"
        if slo.ttft_slo_ms is not None and ld.ttft_ms > slo.ttft_slo_ms:
            return "TTFT"
        return ""

    from specops.speculation import bisect

    hi = 1000 / max(prefill_ms, 1e-9)
    first = fails(hi * 1e-6)
    if first:
        return 0.0, first
    edge = bisect(lambda q: 1.0 if fails(q) else 0.0, 0.5, hi * 1e-6, hi, iters=40)  # the one solver
    rate = edge * (1 - 1e-6)
    while fails(rate) and rate > hi * 1e-6:  # the solver's midpoint may sit a hair past the edge
        rate *= 1 - 1e-4
    return rate, fails(edge * (1 + 1e-6)) or "prefill"


def replica_capacity(plan_at: PlanAt, base: RecommendRequest, slo: CapacityRequest, *,
                     tpot_scale: float = 1.0, max_batch: int | None = None) -> tuple[float, str, Plan | None]:
    """(highest rate one replica of ``base`` serves within ``slo``, what limits it, the plan at the batch it runs).

    The plan at a batch does not depend on the rate, so the search is over batches: for each batch N (a geometric
    grid up to the batch that fits, then refined around the best) the highest rate N keeps up with within the SLO
    (:func:`_rate_at_batch`); the capacity is the best of them. That is the rate at which `recommend --qps`'s
    smallest keeping-up batch (planner/load.py ``at_rate``) still meets the SLO, since TPOT grows with the batch.
    ``tpot_scale`` > 1 asks the prediction for a TPOT that many times lower (a speedup at the low end of its
    range makes the real TPOT that much higher). ``max_batch``: the most requests in flight (a client's
    concurrency cap, as a benchmark's ``--max-concurrency``); None: the batch that fits."""
    from specops.planner.chunked_prefill import prefill_cost_ms
    from specops.planner.load import slowest_rank_batch

    plans: dict[int, Plan] = {}
    rates: dict[int, tuple[float, str]] = {}

    def rate(n: int) -> float:
        if n not in rates:
            plans[n] = p = plan_at(base.model_copy(update={
                "qps": None, "batch_size": slowest_rank_batch(n, base.data_parallel_size)}))
            rates[n] = _rate_at_batch(n, p.predicted.ttft_ms, p.predicted.tpot_ms * tpot_scale, base.output_len, slo,
                                      base.data_parallel_size, *prefill_cost_ms(base, p))
        return rates[n][0]

    rate(1)
    fit = max(1, plans[1].memory.max_batch_that_fits)
    capped = max_batch is not None and max_batch < fit
    fit = min(fit, max_batch) if max_batch is not None else fit
    grid, n = [], 1
    while n < fit:
        grid.append(n)
        n *= 2
    grid.append(fit)
    best = max(grid, key=lambda k: (rate(k), -k))
    i = grid.index(best)
    lo, hi = grid[max(0, i - 1)], grid[min(len(grid) - 1, i + 1)]
    while hi - lo > max(2, lo // 16):  # ternary search between the best grid point's neighbours, to ~6% of N
        a, b = lo + (hi - lo) // 3, hi - (hi - lo) // 3
        if rate(a) < rate(b):
            lo = a
        else:
            hi = b
    best = max(range(lo, hi + 1), key=lambda k: (rate(k), -k))
    cap, why = rates[best]
    if cap > 0 and best == fit and why == "queue":
        why = "concurrency" if capped else "memory"  # the batch allowed cannot keep up with more
    return cap, why, plans[best]


def _layouts(model, above: int, upto: int) -> list[tuple[int, int]]:
    """(GPUs, data-parallel ranks) of every replica layout: tensor parallel (1 rank), and for a mixture of experts
    attention data parallel with the experts expert parallel over one node's GPUs (planner/layout.py)."""
    from specops.planner.layout import data_parallel_counts, gpu_counts

    return [(g, 1) for g in gpu_counts(model, limit=64) if above < g <= upto] + \
        [(g, g) for g in data_parallel_counts(model) if above < g <= upto]


def _row(g: int, model, method: str, draft: str | None, cap: float, why: str, slo: CapacityRequest,
         note: str = "", dp: int = 1) -> CapacityRow:
    from specops.planner.layout import layout

    tp, pp = layout(g) if dp == 1 else (1, 1)
    replicas = math.ceil(slo.qps / cap - 1e-9) if cap > 0 else None
    total = replicas * g if replicas else None
    return CapacityRow(gpus_per_replica=g, tensor_parallel_size=tp, pipeline_parallel_size=pp,
                       expert_parallel=bool(model.is_moe and g > 1), data_parallel_size=dp, method=method, draft=draft,
                       capacity_rps=round(cap, 3), limited_by=why, replicas=replicas, gpus_total=total,
                       fits_pool=total is not None and total <= slo.gpus_available,
                       headroom=round(replicas * cap / slo.qps - 1, 3) if replicas else None, note=note)


def _rank(row: CapacityRow) -> tuple:
    return (row.gpus_total or math.inf, -(row.headroom or 0.0), row.method != "none")


def search(plan_at: PlanAt, base: RecommendRequest, slo: CapacityRequest, model, above: int = 0,
           upto: int | None = None) -> list[tuple[CapacityRow, Plan | None]]:
    """Every layout of more than ``above`` and at most ``upto`` (the pool) GPUs × (no speculation, recommend's
    light-load pick) with one replica's capacity."""
    out: list[tuple[CapacityRow, Plan | None]] = []
    for g, dp in _layouts(model, above, slo.gpus_available if upto is None else upto):
        at_g = base.model_copy(update={"gpus": g, "data_parallel_size": dp, "expert_parallel": bool(model.is_moe and g > 1),
                                       "tpot_ms": slo.tpot_slo_ms, "batch_size": 1, "qps": None})
        try:
            light = plan_at(at_g)
        except SpecopsError as exc:  # the weights do not fit, a TP the model refuses, ...
            from specops.errors import FitError

            out.append((_row(g, model, "none", None, 0.0, "memory" if isinstance(exc, FitError) else "error", slo,
                             note=exc.one_line(), dp=dp), None))
            continue
        configs = [("none", None)]
        if light.method != "none":
            configs.append((light.method, light.draft))
        for method, draft in configs:
            pinned = at_g.model_copy(update={"method": method, "draft": draft, "num_speculative_tokens": None})
            cap, why, plan = replica_capacity(plan_at, pinned, slo)
            note = (f"at {cap:.3g} req/s: batch {plan.predicted.effective_batch}, TPOT {plan.predicted.tpot_ms:.1f} ms "
                    f"before the prefills' share, TTFT {plan.predicted.ttft_ms:.0f} ms" if plan and cap > 0 else "")
            out.append((_row(g, model, method, draft, cap, why, slo, note=note, dp=dp), plan))
    return out


def crossover(plan_at: PlanAt, spec: RecommendRequest, slo_hi: float) -> tuple[float | None, str]:
    """The per-replica rate above which ``spec``'s loaded TPOT is no lower than no speculation's: a geometric scan of
    (0, ``slo_hi``], then bisection of the first change. None when speculation stays faster wherever no speculation
    keeps up (the note says up to which rate)."""
    none = spec.model_copy(update={"method": "none", "draft": None, "num_speculative_tokens": None})

    def state(q: float) -> str:  # "spec": speculation faster; "none": not; "gone": no speculation cannot keep up
        s, b = plan_at(spec.model_copy(update={"qps": q})).load, plan_at(none.model_copy(update={"qps": q})).load
        if b is None or b.tpot_ms is None or not b.converged:
            return "gone" if s is not None and s.tpot_ms is not None and s.converged else "none"
        if s is None or s.tpot_ms is None or not s.converged:
            return "none"
        return "spec" if s.tpot_ms < b.tpot_ms else "none"

    grid = [slo_hi * (1e-3 ** (1 - i / (CROSSOVER_POINTS - 1))) for i in range(CROSSOVER_POINTS)]
    if state(grid[0]) != "spec":
        return 0.0, "speculation is no faster than none even at the lightest load"
    prev = grid[0]
    for q in grid[1:]:
        now = state(q)
        if now == "spec":
            prev = q
            continue
        from specops.speculation import bisect

        hi = bisect(lambda x: 0.0 if state(x) == "spec" else 1.0, 0.5, prev, q, iters=5)  # the one solver
        past = state(hi)  # what follows speculation's lead: the scan's point may be further on
        now = now if past == "spec" else past  # (the solver's midpoint may sit a hair before the edge)  # what the first rate past speculation's lead is: the scan's point may be further on
        if now == "gone":
            return None, (f"speculation is faster at every rate no speculation keeps up with (up to {hi:.3g} req/s a "
                          "replica; above it only the speculative replica keeps up)")
        return hi, (f"the loaded TPOT with speculation reaches no speculation's at {hi:.3g} req/s a replica "
                    "(recommend's γ at each rate, its per-batch schedule included)")
    return None, f"speculation stays faster up to {slo_hi:.3g} req/s a replica (the prefill-bound rate)"


def plan_capacity(plan_at: PlanAt, base: RecommendRequest, slo: CapacityRequest, model) -> CapacityPlan:
    """The capacity answer for ``slo`` (raises :class:`CapacityRefused` when nothing in the pool serves it)."""
    found = search(plan_at, base, slo, model)
    rows = [r for r, _ in found]
    fits = sorted((r for r in rows if r.fits_pool), key=_rank)
    if not fits:  # the nearest answer may need bigger replicas than the pool holds: try them too
        more = [r for r, _ in search(plan_at, base, slo, model, above=slo.gpus_available,
                                     upto=max(2 * slo.gpus_available, 8))]
        raise _refusal(rows + more, slo, base, model)
    chosen = fits[0]
    per = slo.qps / (chosen.replicas or 1)
    pinned = base.model_copy(update={"gpus": chosen.gpus_per_replica, "data_parallel_size": chosen.data_parallel_size,
                                     "expert_parallel": chosen.expert_parallel, "tpot_ms": slo.tpot_slo_ms, "qps": per,
                                     "batch_size": 1, "method": chosen.method, "draft": chosen.draft,
                                     "num_speculative_tokens": None})
    plan = plan_at(pinned)
    meets, fails = _verdict(plan, slo)
    same = [r for r in rows if (r.gpus_per_replica, r.data_parallel_size) ==
            (chosen.gpus_per_replica, chosen.data_parallel_size)]
    none_row = next(r for r in same if r.method == "none")
    spec_row = next((r for r in same if r.method != "none"), None)
    gain = (round(spec_row.capacity_rps / none_row.capacity_rps, 3)
            if spec_row is not None and none_row.capacity_rps > 0 else None)
    without = min((r.gpus_total for r in rows if r.method == "none" and r.fits_pool and r.gpus_total), default=None)
    cross = note = None
    low = high = None
    if spec_row is not None and spec_row.capacity_rps > 0:
        spec_base = pinned.model_copy(update={"method": spec_row.method, "draft": spec_row.draft})
        hi_rate = 1000 / max(plan_at(spec_base.model_copy(update={"qps": None})).predicted.ttft_ms, 1e-6)
        cross, note = crossover(plan_at, spec_base, hi_rate * 0.999)
        light = plan_at(spec_base.model_copy(update={"qps": None}))
        p = light.predicted
        if p.speedup_low and p.speedup_high and p.speedup > 0:
            low = replica_capacity(plan_at, spec_base, slo, tpot_scale=p.speedup / p.speedup_low)[0]
            high = replica_capacity(plan_at, spec_base, slo, tpot_scale=p.speedup / p.speedup_high)[0]
    else:
        note = "no speculative configuration on this layout: no crossover"
    notes = [
        "capacity per replica: the highest rate whose `recommend --qps` plan converges with loaded TPOT (and TTFT) "
        "within the SLO (planner/load.py: prefill and decode share each GPU, the prompts' chunks riding on the decode "
        "steps as vLLM's chunked prefill packs them)",
        "replicas of one layout are separate vLLM replicas; the model prices no load imbalance between them and "
        "no router",
    ]
    if not meets:
        notes.append(f"warning: `recommend --qps {per:.3g}` on the chosen layout misses the SLO ({fails}) although the "
                     "batch search put the capacity above that rate: treat the headroom as unproven")
    if model.is_moe:
        notes.append("MoE: experts expert-parallel over each replica's GPUs (--enable-expert-parallel, rendered in the "
                     "launch); the step-cost model prices the token exchange over those ranks as it does under TP")
    if chosen.data_parallel_size > 1:
        notes.append(f"data-parallel attention: {chosen.data_parallel_size} ranks of TP 1 (--data-parallel-size), each "
                     "caching only its own sequences' KV and holding the dense weights whole; one request's prefill runs "
                     "on one rank (its routed experts on all), and the ranks step in lockstep: the decode waits for the "
                     "busiest rank (⌈batch / ranks⌉ sequences) and whenever any rank prefills")
    if low is not None:
        notes.append("capacity range: the TPOT SLO tightened/relaxed by the speedup's 80% range (speedup/low, "
                     "speedup/high) at batch 1, applied at every rate")
    p = plan.predicted
    return CapacityPlan(
        model=plan.model, gpu=plan.gpu, gpus_available=slo.gpus_available, qps=slo.qps, tpot_slo_ms=slo.tpot_slo_ms,
        ttft_slo_ms=slo.ttft_slo_ms, context_len=base.context_len, output_len=base.output_len, task=base.task,
        rows=rows, chosen=chosen, per_replica_qps=round(per, 3), plan=plan, speculation_gain=gain,
        gpus_without_speculation=without,
        crossover_rps_per_replica=None if cross is None else round(cross, 3),
        crossover_rps=None if cross is None else round(cross * (chosen.replicas or 1), 3), crossover_note=note or "",
        capacity_low_rps=None if low is None else round(low, 3),
        capacity_high_rps=None if high is None else round(high, 3),
        evidence=p.evidence or ("no speculation: the step-cost model alone" if plan.method == "none" else ""),
        evidence_near=p.evidence_near, notes=notes)


def _refusal(rows: list[CapacityRow], slo: CapacityRequest, base: RecommendRequest, model) -> CapacityRefused:
    served = [r for r in rows if r.capacity_rps > 0]
    if not served:
        why = sorted({r.limited_by for r in rows})
        return CapacityRefused(
            f"no layout of {slo.gpus_available}x {base.gpu} serves even a light load of {base.model} within TPOT "
            f"{slo.tpot_slo_ms:g} ms" + (f" / TTFT {slo.ttft_slo_ms:g} ms" if slo.ttft_slo_ms else "") +
            f" (limited by {', '.join(why)})",
            "relax --tpot-slo/--ttft-slo, shorten --context-len, or use a faster --gpu")
    need = min(served, key=_rank)
    most = max(served, key=lambda r: (slo.gpus_available // r.gpus_per_replica) * r.capacity_rps)
    most_q = (slo.gpus_available // most.gpus_per_replica) * most.capacity_rps
    what = "no speculation" if need.method == "none" else need.method
    fix = f"use --gpus-available {need.gpus_total} ({need.replicas} replicas of {need.gpus_per_replica} GPUs, {what})"
    if most_q > 0:
        fix += f", or use --qps {math.floor(most_q * 100) / 100:g} (the most {slo.gpus_available} GPUs serve)"
    return CapacityRefused(f"{slo.qps:g} req/s within TPOT {slo.tpot_slo_ms:g} ms"
                           + (f" / TTFT {slo.ttft_slo_ms:g} ms" if slo.ttft_slo_ms else "")
                           + f" needs more than {slo.gpus_available} GPUs: the nearest layout serving it needs "
                           f"{need.gpus_total} ({need.replicas} x {need.gpus_per_replica} GPUs, {what}, "
                           f"{need.capacity_rps:g} req/s a replica)", fix)
