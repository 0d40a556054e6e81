"""A request rate served by one engine: decode and prefill share the GPU.

At ``qps`` requests per second every request is prefilled once. Under chunked prefill (vLLM V1's default) its chunks
ride on decode steps, which read the weights anyway: a prefill takes C ms of the decode's time, the part of its
forward that the decode step does not already pay (planner/chunked_prefill.py; at most the plan's TTFT, P), so
prefills take ρ = qps·C/1000 of every second. What is left runs the decode steps, so a decode step's wall time
stretches to TPOT/(1 − ρ), and a new request waits for the prefills queued ahead of it (M/D/1:
P·ρ/(2(1 − ρ)) on average). ρ ≥ 1 is a rate the prefill alone cannot serve, whatever the batch.

Data-parallel attention over R ranks (one engine of R GPUs, the experts expert parallel over them): every step is
taken in lockstep (the MoE layers exchange tokens between all ranks), so a prefill chunk on one rank holds the
decode of all of them. Each rank gets qps/R of the prompts, each R times as long (one GPU), so it prefills ρ of its
time, and a step waits when any rank prefills: independent ranks stall the replica's decode 1 − (1 − ρ)^R of the time,
not ρ (the expected maximum of R ranks' step times, the DP load imbalance).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Loaded:
    """One request's latency at a rate."""

    prefill_share: float   # ρ: share of GPU time the prefills take (with R data-parallel ranks: the stall share)
    ttft_ms: float         # TTFT incl. the wait for queued prefills
    tpot_ms: float         # TPOT with the prefills interleaved
    latency_s: float       # TTFT + output × TPOT
    feasible: bool         # ρ < 1

    def limit_note(self, qps: float, prefill_ms: float, context_len: int) -> str:
        most = 1000 / prefill_ms if prefill_ms > 0 else float("inf")
        return (f"{qps:g} req/s of {context_len}-token prompts needs {qps * prefill_ms:.0f} ms of prefill per second "
                f"of GPU time ({qps * context_len:,.0f} prompt tokens/s at {prefill_ms:.0f} ms a prefill): the prefill "
                f"alone cannot keep up above {most:.1f} req/s; add GPUs, shorten the prompts or cache their prefixes")


def loaded(qps: float, *, prefill_ms: float, tpot_ms: float, output_len: int, ranks: int = 1,
           prefill_cost_ms: float | None = None, own_prefill: float | None = None) -> Loaded:
    """``prefill_ms``: one prefill's forward (the plan's TTFT); ``prefill_cost_ms``: the decode time it takes when its
    chunks ride on decode steps (planner/chunked_prefill.py; None: all of ``prefill_ms``, prefill run apart).
    ``ranks``: data-parallel attention ranks sharing the replica's prefills (both times are a prefill's share of the
    replica's GPUs); one request's prefill runs on one rank, ``own_prefill`` times as long (planner/chunked_prefill.py
    ``rank_prefill_factor``: its routed experts still run on all ranks; None: ``ranks`` times, an upper bound), so
    TTFT scales by that; the ranks step in lockstep, so the decode stalls whenever any of them prefills:
    1 − (1 − ρ)^ranks of the time."""
    cost = prefill_ms if prefill_cost_ms is None else min(prefill_cost_ms, prefill_ms)
    rho = qps * prefill_ms / 1000  # the prefill queue: a rank's time running whole prefills
    stall = 1 - (1 - min(qps * cost / 1000, 1.0)) ** max(1, ranks)
    if rho >= 1 or stall >= 1:
        return Loaded(max(rho, stall), float("inf"), float("inf"), float("inf"), False)
    ttft = prefill_ms * (ranks if own_prefill is None else own_prefill) * (1 + rho / (2 * (1 - rho)))
    tpot = tpot_ms / (1 - stall)
    return Loaded(stall, ttft, tpot, (ttft + output_len * tpot) / 1000, True)


def slowest_rank_batch(n: int, ranks: int) -> int:
    """The batch whose even split over ``ranks`` data-parallel ranks gives each the sequences of the busiest of them
    when ``n`` are in flight: vLLM's front end sends each request to the least-loaded rank (fewest waiting × 4 +
    running), so the busiest holds at least ⌈n / ranks⌉, and every lockstep step waits for it. The step-cost model
    spreads a batch evenly over the ranks, so a plan at ``ranks × ⌈n / ranks⌉`` prices the busiest rank's step."""
    return n if ranks <= 1 else ranks * math.ceil(n / ranks)


def at_rate(request, once):
    """Little's law: N requests in flight = qps × latency(N), latency = TTFT + output × TPOT of the plan made at
    batch N with the prefills of the arriving requests sharing the GPU (planner/load.py: TPOT/(1 − ρ), TTFT with
    the wait for queued prefills, ρ = qps × prefill time). The plan's batch is the smallest N that keeps up,
    ceil(qps × latency(N)) ≤ N: the first point of a geometric grid over 1..(the batch that fits) that keeps up,
    then bisection below it (at large N latency can grow faster than N/qps, so "N keeps up" is an interval, not
    every N above one). Data-parallel ranks: each N is priced at the busiest rank's share (:func:`slowest_rank_batch`).
    A rate whose prefills alone need the whole GPU (ρ ≥ 1), or that no N that fits keeps up
    with, is not converged, and the note names the limit."""
    from specops.planner.chunked_prefill import prefill_cost_ms
    from specops.planner.load import loaded
    from specops.planner.types import Load

    cache: dict[int, tuple] = {}

    def at(n: int):
        if n not in cache:
            plan = once(request.model_copy(update={"batch_size": slowest_rank_batch(n, request.data_parallel_size),
                                                   "qps": None}))
            cost, own = prefill_cost_ms(request, plan)
            ld = loaded(request.qps, prefill_ms=plan.predicted.ttft_ms, tpot_ms=plan.predicted.tpot_ms,
                        output_len=request.output_len, ranks=request.data_parallel_size, prefill_cost_ms=cost,
                        own_prefill=own)
            need = max(1, math.ceil(request.qps * ld.latency_s)) if ld.feasible else math.inf
            cache[n] = plan, ld, need
        return cache[n]

    def load(plan, ld, n: int, converged: bool, note: str) -> Load:
        return Load(qps=request.qps, concurrency=n, latency_s=round(ld.latency_s, 3) if ld.feasible else None,
                    iterations=len(cache), converged=converged, note=note, prefill_share=round(ld.prefill_share, 3),
                    ttft_ms=round(ld.ttft_ms, 1) if ld.feasible else None,
                    tpot_ms=round(ld.tpot_ms, 2) if ld.feasible else None)

    plan, ld, _ = at(1)
    if not ld.feasible:
        plan.load = load(plan, ld, 1, False, ld.limit_note(request.qps, plan.predicted.ttft_ms, request.context_len))
        plan.warnings.append(plan.load.note)
        return plan
    fit = max(1, plan.memory.max_batch_that_fits)
    # latency grows with N, faster than N/qps once the batch is large, so the N that keep up form an interval:
    # walk a geometric grid up to the batch that fits for the first N that keeps up, then bisect below it
    grid, n = [], 1
    while n < fit:
        grid.append(n)
        n = max(n + 1, int(n * 1.5))
    grid.append(fit)
    prev, hi = 0, None
    for n in grid:
        if at(n)[2] <= n:
            hi = n
            break
        prev = n
    if hi is None:
        plan, ld, need = at(fit)
        best = max((k * 1000 / c[1].tpot_ms for k, c in cache.items() if c[1].feasible), default=0.0)
        note = (ld.limit_note(request.qps, plan.predicted.ttft_ms, request.context_len) if not ld.feasible else
                f"{request.qps:g} req/s needs {need} requests in flight but {fit} fit at once: the queue grows without "
                f"bound (prefills take {ld.prefill_share:.0%} of the GPU; the decode then reaches at most {best:,.0f} "
                f"tokens/s against the {request.qps * request.output_len:,.0f} the rate asks); add GPUs or shorten the "
                "context")
        plan.load = load(plan, ld, fit, False, note)
        plan.warnings.append(plan.load.note)
        return plan
    lo = prev + 1  # at(hi) keeps up, at(prev) does not
    while lo < hi:
        mid = (lo + hi) // 2
        if at(mid)[2] <= mid:
            hi = mid
        else:
            lo = mid + 1
    plan, ld, need = at(hi)
    plan.load = load(plan, ld, hi, True, f"{request.qps:g} req/s at {ld.latency_s:.2f} s a request keeps {hi} requests "
                     f"in flight; prefills take {ld.prefill_share:.0%} of the GPU, so TPOT {plan.predicted.tpot_ms:.1f} "
                     f"-> {ld.tpot_ms:.1f} ms and TTFT {plan.predicted.ttft_ms:.0f} -> {ld.ttft_ms:.0f} ms under this load")
    return plan
