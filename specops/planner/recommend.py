"""`recommend`: inputs → candidates (method × γ × KV dtype) → cost table → choose → render.

Every input is explicit (catalogs, priors, engine profile, tree, capability table); the defaults are
the shipped playbooks. The decision tree narrows the candidates and is reported rule by rule; the
performance model ranks what is left.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache

from specops.capabilities import (
    CapabilityTable,
    default_table,
    format_version,
    parse_version,
    released_version,
)
from specops.errors import CapabilityError, FitError, InputError
from specops.planner.archnotes import hybrid_note, moe_note
from specops.planner.catalog import Catalogs, draft_from_name, generic_model, load_catalogs
from specops.planner.layout import describe, gpu_counts
from specops.planner.load import at_rate
from specops.planner.mitigations import launch_mitigations, priced
from specops.planner.perfmodel import (
    PROFILE_SOURCES,
    DraftSpec,
    EngineProfile,
    Evaluation,
    Setup,
    engine_profile,
    evaluate,
    head_params,
    memory_estimate,
)
from specops.planner.priors import Priors, default_priors
from specops.planner.tree import Constraints, DecisionTree, TreeRule, evaluate_rule, load_tree
from specops.planner.types import (
    DRAFT_WEIGHT_METHODS,
    GPU,
    METHODS,
    DecisionStep,
    DraftRef,
    MeasuredModel,
    ModelSpec,
    RecommendRequest,
)
from specops.speculation import SCHEDULE_METHODS

KV_ORDER = ("auto", "fp8", "turboquant_k8v4", "turboquant_4bit_nc")  # least to most compressed
SCHEDULE_EDGES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
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

    @property
    def version(self):
        return parse_version(self.request.vllm_version)

    def warn(self, text: str, about: str | None = None) -> None:
        """Add a warning once; ``about``: the method it concerns (dropped from the plan when another is picked)."""
        if text not in self.warnings:
            self.warnings.append(text)
        if about is not None:
            self.warning_about[text] = about

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


def resolve(request: RecommendRequest, catalogs: Catalogs, profile: EngineProfile) -> tuple[ModelSpec, GPU, Setup]:
    """Catalog lookups and the checks that make a request impossible (InputError/FitError)."""
    gpu = catalogs.gpu(request.gpu)
    model = catalogs.model(request.model, params_b=request.params_b, quantization=request.quantization,
                           active_params_b=request.active_params_b)
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


# --- pipeline steps named by check rules ------------------------------------------------------------

def check_vllm_capabilities(ctx: Context, rule: TreeRule) -> DecisionStep:
    v, vs = ctx.version, format_version(ctx.version)
    removed = []
    for m in METHODS:
        if m == "none":
            continue
        ok, why = ctx.table.runnable_method(m, v) if v >= (0, 8, 2) else _v0_runnable(ctx, m)
        if not ok:
            if ctx.request.method == m:
                row = ctx.table.lookup("method", m)
                if row is not None and not row.present_in(v):
                    ctx.table.require("method", m, v)
                raise CapabilityError(f'method "{m}" is not runnable in vLLM {vs} ({why})',
                                      "choose another --method or --vllm-version")
            ctx.constraints.forbidden.setdefault(m, rule.id)
            removed.append(m)
    ctx.schedule_supported = ctx.table.has("field", "num_speculative_tokens_per_batch_size", v)
    ctx.kv_allowed = [k for k in KV_ORDER if k == "auto" or ctx.table.has("kv_dtype", k, v)]
    if ctx.request.kv_cache_dtype:
        ctx.kv_allowed = [pin_kv_dtype(ctx, ctx.request.kv_cache_dtype)]
    for bug in ctx.table.bugs(v, effect="refuse"):  # method × KV dtype combinations the engine gets wrong
        if sorted(k for k, _ in bug.when) != ["kv_dtype", "method"]:
            continue
        for m in bug.condition("method") or ():
            for kv in bug.condition("kv_dtype") or ():
                ctx.constraints.forbidden_combos.append((m, kv.rstrip("*"), f"known bug {bug.issue()} in {vs}"))
    pinned = ctx.request.kv_cache_dtype and ctx.kv_allowed[0]
    for m, k, _why in ctx.constraints.forbidden_combos if pinned else ():
        if pinned.startswith(k) and m not in ctx.constraints.forbidden and ctx.request.method != m:
            ctx.constraints.forbidden[m] = rule.id  # cannot run with the pinned KV dtype
            removed.append(f"{m} (with --kv-cache-dtype {pinned})")
    parts = [f"removed {', '.join(removed)}" if removed else "all methods available"]
    parts.append("per-batch schedule available" if ctx.schedule_supported else "no per-batch schedule (from 0.24.0)")
    parts.append("KV dtypes " + ", ".join(ctx.kv_allowed))
    if ctx.constraints.forbidden_combos:
        parts.append("; ".join(f"{m}+{k}* avoided ({why})" for m, k, why in ctx.constraints.forbidden_combos))
    return DecisionStep(rule=rule.id, input=f"vllm_version={vs}", outcome="; ".join(parts))


def _v0_runnable(ctx: Context, method: str) -> tuple[bool, str]:
    """Before 0.8.2 the V0 engine speculates through --speculative-model: what the launch renderer can express
    for this release (specops.engines.argv), so an unpinned plan picks only what the release has."""
    from specops.engines.argv import LaunchConfig, speculative_config
    from specops.errors import SpecopsError
    from specops.speculation import needs_draft

    cfg = LaunchConfig(vllm_version=ctx.request.vllm_version, model=ctx.model.id, method=method,
                       draft_model="draft" if needs_draft(method) else None, num_speculative_tokens=1)
    try:
        speculative_config(cfg, ctx.table)
    except SpecopsError as exc:
        return False, exc.message
    return True, ""


def _typical_draft(ctx: Context, method: str) -> DraftSpec:
    model = ctx.model
    if method in ("draft_model", "dflash"):
        size = max(0.1, model.params_b / 16) if method == "draft_model" else head_params(model, method) / 1e9
        arch = generic_model(f"<{method} draft for {model.id}>", size)
        return DraftSpec(method, f"<{method} draft for {model.id}>", size, model=arch, typical=True)
    gen = "3" if method == "eagle3" else None
    return DraftSpec(method, f"<{method} draft for {model.id}>", head_params(model, method) / 1e9, gen, typical=True)


def _spec_from_ref(ctx: Context, ref: DraftRef) -> DraftSpec:
    if ref.method in ("draft_model",):
        arch = ctx.catalogs.catalog_model(ref.id)
        if arch is None:
            size = ref.params_b or max(0.1, ctx.model.params_b / 16)
            arch = generic_model(ref.id, size)
        return DraftSpec(ref.method, ref.id, arch.params_b, model=arch)
    params = ref.params_b or head_params(ctx.model, ref.method) / 1e9
    return DraftSpec(ref.method, ref.id, params, ref.generation)


def shipped_table() -> CapabilityTable:
    """The shipped capability table (:func:`specops.capabilities.default_table`), parsed once per set of
    inputs and read back from :mod:`specops.planner.diskcache` (the CSV's validation is most of its cost)."""
    from specops.playbooks import playbooks_dir

    return _shipped_table(str(playbooks_dir()))


@lru_cache(maxsize=4)
def _shipped_table(_playbooks: str) -> CapabilityTable:
    from specops.planner.diskcache import cached

    return cached("capabilities", default_table)


def _draft_served(ref: DraftRef, vllm_version: str) -> bool:
    """False when the catalog says the draft needs a newer vLLM than the one rendered for."""
    return not ref.min_vllm or parse_version(vllm_version) >= parse_version(ref.min_vllm)


def check_drafts(ctx: Context, rule: TreeRule) -> DecisionStep:
    req, found, missing = ctx.request, [], []
    if req.draft:
        ref = draft_from_name(req.draft, ctx.model, ctx.catalogs)
        if not _draft_served(ref, req.vllm_version):
            raise CapabilityError(f"--draft {ref.id} needs vLLM >= {ref.min_vllm} (the catalog, from its model card); "
                                  f"--vllm-version is {req.vllm_version}",
                                  f"use --vllm-version {ref.min_vllm} or later, or another draft")
        if req.method and req.method != ref.method and not (req.method == "dflash" and ref.method == "draft_model"):
            raise InputError(f'--draft {req.draft} is a {ref.method} draft but --method is {req.method}',
                             f"use --method {ref.method} or another draft")
        method = req.method or ref.method
        ctx.drafts[method] = _spec_from_ref(ctx, ref.model_copy(update={"method": method}))
        for m in METHODS:  # a named draft pins its method
            if m != method:
                ctx.constraints.forbidden.setdefault(m, rule.id)
        return DecisionStep(rule=rule.id, input=f"draft={req.draft}",
                            outcome=f"using the given draft ({method}, {ctx.drafts[method].params_b:.2f}B)")
    if ctx.measured is not None:
        for m, draft in ctx.measured.drafts().items():
            if draft and m in DRAFT_WEIGHT_METHODS:  # its speed was measured with this draft: it replaces
                ctx.drafts[m] = _spec_from_ref(ctx, DraftRef(id=draft, method=m))  # a catalog one
                found.append(f"{m}: {draft} (measured, {ctx.measured.label})")
    for ref in ctx.model.drafts:
        if ref.method not in ctx.drafts:
            if not _draft_served(ref, req.vllm_version):
                found.append(f"{ref.method}: {ref.id} skipped (needs vLLM >= {ref.min_vllm})")
                continue
            ctx.drafts[ref.method] = _spec_from_ref(ctx, ref)
            found.append(f"{ref.method}: {ref.id}")
    if ctx.model.mtp_layers:
        ctx.drafts["mtp"] = DraftSpec("mtp", None, head_params(ctx.model, "mtp") / 1e9)
        found.append(f"mtp: {ctx.model.mtp_layers} native module(s)")
    for m in ("ngram", "suffix"):
        ctx.drafts[m] = DraftSpec(m, None, 0.0)
    for m in (*DRAFT_WEIGHT_METHODS, "mtp"):
        if m in ctx.drafts:
            continue
        if req.method == m:
            from specops.planner.servable import refuse_unservable

            refuse_unservable(ctx, m)  # no MTP layers / no draft: refused with what works
            ctx.drafts[m] = _typical_draft(ctx, m)
            ctx.warn(f"specops does not know {ctx.model.id}'s MTP layers ({ctx.model.source}): predicted with a typical "
                     f"{ctx.drafts[m].params_b:.2f}B module; check that its config.json has num_nextn_predict_layers")
        else:
            ctx.constraints.forbidden.setdefault(m, rule.id)
            missing.append(m)
    outcome = ("known: " + "; ".join(found)) if found else "no trained drafts known"
    if missing:
        outcome += f"; not considered (no known draft): {', '.join(m for m in missing if m != 'mtp')}"
        if "mtp" in missing:
            outcome += "; mtp: the model ships no MTP heads"
    return DecisionStep(rule=rule.id, input=f"model={ctx.model.id}", outcome=outcome)


def pin_kv_dtype(ctx: Context, kv: str) -> str:
    """--kv-cache-dtype, validated against the KV dtypes the model prices and the vLLM version has."""
    from specops.planner.perfmodel import KV_ELEMENT_BYTES

    kv = kv.strip().lower()
    vs = format_version(ctx.version)
    have = sorted(k for k in KV_ELEMENT_BYTES if k == "auto" or ctx.table.has("kv_dtype", k, ctx.version))
    if kv not in KV_ELEMENT_BYTES:
        raise InputError(f"--kv-cache-dtype {kv} is not a KV cache dtype specops knows",
                         f"use one of {', '.join(have)}")
    if kv != "auto" and not ctx.table.has("kv_dtype", kv, ctx.version):
        row = ctx.table.lookup("kv_dtype", kv)
        since = f" (vLLM {row.span()})" if row is not None else ""
        raise InputError(f"--kv-cache-dtype {kv} is not in vLLM {vs}{since}",
                         f"use one of {', '.join(have)}, or a --vllm-version that has {kv}")
    return kv


def _kv_for(ctx: Context, method: str) -> str:
    req = ctx.request
    if req.kv_cache_dtype:  # pinned: the candidates that cannot run with it were removed by the capability step
        return ctx.kv_allowed[0]
    draft = ctx.drafts.get(method) if method != "none" else None
    options = [k for k in ctx.kv_allowed
               if not any(method == m and k.startswith(p) for m, p, _ in ctx.constraints.forbidden_combos)]
    options = options or ["auto"]
    for k in options:
        mem = memory_estimate(ctx.setup, draft, seq_tokens=req.context_len + req.output_len, kv_dtype=k)
        if mem.fits(req.batch_size):
            return k
    return options[-1]


def check_kv_cache(ctx: Context, rule: TreeRule) -> DecisionStep:
    req = ctx.request
    check_fits(ctx)
    for m in [*ctx.drafts, "none"]:
        ctx.kv_by_method[m] = _kv_for(ctx, m)
    base = ctx.kv_by_method["none"]
    mem = memory_estimate(ctx.setup, None, seq_tokens=req.context_len + req.output_len, kv_dtype="auto")
    need = mem.weights_gib + mem.kv_gib(req.batch_size)
    shown = f"batch={req.batch_size}, context={req.context_len}+{req.output_len}"
    if req.kv_cache_dtype:
        pinned = memory_estimate(ctx.setup, None, seq_tokens=req.context_len + req.output_len, kv_dtype=base)
        verdict = "fits" if pinned.fits(req.batch_size) else f"does not fit the batch (max batch {pinned.max_batch()})"
        return DecisionStep(rule=rule.id, input=shown + f", kv_cache_dtype={base} (pinned)",
                            outcome=f"{base}: pinned by --kv-cache-dtype; weights + KV = "
                            f"{pinned.weights_gib + pinned.kv_gib(req.batch_size):.1f} GiB of "
                            f"{pinned.available_gib:.1f} GiB usable, {verdict}")
    if base == "auto":
        outcome = f"auto: weights + KV = {need:.1f} GiB of {mem.available_gib:.1f} GiB usable"
    else:
        fits = memory_estimate(ctx.setup, None, seq_tokens=req.context_len + req.output_len, kv_dtype=base)
        verdict = "fits" if fits.fits(req.batch_size) else f"still does not fit (max batch {fits.max_batch()})"
        outcome = (f"{base}: auto would need {need:.1f} GiB of {mem.available_gib:.1f} GiB; {base} {verdict}")
    others = {m: k for m, k in ctx.kv_by_method.items() if k != base}
    if others:
        outcome += "; with draft weights: " + ", ".join(f"{m} {k}" for m, k in others.items())
    return DecisionStep(rule=rule.id, input=shown, outcome=outcome)


def prior_for(ctx: Context, method: str):
    """The acceptance prior of one candidate method (None without a draft)."""
    req, draft = ctx.request, ctx.drafts.get(method) if method != "none" else None
    if draft is None:
        return None
    ratio = draft.params_b / ctx.model.params_b if method == "draft_model" else None
    return ctx.priors.lookup(method, task=req.task, temperature=req.temperature, generation=draft.generation,
                             draft=draft.id, draft_ratio=ratio, target=ctx.model.id)


def _eval(ctx: Context, method: str, gamma: int, batch: int, *, schedule: bool = False) -> Evaluation:
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


def _gammas(ctx: Context, method: str) -> list[int]:
    """γ candidates: 1..cap, or the γ values the fitted model measured for this method (≤ cap)."""
    cap = ctx.constraints.max_gamma
    if ctx.measured is not None and method in ctx.measured.drafts():
        return [g for g in ctx.measured.gammas(method) if 1 <= g <= cap] or list(range(1, cap + 1))
    return list(range(1, cap + 1))


def _score(ctx: Context, e: Evaluation) -> float:
    return e.throughput_tok_s if ctx.request.objective == "throughput" else e.speedup


def _meets(ctx: Context, e: Evaluation) -> bool:
    return ctx.request.tpot_ms is None or e.tpot_ms <= ctx.request.tpot_ms


EXTRA_PACKAGE = {"suffix": "arctic-inference"}
"""Methods that need a package the vLLM wheel does not bring (docs/reference: suffix decoding)."""


def _second_hand(e: Evaluation) -> str:
    """Why a candidate's case is weaker than its number: its acceptance is not its own (borrowed from a
    related method, or a default) or it needs an extra package. Such candidates lose near-ties."""
    why = []
    if "borrowed from" in e.prior_source or e.prior_source.startswith("default"):
        why.append("its acceptance is not its own (" + e.prior_source.split("(")[-1].rstrip(")") + ")")
    if e.method in EXTRA_PACKAGE:
        why.append(f"it needs {EXTRA_PACKAGE[e.method]}")
    return " and ".join(why)


def _choose(ctx: Context, rows: list[Evaluation], score=None) -> Evaluation:
    """The best by ``score`` (default :func:`_score`), near-ties broken by own acceptance, the tree's
    preference order and the smaller γ."""
    score = score or (lambda e: _score(ctx, e))
    feasible = [e for e in rows if _meets(ctx, e)] or rows
    best = max(score(e) for e in feasible)
    near = [e for e in feasible if score(e) >= best * (1 - NEAR_TIE)]
    prefer = ctx.constraints.prefer

    def rank(e: Evaluation) -> tuple:
        order = prefer.index(e.method) if e.method in prefer else len(prefer)
        return (-score(e) if e.method == "none" else 0, bool(_second_hand(e)), order, e.gamma)

    top = [e for e in near if e.method != "none"] or near
    return min(top, key=rank)


def check_cost_model(ctx: Context, rule: TreeRule) -> DecisionStep:
    req = ctx.request
    rows = [_eval(ctx, "none", 0, req.batch_size)] if req.method in (None, "none") else []
    measured = ctx.measured.drafts() if ctx.measured is not None else None
    unmeasured = []
    for m in METHODS:
        if m == "none" or m not in ctx.drafts or not ctx.allowed(m):
            continue
        if measured is not None and "none" in measured and m not in measured and req.method != m:
            unmeasured.append(m)  # a measured ranking does not mix in roofline guesses
            continue
        for g in [req.num_speculative_tokens] if req.num_speculative_tokens else _gammas(ctx, m):
            rows.append(_eval(ctx, m, g, req.batch_size))
    overridden = sorted({e.method for e in rows if ctx.measured_overrides(e.method)})
    for m in overridden:
        ctx.warn(f"{m} is ranked on {ctx.measured.label}, although rule {ctx.constraints.forbidden[m]} "
                 "would exclude it")
    if unmeasured:
        ctx.warn(f"{ctx.measured.label} ranks only what it measured; not ranked: {', '.join(unmeasured)} "
                 "(tune them too, or pin one with --method for a roofline estimate)")
    rows = [e for e in rows if e.memory.max_batch() >= 1 or e.method == req.method]  # runs no request at all
    if not rows:
        rows = [_eval(ctx, "none", 0, req.batch_size)]
    ctx.table_rows = rows
    chosen = _choose(ctx, rows) if not req.method else max(rows, key=lambda e: _score(ctx, e))
    if not req.method and chosen.method != "none" and chosen.speedup < 1.0:
        chosen = next(e for e in rows if e.method == "none")
    ctx.chosen = ctx.picked = picked = chosen
    if ctx.constraints.schedule and chosen.method != "none" and not req.num_speculative_tokens:
        if ctx.schedule_supported:
            _build_schedule(ctx)
        else:
            ctx.warn(f"vLLM {format_version(ctx.version)} has no per-batch-size γ schedule (from 0.24.0): "
                     f"one γ={chosen.gamma} is used at every batch size")
    chosen = ctx.chosen
    top = max(rows, key=lambda e: _score(ctx, e))
    n_methods = len({e.method for e in rows})
    what = "no speculation" if chosen.method == "none" else f"{chosen.method} γ={chosen.gamma}"
    outcome = (f"{what} with KV {chosen.kv_dtype}: predicted {chosen.speedup:.2f}x, TPOT {chosen.tpot_ms:.1f} ms "
               f"(best of {len(rows)} candidates over {n_methods} methods)")
    if top is not picked and picked.method != "none" and not req.method and _score(ctx, top) > _score(ctx, picked):
        outcome += (f"; chosen over {top.method} γ={top.gamma} ({top.speedup:.2f}x): within the {NEAR_TIE:.0%} tie "
                    "margin, a candidate with its own acceptance and no extra package, then the tree's preference "
                    "order, then the smaller γ, wins"
                    + (f" ({top.method}: {_second_hand(top)})" if _second_hand(top) else ""))
    if chosen.mitigations and chosen.unmitigated_tpot_ms:
        outcome += (f"; the launch carries {', '.join(chosen.mitigations)} (known-bug mitigation), priced: TPOT "
                    f"{chosen.unmitigated_tpot_ms:.1f} -> {chosen.tpot_ms:.1f} ms "
                    f"({priced(ctx.setup.profile, chosen.mitigations).note()})")
    if ctx.schedule_note:
        outcome += f"; {ctx.schedule_note}"
    if req.tpot_ms is not None and not _meets(ctx, chosen):
        ctx.warn(f"no candidate meets --tpot-ms {req.tpot_ms:g} (best {chosen.tpot_ms:.1f} ms)")
    return DecisionStep(rule=rule.id, input=f"objective={req.objective}, batch={req.batch_size}", outcome=outcome)


"""Methods whose per-batch γ schedule vLLM 0.33 applies; for others it drops the schedule with a warning
(vllm/config/vllm.py; playbooks/vllm/capabilities.csv, num_speculative_tokens_per_batch_size)."""


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

    best = best_gamma([_eval(ctx, method, g, rep, schedule=True) for g in _gammas(ctx, method)], near_tie=NEAR_TIE)
    return best.gamma if best else 0


def _build_schedule(ctx: Context) -> None:
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
        total_sched += (_eval(ctx, chosen.method, k, rep, schedule=True).speedup if k
                        else 1 / (1 + schedule_cost(rep)))
        total_single += _eval(ctx, chosen.method, chosen.gamma, rep).speedup
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
    ctx.chosen = _eval(ctx, chosen.method, at_request, req.batch_size, schedule=True)
    ctx.schedule_note = (f"schedule {[list(r) for r in schedule]} (each range scored at its middle batch): averages "
                         f"{total_sched / n:.2f}x over the ranges against {total_single / n:.2f}x for γ={chosen.gamma} "
                         f"alone, its own cost (vllm#49548) counted; γ={at_request} at batch {req.batch_size}{kept}")


def evidence_for(ctx: Context, e: Evaluation):
    """The :class:`~specops.planner.uncertainty.Uncertainty` of ``e``'s speedup (None for no speculation,
    or when a measured model, not the roofline, predicted it)."""
    if e.method == "none" or (ctx.measured is not None and e.method in ctx.measured.drafts()):
        return None
    from specops.planner import uncertainty as unc

    if not isinstance(ctx.residuals, unc.RangeCalibration):
        ctx.residuals = (unc.default_calibration() if ctx.residuals is None
                         else unc.RangeCalibration(unc.points_from(ctx.residuals)))
    stratum = unc.stratum_of(engine=ctx.request.engine, method=e.method, kind=ctx.model.kind(), moe=ctx.model.is_moe,
                             batch=e.effective_batch)
    from specops.planner.published_runs import query_for

    query = query_for(names=[ctx.model.id, *ctx.model.names], method=e.method, gpu=ctx.gpu.name,
                      engine=stratum.engine, batch=e.effective_batch, task=ctx.request.task)
    return unc.assess(e.speedup, e.tau, stratum, ctx.residuals,
                      tau_high=unc.tau_ceiling(prior_for(ctx, e.method), e.gamma, e.tau), method=e.method, query=query)


def _judged_line(e: Evaluation, ev) -> str:
    if ev is None:
        return f"{e.method} γ={e.gamma} {e.speedup:.2f}x (measured)"
    return (f"{e.method} γ={e.gamma} {e.speedup:.2f}x: P(gain) {ev.p_gain:.2f}, expected {ev.expected_speedup:.2f}x, "
            f"{ev.level:.0%} range {ev.speedup_low:.2f}-{ev.speedup_high:.2f}x, {ev.published_text()}")


def _warn_far(ctx: Context, chosen: Evaluation, ev) -> None:
    if ev is not None and not ev.near:
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
            what = "no speculation: nothing to qualify" if chosen.method == "none" else "predicted by a measured model"
            return DecisionStep(rule=rule.id, input=chosen.method, outcome=what)
        if not unc.eligible(unc.Judged(chosen, chosen.speedup, ev), min_p):
            ctx.warn(f"{chosen.method} may be slower than no speculation: P(gain) {ev.p_gain:.2f} (below {min_p:.2f}), "
                     f"expected {ev.expected_speedup:.2f}x ({ev.line()}); kept because {why}", about=chosen.method)
        return DecisionStep(rule=rule.id, input=_judged_line(chosen, ev), outcome=f"keep {chosen.method} ({why}; "
                            f"the rule would be: {rule_text}): {ev.line()}")
    rows = [e for e in ctx.table_rows if e.method != "none"]
    rows = [e for e in rows if _meets(ctx, e)] or rows
    feasible = [_choose(ctx, [e for e in rows if e.method == m]) for m in dict.fromkeys(e.method for e in rows)]
    judged = {id(e): unc.Judged(e, e.speedup, evidence_for(ctx, e)) for e in feasible}
    ok = [e for e in feasible if unc.eligible(judged[id(e)], min_p)]
    picked = ctx.picked or chosen
    if ok:
        best = _choose(ctx, ok, score=lambda e: _score(ctx, e) * judged[id(e)].expected / e.speedup)
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
            _build_schedule(ctx)
    ev = ctx.evidence = evidence_for(ctx, ctx.chosen)
    _warn_far(ctx, ctx.chosen, ev)
    over = ""
    if best is not picked:
        rep = next((e for e in feasible if e.method == picked.method), None)  # its method's candidate
        pj = judged[id(rep)] if rep is not None else None
        why = "is not a candidate here" if pj is None else \
            f"expects less: {pj.expected:.2f}x" if rep in ok else f"does not qualify: P(gain) {pj.p_gain:.2f}"
        over = f" over the best by point, {picked.method} γ={picked.gamma} {picked.speedup:.2f}x, which {why}"
    what = f"keep {ctx.chosen.method} γ={ctx.chosen.gamma}" + ("" if ev else " (measured)")
    return DecisionStep(rule=rule.id, input=inp, outcome=f"{what}{over}{refusal}" + (f"; {ev.line()}" if ev else ""))


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
        model, gpu, setup = resolve(req, catalogs, profile)
        ctx = Context(req, model, gpu, setup, priors, capabilities or shipped_table(), catalogs, measured=measured,
                      residuals=residuals)
        steps = run_tree(ctx, tree or load_tree())
        if calibration is None:  # the profile that predicted is named on the cost model's step
            cost = next(s for s in steps if s.rule == "cost_model")
            cost.input += f", profile={profile.name} ({PROFILE_SOURCES.get(request.engine, '')})"
        return build_plan(ctx, steps)

    if request.qps is None:
        return once(request)
    return at_rate(request, once)
