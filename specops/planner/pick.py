"""The ``evidence`` step: each candidate's calibrated range and chance of a gain (planner/uncertainty.py), and the
pick that weighs a slowdown against a missed gain."""

from __future__ import annotations

from specops.planner.context import Context, choose, meets, objective_score, prior_for
from specops.planner.gamma_schedule import build_schedule
from specops.planner.perfmodel import Evaluation
from specops.planner.tree import TreeRule
from specops.planner.types import DecisionStep


def evidence_for(ctx: Context, e: Evaluation):
    """The :class:`~specops.planner.uncertainty.Uncertainty` of ``e``'s speedup (None for no speculation). A
    candidate a measured model predicted gets the range of that model's own leave-one-configuration-out residuals
    (:mod:`specops.planner.measured_range`); with too few of them, or at a batch outside the concurrencies it
    measured, the published-evidence range an unmeasured candidate gets, for the measured speedup and τ, with a
    note saying so."""
    if e.method == "none":
        return None
    from specops.planner import uncertainty as unc

    measured = ctx.measured is not None and e.method in ctx.measured.drafts()
    own, note = None, ""
    if measured:
        from specops.planner.measured_range import assess_measured, fallback_note, within

        residuals = getattr(ctx.measured, "range_residuals", None)
        residuals = residuals() if residuals is not None else None
        if residuals is not None and within(residuals, e.effective_batch):
            own = assess_measured(e.speedup, e.tau, residuals, batch=e.effective_batch)
        if own is not None:
            return own
        note = fallback_note(residuals, ctx.measured.label, batch=e.effective_batch)
    if not isinstance(ctx.residuals, unc.RangeCalibration):
        ctx.residuals = (unc.default_calibration() if ctx.residuals is None
                         else unc.RangeCalibration(unc.points_from(ctx.residuals)))
    stratum = unc.stratum_of(engine=ctx.request.engine, method=e.method, kind=ctx.model.kind(), moe=ctx.model.is_moe,
                             batch=e.effective_batch)
    from specops.planner.published_runs import query_for

    query = query_for(names=[ctx.model.id, *ctx.model.names], method=e.method, gpu=ctx.gpu.name,
                      engine=stratum.engine, batch=e.effective_batch, task=ctx.request.task)
    # a measured τ comes from the engine's counters: the ceiling is τ itself, not the acceptance model's spread
    tau_high = e.tau if measured else unc.tau_ceiling(prior_for(ctx, e.method), e.gamma, e.tau)
    u = unc.assess(e.speedup, e.tau, stratum, ctx.residuals, tau_high=tau_high, method=e.method, query=query,
                   roofline_bias=not measured)  # the roofline's bias on published rows is not a measured model's
    return u.model_copy(update={"note": note}) if note else u


def _judged_line(e: Evaluation, ev) -> str:
    if ev is None:
        return f"{e.method} γ={e.gamma} {e.speedup:.2f}x (no range)"
    return (f"{e.method} γ={e.gamma} {e.speedup:.2f}x: P(gain) {ev.p_gain:.2f}, expected {ev.expected_speedup:.2f}x, "
            f"{ev.level:.0%} range {ev.speedup_low:.2f}-{ev.speedup_high:.2f}x, {ev.published_text()}")


def _warn_far(ctx: Context, chosen: Evaluation, ev) -> None:
    if ev is not None and ev.note:  # a measured candidate on the published range: say why, not "measure it"
        ctx.warn(f"{chosen.method}: {ev.note}", about=chosen.method)
    elif ev is not None and not ev.near:
        ctx.warn(f"no published row is near {chosen.method} at batch {chosen.effective_batch} on {ctx.gpu.name}"
                 f"{' (MoE)' if ctx.model.is_moe else ''}: the predicted {chosen.speedup:.2f}x extrapolates "
                 f"({ev.line()}); measure it (specops bench, specops tune) before relying on it", about=chosen.method)


def check_evidence(ctx: Context, rule: TreeRule) -> DecisionStep:
    """The pick that weighs a slowdown against a missed gain (specops.planner.uncertainty.pick): each
    method's candidate is the cost model's (its best γ and KV dtype by the point prediction); the pick is
    the best expected speedup among them with P(gain) ≥ the risk level (--min-p-gain) and an expected
    speedup above 1, falling through the better-by-point ones it refuses; no speculation when none
    qualifies. A pinned --method, or the cost model's pick with --allow-uncertain, is kept, with a
    warning when it misses the bar."""
    from specops.planner import uncertainty as unc

    req, chosen = ctx.request, ctx.chosen
    assert chosen is not None
    min_p = req.min_p_gain if req.min_p_gain is not None else unc.DEFAULT_MIN_P_GAIN
    rule_text = unc.rule_text(min_p)
    if req.method or (req.allow_uncertain and chosen.method != "none"):
        why = "--method pins it" if req.method else "--allow-uncertain keeps the cost model's pick"
        ev = ctx.evidence = evidence_for(ctx, chosen)
        _warn_far(ctx, chosen, ev)
        if ev is None:
            return DecisionStep(rule=rule.id, input=chosen.method, outcome="no speculation: nothing to qualify")
        if not unc.eligible(unc.Judged(chosen, chosen.speedup, ev), min_p):
            ctx.warn(f"{chosen.method} may be slower than no speculation: P(gain) {ev.p_gain:.2f} (below {min_p:.2f}), "
                     f"expected {ev.expected_speedup:.2f}x ({ev.line()}); kept because {why}", about=chosen.method)
        return DecisionStep(rule=rule.id, input=_judged_line(chosen, ev), outcome=f"keep {chosen.method} ({why}; "
                            f"the rule would be: {rule_text}): {ev.line()}")
    rows = [e for e in ctx.table_rows if e.method != "none"]
    rows = [e for e in rows if meets(ctx, e)] or rows
    feasible = [choose(ctx, [e for e in rows if e.method == m]) for m in dict.fromkeys(e.method for e in rows)]
    judged = {id(e): unc.Judged(e, e.speedup, evidence_for(ctx, e)) for e in feasible}
    ok = [e for e in feasible if unc.eligible(judged[id(e)], min_p)]
    picked = ctx.picked or chosen
    if ok:
        best = choose(ctx, ok, score=lambda e: objective_score(ctx, e) * judged[id(e)].expected / e.speedup)
    else:
        best = next(e for e in ctx.table_rows if e.method == "none")
    if best.method == picked.method and best is not picked and \
            unc.eligible(unc.Judged(picked, picked.speedup, evidence_for(ctx, picked)), min_p):
        best = picked  # the same method: the cost model's γ (and its schedule) stand
    refused = sorted({e.method: e for e in sorted(feasible, key=lambda e: e.speedup)
                      if e not in ok and e.speedup > best.speedup and e.method != best.method}.values(),
                     key=lambda e: -e.speedup)
    why = "; ".join(f"{_judged_line(e, judged[id(e)].u)}" for e in refused[:3])
    refusal = f"; refused (below the bar): {why}" if refused else ""
    inp = f"rule: {rule_text}; {len(ok)} of {len(feasible)} candidates qualify"
    if best.method == "none":
        ctx.chosen, ctx.schedule, ctx.schedule_note, ctx.evidence = best, None, None, None
        return DecisionStep(rule=rule.id, input=inp, outcome=f"no speculation: no candidate has P(gain) ≥ {min_p:.2f} "
                            f"and an expected speedup above 1{refusal}; pass --min-p-gain with a lower level (or "
                            "--allow-uncertain) to speculate anyway")
    if best is not picked:
        ctx.chosen, ctx.schedule, ctx.schedule_note = best, None, None
        if ctx.constraints.schedule and ctx.schedule_supported and not req.num_speculative_tokens:
            build_schedule(ctx)
    ev = ctx.evidence = evidence_for(ctx, ctx.chosen)
    _warn_far(ctx, ctx.chosen, ev)
    over = ""
    if best is not picked:
        rep = next((e for e in feasible if e.method == picked.method), None)  # its method's candidate
        pj = judged[id(rep)] if rep is not None else None
        why = "is not a candidate here" if pj is None else \
            f"expects less: {pj.expected:.2f}x" if rep in ok else f"does not qualify: P(gain) {pj.p_gain:.2f}"
        over = f" over the best by point, {picked.method} γ={picked.gamma} {picked.speedup:.2f}x, which {why}"
    what = f"keep {ctx.chosen.method} γ={ctx.chosen.gamma}"
    return DecisionStep(rule=rule.id, input=inp, outcome=f"{what}{over}{refusal}" + (f"; {ev.line()}" if ev else ""))
