"""The per-batch γ schedule (vLLM's ``num_speculative_tokens_per_batch_size``), shipped only when it pays for itself."""

from __future__ import annotations

from specops.capabilities import format_version
from specops.planner.context import NEAR_TIE, Context, candidate, gammas
from specops.speculation import SCHEDULE_METHODS

SCHEDULE_EDGES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def _schedule_ranges(ctx: Context) -> list[tuple[int, int]]:
    last = max(SCHEDULE_EDGES[-1], ctx.request.batch_size)
    ranges, start = [], 1
    for end in [*SCHEDULE_EDGES[1:-1], last]:
        if end >= start:
            ranges.append((start, end))
            start = end + 1
    return ranges


def _range_gamma(ctx: Context, method: str, rep: int) -> int:
    """γ for a batch range scored at batch ``rep`` under a schedule: :func:`best_gamma` (the smallest γ
    within NEAR_TIE of the best; 0 = K=0 where no γ beats no speculation)."""
    from specops.planner.perfmodel import best_gamma

    best = best_gamma([candidate(ctx, method, g, rep, schedule=True) for g in gammas(ctx, method)], near_tie=NEAR_TIE)
    return best.gamma if best else 0


def build_schedule(ctx: Context) -> None:
    """A per-batch γ schedule, shipped only when it pays for itself. Every range is scored the same way,
    whatever batch was asked: at its geometric middle (capped at the batch that fits), with the
    schedule's own cost counted (vllm#49548: every step slower, K=0 ranges included; see
    perfmodel.schedule_cost), γ = best_gamma there. γ never rises with batch: a range whose own best γ is
    above the previous range's takes the previous one (the model lets γ rise where KV or expert reads
    dominate, as MagicDec's optimal γ does, but no published serving sweep shows it; the path says when
    this applied). The schedule ships when it has more than one γ and its mean speedup over the ranges
    beats one γ without a schedule."""
    from specops.planner.perfmodel import schedule_cost

    chosen, req = ctx.chosen, ctx.request
    assert chosen is not None
    if chosen.method not in SCHEDULE_METHODS:
        ctx.schedule_note = (f"no schedule: vLLM {format_version(ctx.version)} drops it for {chosen.method} "
                             "(Model Runner V1); one γ is used at every batch size")
        return
    fit = max(1, chosen.memory.max_batch())
    schedule: list[tuple[int, int, int]] = []
    total_sched = total_single = 0.0
    at_request, capped = 0, []
    ranges = [(lo, hi) for lo, hi in _schedule_ranges(ctx) if lo <= fit]  # more never run at once
    for lo, hi in ranges:
        rep = max(1, min(round((lo * hi) ** 0.5), fit))
        own = k = _range_gamma(ctx, chosen.method, rep)
        if schedule and k > schedule[-1][2]:
            k = schedule[-1][2]
            capped.append(f"{lo}-{hi} (γ={own} there)")
        total_sched += (candidate(ctx, chosen.method, k, rep, schedule=True).speedup if k
                        else 1 / (1 + schedule_cost(rep)))
        total_single += candidate(ctx, chosen.method, chosen.gamma, rep).speedup
        if lo <= min(req.batch_size, fit) <= hi:
            at_request = k
        if schedule and schedule[-1][2] == k:
            schedule[-1] = (schedule[-1][0], hi, k)
        else:
            schedule.append((lo, hi, k))
    schedule[-1] = (schedule[-1][0], _schedule_ranges(ctx)[-1][1], schedule[-1][2])  # the last covers the rest
    n = len(ranges)
    kept = f"; γ kept from rising with batch at {', '.join(capped)}" if capped else ""
    if len({k for _, _, k in schedule}) < 2:
        ctx.schedule_note = (f"no schedule: one γ is best at every batch range, and a schedule alone costs "
                             f"{schedule_cost(2):.0%}-{schedule_cost(189):.0%} TPOT (vllm#49548){kept}")
        return
    if total_sched <= total_single or not at_request:
        why = (f"at batch {req.batch_size} it would run K=0" if not at_request else
               f"with its own cost (vllm#49548) it averages {total_sched / n:.2f}x over the batch ranges against "
               f"{total_single / n:.2f}x for γ={chosen.gamma} alone")
        ctx.schedule_note = f"no schedule {[list(r) for r in schedule]}: {why}{kept}"
        return
    ctx.schedule = schedule
    ctx.chosen = candidate(ctx, chosen.method, at_request, req.batch_size, schedule=True)
    ctx.schedule_note = (f"schedule {[list(r) for r in schedule]} (each range scored at its middle batch): averages "
                         f"{total_sched / n:.2f}x over the ranges against {total_single / n:.2f}x for γ={chosen.gamma} "
                         f"alone, its own cost (vllm#49548) counted; γ={at_request} at batch {req.batch_size}{kept}")
