"""`recommend`: inputs → candidates (method × γ × KV dtype) → cost table → choose → render.

Every input is explicit (catalogs, priors, engine profile, tree, capability table); the defaults are
the shipped playbooks. The decision tree narrows the candidates and is reported rule by rule; the
performance model ranks what is left. The steps live beside this module: planner/candidates.py (what can run:
the release's capabilities, the drafts, the KV dtype), the cost model here, planner/gamma_schedule.py (the per-batch
γ), planner/pick.py (the evidence rule); planner/context.py holds what they share.
"""

from __future__ import annotations

from specops.capabilities import CapabilityTable, format_version, released_version
from specops.errors import CheckpointMissing, FitError, InputError
from specops.planner.archnotes import hybrid_note, moe_note
from specops.planner.candidates import check_drafts, check_kv_cache, check_vllm_capabilities, shipped_table
from specops.planner.catalog import Catalogs, at_precision, load_catalogs
from specops.planner.context import (
    NEAR_TIE,
    Context,
    candidate,
    check_fits,
    choose,
    gammas,
    meets,
    objective_score,
    prior_for,
    second_hand,
)
from specops.planner.gamma_schedule import build_schedule
from specops.planner.layout import describe, gpu_counts
from specops.planner.load import at_rate
from specops.planner.mitigations import priced
from specops.planner.perfmodel import PROFILE_SOURCES, EngineProfile, Setup, engine_profile, memory_estimate
from specops.planner.pick import check_evidence, evidence_for
from specops.planner.priors import Priors, default_priors
from specops.planner.tree import DecisionTree, TreeRule, evaluate_rule, load_tree
from specops.planner.types import (
    GPU,
    METHODS,
    DecisionStep,
    MeasuredModel,
    ModelSpec,
    RecommendRequest,
    WithheldLaunch,
)

__all__ = ["Context", "check_fits", "check_tensor_parallel", "evidence_for", "prior_for", "recommend", "resolve"]


def resolve(request: RecommendRequest, catalogs: Catalogs, profile: EngineProfile,
            withheld: list[WithheldLaunch] | None = None) -> tuple[ModelSpec, GPU, Setup]:
    """Catalog lookups and the checks that make a request impossible (InputError/FitError). With ``withheld`` (a list),
    a --quantization whose checkpoint specops does not know is priced at its precision and the missing checkpoint
    appended there (the launch is withheld, the prediction stands); without it, it is refused."""
    gpu = catalogs.gpu(request.gpu)
    try:
        model = catalogs.model(request.model, params_b=request.params_b, quantization=request.quantization,
                               active_params_b=request.active_params_b)
    except CheckpointMissing as exc:
        if withheld is None or request.quantization is None:
            raise
        model = at_precision(catalogs.model(request.model, params_b=request.params_b,
                                            active_params_b=request.active_params_b), request.quantization)
        withheld.append(WithheldLaunch(artifact="checkpoint", missing=exc.message, fix=exc.fix or ""))
    released_version(request.vllm_version)
    if request.data_parallel_size == 1:
        check_tensor_parallel(model, request.gpus)
    else:  # issue 44: attention data parallel, experts expert parallel, over the replica's GPUs
        from specops.planner.layout import check_data_parallel

        check_data_parallel(model, request)
    if request.context_len > model.max_context:
        raise InputError(f"--context-len {request.context_len} is over {model.id}'s limit of {model.max_context} tokens",
                         f"use --context-len ≤ {model.max_context}")
    if request.context_len + request.output_len > model.max_context:
        raise InputError(f"context {request.context_len} + output {request.output_len} tokens is over {model.id}'s "
                         f"limit of {model.max_context}", "shorten --context-len or --output-len")
    setup = Setup(model, gpu, request.gpus, profile, request.data_parallel_size > 1)
    mem = memory_estimate(setup, None, seq_tokens=1, kv_dtype="auto")
    if mem.weights_gib > mem.available_gib:
        from specops.planner.layout import fit_advice

        raise FitError(f"{model.id} weights ({mem.weights_gib:.1f} GiB) cannot fit {request.gpus}× {gpu.name} "
                       f"({mem.available_gib:.1f} GiB usable)", fit_advice(setup, request, catalogs))
    return model, gpu, setup


def check_tensor_parallel(model: ModelSpec, gpus: int) -> None:
    """Refuse a --gpus the model's heads do not split into, or that is not whole nodes of 8 when over one node
    (not for architectures specops only estimates); the fix lists the counts that work."""
    from specops.planner.layout import GPUS_PER_NODE

    counts = gpu_counts(model)
    if model.source.startswith("estimated") or gpus in counts:
        return
    why = (f"{model.id} has {model.heads} attention heads and {model.kv_heads} KV heads, which tensor parallelism "
           f"over {gpus} GPUs cannot split" if gpus <= GPUS_PER_NODE else
           f"over one node of {GPUS_PER_NODE} GPUs a replica is whole nodes of {GPUS_PER_NODE} (tensor parallel inside "
           "a node, pipeline parallel across nodes)")
    shown = [c for c in counts if c <= max(GPUS_PER_NODE, 2 * gpus)]
    raise InputError(f"--gpus {gpus}: {why}", "use --gpus " + ", ".join(describe(c) for c in shown))


def check_cost_model(ctx: Context, rule: TreeRule) -> DecisionStep:
    req = ctx.request
    rows = [candidate(ctx, "none", 0, req.batch_size)] if req.method in (None, "none") else []
    measured = ctx.measured.drafts() if ctx.measured is not None else None
    unmeasured = []
    for m in METHODS:
        if m == "none" or m not in ctx.drafts or not ctx.allowed(m):
            continue
        if measured is not None and "none" in measured and m not in measured and req.method != m:
            unmeasured.append(m)  # a measured ranking does not mix in roofline guesses
            continue
        for g in [req.num_speculative_tokens] if req.num_speculative_tokens else gammas(ctx, m):
            rows.append(candidate(ctx, m, g, req.batch_size))
    overridden = sorted({e.method for e in rows if ctx.measured_overrides(e.method)})
    for m in overridden:
        ctx.warn(f"{m} is ranked on {ctx.measured.label}, although rule {ctx.constraints.forbidden[m]} "
                 "would exclude it")
    if unmeasured:
        ctx.warn(f"{ctx.measured.label} ranks only what it measured; not ranked: {', '.join(unmeasured)} "
                 "(tune them too, or pin one with --method for a roofline estimate)")
    rows = [e for e in rows if e.memory.max_batch() >= 1 or e.method == req.method]  # runs no request at all
    if not rows:
        rows = [candidate(ctx, "none", 0, req.batch_size)]
    ctx.table_rows = rows
    chosen = choose(ctx, rows) if not req.method else max(rows, key=lambda e: objective_score(ctx, e))
    if not req.method and chosen.method != "none" and chosen.speedup < 1.0:
        chosen = next(e for e in rows if e.method == "none")
    ctx.chosen = ctx.picked = picked = chosen
    if ctx.constraints.schedule and chosen.method != "none" and not req.num_speculative_tokens:
        if ctx.schedule_supported:
            build_schedule(ctx)
        else:
            ctx.warn(f"vLLM {format_version(ctx.version)} has no per-batch-size γ schedule (from 0.24.0): "
                     f"one γ={chosen.gamma} is used at every batch size")
    chosen = ctx.chosen
    top = max(rows, key=lambda e: objective_score(ctx, e))
    n_methods = len({e.method for e in rows})
    what = "no speculation" if chosen.method == "none" else f"{chosen.method} γ={chosen.gamma}"
    outcome = (f"{what} with KV {chosen.kv_dtype}: predicted {chosen.speedup:.2f}x, TPOT {chosen.tpot_ms:.1f} ms "
               f"(best of {len(rows)} candidates over {n_methods} methods)")
    if (top is not picked and picked.method != "none" and not req.method
            and objective_score(ctx, top) > objective_score(ctx, picked)):
        outcome += (f"; chosen over {top.method} γ={top.gamma} ({top.speedup:.2f}x): within the {NEAR_TIE:.0%} tie "
                    "margin, a candidate with its own acceptance and no extra package, then the tree's preference "
                    "order, then the smaller γ, wins"
                    + (f" ({top.method}: {second_hand(top)})" if second_hand(top) else ""))
    if chosen.mitigations and chosen.unmitigated_tpot_ms:
        outcome += (f"; the launch carries {', '.join(chosen.mitigations)} (known-bug mitigation), priced: TPOT "
                    f"{chosen.unmitigated_tpot_ms:.1f} -> {chosen.tpot_ms:.1f} ms "
                    f"({priced(ctx.setup.profile, chosen.mitigations).note()})")
    if ctx.schedule_note:
        outcome += f"; {ctx.schedule_note}"
    if req.tpot_ms is not None and not meets(ctx, chosen):
        ctx.warn(f"no candidate meets --tpot-ms {req.tpot_ms:g} (best {chosen.tpot_ms:.1f} ms)")
    return DecisionStep(rule=rule.id, input=f"objective={req.objective}, batch={req.batch_size}", outcome=outcome)



CHECKS = {"vllm_capabilities": check_vllm_capabilities, "drafts": check_drafts, "kv_cache": check_kv_cache,
          "cost_model": check_cost_model, "evidence": check_evidence}


def run_tree(ctx: Context, tree: DecisionTree) -> list[DecisionStep]:
    req = ctx.request
    facts = {"params_b": ctx.model.params_b, "gpu_memory_gib": ctx.gpu.memory_gib, "gpus": req.gpus,
             "tpot_ms": req.tpot_ms, "task": req.task, "context_len": req.context_len,
             "temperature": req.temperature, "batch_size": req.batch_size, "has_mtp": bool(ctx.model.mtp_layers)}
    steps = []
    ctx.hard_rules = {rule.id for rule in tree.rules if rule.check}
    for rule in tree.rules:
        step = CHECKS[rule.check](ctx, rule) if rule.check else evaluate_rule(rule, facts, ctx.constraints)
        steps.append(step)
    _task_note(ctx, steps)
    moe_note(ctx, steps)
    hybrid_note(ctx, steps)
    if req.method and req.method in ctx.constraints.forbidden and req.method != "none":
        ctx.warn(f'--method {req.method} is evaluated as pinned; rule "{ctx.constraints.forbidden[req.method]}" '
                 "would not pick it")
    if req.num_speculative_tokens and req.num_speculative_tokens > ctx.constraints.max_gamma:
        ctx.warn(f"γ={req.num_speculative_tokens} is above the cap of {ctx.constraints.max_gamma} "
                 "the temperature rule sets")
    return steps


def _task_note(ctx: Context, steps: list[DecisionStep]) -> None:
    """Say on the task rule whether --task moved the chosen method's acceptance (published rows of that
    task class) or not (no such rows: the method's median over other tasks is used)."""
    e = ctx.chosen
    step = next((s for s in steps if s.rule == "task"), None)
    if step is None or e is None or e.method == "none":
        return
    from specops.planner.priors import TASK_CLASS

    cls = TASK_CLASS.get(ctx.request.task, ctx.request.task)
    est = getattr(prior_for(ctx, e.method), "evidence", None)
    if est is not None and e.prior_source.startswith("acceptance model"):  # specops.planner.acceptance
        step.outcome += "; " + est.task_note(e.method, ctx.request.task)
    elif f"(no {cls} row" in e.prior_source:
        step.outcome += (f"; no published {cls} rows for {e.method}: its acceptance is the median over its other "
                         f"tasks, so --task {ctx.request.task} does not change this prediction")
    elif "borrowed from" in e.prior_source:
        step.outcome += f"; {e.method}'s acceptance is borrowed from a related method ({e.prior_source})"
    elif e.prior_source.startswith("published"):
        step.outcome += f"; {e.method}'s acceptance from published {cls} rows"


def recommend(request: RecommendRequest, *, catalogs: Catalogs | None = None, priors: Priors | None = None,
              calibration: EngineProfile | None = None, tree: DecisionTree | None = None,
              capabilities: CapabilityTable | None = None, measured: MeasuredModel | None = None,
              residuals: tuple | None = None):
    """The Plan for one request. Defaults: the shipped catalogs, published priors, vLLM profile, tree.

    ``measured`` (a model fitted by ``specops tune``) replaces the roofline's speed for the
    configurations it measured, and only those are ranked (the baseline included)."""
    from specops.planner.render import build_plan

    catalogs = catalogs or load_catalogs()
    priors = priors or default_priors()
    profile = calibration or engine_profile(request.engine)

    def once(req: RecommendRequest):
        withheld: list[WithheldLaunch] = []
        model, gpu, setup = resolve(req, catalogs, profile, withheld)
        ctx = Context(req, model, gpu, setup, priors, capabilities or shipped_table(), catalogs, measured=measured,
                      residuals=residuals)
        for w in withheld:  # the checkpoint --quantization needs: predicted at its precision, no launch
            ctx.withhold(w, f"{w.missing}: predicted at {req.quantization}'s {model.weight_bits:g} bits per weight, "
                         f"and no launch is rendered. To fix: {w.fix}")
        steps = run_tree(ctx, tree or load_tree())
        if calibration is None:  # the profile that predicted is named on the cost model's step
            cost = next(s for s in steps if s.rule == "cost_model")
            cost.input += f", profile={profile.name} ({PROFILE_SOURCES.get(request.engine, '')})"
        return build_plan(ctx, steps)

    if request.qps is None:
        return once(request)
    return at_rate(request, once)
