"""What every step of `recommend`'s pipeline shares: the request's :class:`Context`, the candidate evaluation (the
performance model, its known-bug mitigations priced, or a measured model where `specops tune` measured it), and the
choice among candidates (score, near-ties, the TPOT target). The steps themselves: planner/candidates.py (what can
run), planner/recommend.py (the cost model), planner/gamma_schedule.py (the per-batch γ), planner/pick.py (the
evidence rule)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from specops.capabilities import CapabilityTable, parse_version
from specops.errors import FitError
from specops.planner.catalog import Catalogs
from specops.planner.layout import describe, gpu_counts
from specops.planner.mitigations import launch_mitigations, priced
from specops.planner.perfmodel import DraftSpec, Evaluation, Setup, evaluate, memory_estimate
from specops.planner.priors import Priors
from specops.planner.tree import Constraints
from specops.planner.types import GPU, MeasuredModel, ModelSpec, RecommendRequest, WithheldLaunch

NEAR_TIE = 0.02


@dataclass
class Context:
    """Everything the pipeline steps share for one request."""

    request: RecommendRequest
    model: ModelSpec
    gpu: GPU
    setup: Setup
    priors: Priors
    table: CapabilityTable
    catalogs: Catalogs
    constraints: Constraints = field(default_factory=Constraints)
    drafts: dict[str, DraftSpec] = field(default_factory=dict)
    kv_by_method: dict[str, str] = field(default_factory=dict)
    kv_allowed: list[str] = field(default_factory=list)
    schedule_supported: bool = True
    warnings: list[str] = field(default_factory=list)
    table_rows: list[Evaluation] = field(default_factory=list)
    chosen: Evaluation | None = None
    schedule: list[tuple[int, int, int]] | None = None
    schedule_note: str | None = None  # why a schedule was or was not shipped (shown in the decision path)
    measured: MeasuredModel | None = None  # a fitted model from `specops tune`: ranks what it measured
    hard_rules: set[str] = field(default_factory=set)  # rules that check facts (capabilities, drafts)
    residuals: object | None = None  # a specops.planner.uncertainty.RangeCalibration, or residuals (None: the shipped ones)
    evidence: object | None = None  # the chosen candidate's Uncertainty (specops.planner.uncertainty)
    picked: Evaluation | None = None  # the cost model's pick by point, before the evidence rule
    mitigation_cache: dict = field(default_factory=dict)  # (method, kv, draft) -> mitigation flags (planner/mitigations)
    warning_about: dict[str, str] = field(default_factory=dict)  # warning -> the method it is about
    withheld: list[WithheldLaunch] = field(default_factory=list)  # artifacts the launch lacks: no argv is rendered

    @property
    def version(self):
        return parse_version(self.request.vllm_version)

    def warn(self, text: str, about: str | None = None) -> None:
        """Add a warning once; ``about``: the method it concerns (dropped from the plan when another is picked)."""
        if text not in self.warnings:
            self.warnings.append(text)
        if about is not None:
            self.warning_about[text] = about

    def withhold(self, missing: WithheldLaunch, warning: str) -> None:
        """No launch for this plan: ``missing`` names the artifact and its fix (the prediction is kept); one warning."""
        if missing not in self.withheld:
            self.withheld.append(missing)
        self.warn(warning)

    def allowed(self, method: str) -> bool:
        pinned = self.request.method
        if pinned:
            return method == pinned
        return method not in self.constraints.forbidden or self.measured_overrides(method)

    def measured_overrides(self, method: str) -> bool:
        """A measured method is ranked even where a rule of thumb (a tree rule) excludes it; rules that
        check facts (vLLM capabilities, available drafts) still hold."""
        rule = self.constraints.forbidden.get(method)
        return (self.measured is not None and rule is not None and rule not in self.hard_rules
                and method in self.measured.drafts())


def check_fits(ctx: Context, chosen: Evaluation | None = None) -> None:
    """Refuse a plan that runs no request at all (one request's KV cache does not fit beside the weights - and
    the chosen draft's - with any KV dtype the release has), naming what would fit: more GPUs, a shorter
    context, no draft."""
    req, model = ctx.request, ctx.model
    tokens = req.context_len + req.output_len
    kvs = ctx.kv_allowed or ["auto"]
    draft = chosen.draft if chosen is not None and chosen.method != "none" else None

    def one_fits(setup: Setup, seq: int, kv: str, d: DraftSpec | None = draft) -> bool:
        return memory_estimate(setup, d, seq_tokens=seq, kv_dtype=kv).max_batch() >= 1

    if chosen is not None:
        if chosen.memory.max_batch() >= 1:
            return
    elif any(one_fits(ctx.setup, tokens, k) for k in kvs):
        return
    mem = memory_estimate(ctx.setup, draft, seq_tokens=tokens, kv_dtype="auto")
    fixes = []
    more = next((t for t in gpu_counts(model) if t > req.gpus and
                 any(one_fits(Setup(model, ctx.gpu, t, ctx.setup.profile), tokens, k) for k in kvs)), None)
    if more:
        fixes.append(f"--gpus {describe(more)}")
    fit = _longest_context(ctx, draft)
    if fit:
        fixes.append(f"--context-len {fit}" + (f" (with KV {kvs[-1]})" if kvs[-1] != "auto" else ""))
    if draft is not None and any(one_fits(ctx.setup, tokens, k, None) for k in kvs):
        fixes.append("--method none (no draft weights)")
    if len(kvs) == 1:
        fixes.append("a vLLM release with fp8 KV (--vllm-version 0.33.0)")
    beside = f"{model.id}'s weights" + (f" and the {chosen.method} draft ({mem.draft_gib:.1f} GiB)" if draft else "")
    raise FitError(f"not one request of {req.context_len}+{req.output_len} tokens fits {req.gpus}× {ctx.gpu.name} "
                   f"beside {beside} ({mem.weights_gib:.1f} GiB of weights, {mem.available_gib:.1f} GiB usable; KV "
                   f"dtypes tried: {', '.join(kvs)})", "use " + (" or ".join(fixes) if fixes else "a larger GPU"))


def _longest_context(ctx: Context, draft: DraftSpec | None = None) -> int | None:
    """The longest --context-len (a multiple of 256) whose one request fits with the most compressed KV dtype."""
    req = ctx.request
    kv = ctx.kv_allowed[-1] if ctx.kv_allowed else "auto"
    lo, hi = 0, req.context_len // 256
    while lo < hi:
        mid = (lo + hi + 1) // 2
        fits = memory_estimate(ctx.setup, draft, seq_tokens=mid * 256 + req.output_len, kv_dtype=kv).max_batch() >= 1
        lo, hi = (mid, hi) if fits else (lo, mid - 1)
    return lo * 256 or None

def prior_for(ctx: Context, method: str):
    """The acceptance prior of one candidate method (None without a draft)."""
    req, draft = ctx.request, ctx.drafts.get(method) if method != "none" else None
    if draft is None:
        return None
    ratio = draft.params_b / ctx.model.params_b if method == "draft_model" else None
    return ctx.priors.lookup(method, task=req.task, temperature=req.temperature, generation=draft.generation,
                             draft=draft.id, draft_ratio=ratio, target=ctx.model.id)


def candidate(ctx: Context, method: str, gamma: int, batch: int, *, schedule: bool = False) -> Evaluation:
    req = ctx.request
    draft = ctx.drafts.get(method) if method != "none" else None
    prior = prior_for(ctx, method)
    e = evaluate(ctx.setup, draft, prior, gamma=gamma if draft else 0, kv_dtype=ctx.kv_by_method[method],
                 batch=batch, context_len=req.context_len, output_len=req.output_len, schedule=schedule)
    flags = launch_mitigations(ctx, method, e.kv_dtype, draft.id if draft else None, e.gamma) if draft else ()
    if flags:  # the known-bug rows will add these to the launch: price them (planner/mitigations.py)
        pr = priced(ctx.setup.profile, flags)
        e = replace(evaluate(ctx.setup, draft, prior, gamma=gamma, kv_dtype=e.kv_dtype, batch=batch,
                             context_len=req.context_len, output_len=req.output_len, schedule=schedule,
                             spec_profile=pr.spec_profile, draft_kv_dtype=pr.draft_kv_dtype),
                    mitigations=flags, unmitigated_tpot_ms=e.tpot_ms)
    return _measured(ctx, e, method, gamma, batch)


def _measured(ctx: Context, e: Evaluation, method: str, gamma: int, batch: int) -> Evaluation:
    """The roofline row with its speed replaced by the fitted model's, when it measured this method
    (memory and TTFT stay the roofline's: tune does not measure them)."""
    if ctx.measured is None:
        return e
    p = ctx.measured.predict(method, gamma if method != "none" else 0, batch)
    base = ctx.measured.predict("none", 0, batch)
    if p is None or base is None:
        return e
    return replace(e, tpot_ms=p.tpot_ms, baseline_tpot_ms=base.tpot_ms, speedup=base.tpot_ms / p.tpot_ms,
                   throughput_tok_s=p.tokens_per_s, baseline_throughput_tok_s=base.tokens_per_s, tau=p.tau,
                   acceptance_rate=p.acceptance_rate if method != "none" else e.acceptance_rate,
                   prior_source=ctx.measured.label)


def gammas(ctx: Context, method: str) -> list[int]:
    """γ candidates: 1..cap, or the γ values the fitted model measured for this method (≤ cap)."""
    cap = ctx.constraints.max_gamma
    if ctx.measured is not None and method in ctx.measured.drafts():
        return [g for g in ctx.measured.gammas(method) if 1 <= g <= cap] or list(range(1, cap + 1))
    return list(range(1, cap + 1))


def objective_score(ctx: Context, e: Evaluation) -> float:
    return e.throughput_tok_s if ctx.request.objective == "throughput" else e.speedup


def meets(ctx: Context, e: Evaluation) -> bool:
    return ctx.request.tpot_ms is None or e.tpot_ms <= ctx.request.tpot_ms


EXTRA_PACKAGE = {"suffix": "arctic-inference"}
"""Methods that need a package the vLLM wheel does not bring (docs/reference: suffix decoding)."""


def second_hand(e: Evaluation) -> str:
    """Why a candidate's case is weaker than its number: its acceptance is not its own (borrowed from a
    related method, or a default) or it needs an extra package. Such candidates lose near-ties."""
    why = []
    if "borrowed from" in e.prior_source or e.prior_source.startswith("default"):
        why.append("its acceptance is not its own (" + e.prior_source.split("(")[-1].rstrip(")") + ")")
    if e.method in EXTRA_PACKAGE:
        why.append(f"it needs {EXTRA_PACKAGE[e.method]}")
    return " and ".join(why)


def choose(ctx: Context, rows: list[Evaluation], score=None) -> Evaluation:
    """The best by ``score`` (default :func:`objective_score`), near-ties broken by own acceptance, the tree's
    preference order and the smaller γ."""
    score = score or (lambda e: objective_score(ctx, e))
    feasible = [e for e in rows if meets(ctx, e)] or rows
    best = max(score(e) for e in feasible)
    near = [e for e in feasible if score(e) >= best * (1 - NEAR_TIE)]
    prefer = ctx.constraints.prefer

    def rank(e: Evaluation) -> tuple:
        order = prefer.index(e.method) if e.method in prefer else len(prefer)
        return (-score(e) if e.method == "none" else 0, bool(second_hand(e)), order, e.gamma)

    top = [e for e in near if e.method != "none"] or near
    return min(top, key=rank)
