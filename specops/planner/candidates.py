"""The pipeline steps that decide what can run, before anything is priced: the vLLM release's methods, KV dtypes and
known bugs (``vllm_capabilities``), the drafts the catalog knows or the request names (``drafts``), and the KV dtype
each candidate needs to fit the batch (``kv_cache``, pinned by --kv-cache-dtype)."""

from __future__ import annotations

from functools import lru_cache

from specops.capabilities import CapabilityTable, default_table, format_version, parse_version
from specops.errors import CapabilityError, InputError
from specops.planner.catalog import draft_from_name, generic_model
from specops.planner.context import Context, check_fits
from specops.planner.perfmodel import DraftSpec, head_params, memory_estimate
from specops.planner.tree import TreeRule
from specops.planner.types import DRAFT_WEIGHT_METHODS, METHODS, DecisionStep, DraftRef

KV_ORDER = ("auto", "fp8", "turboquant_k8v4", "turboquant_4bit_nc")  # least to most compressed


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
    if ref.method in ("draft_model", "dflash"):  # a model of its own: priced by its architecture
        arch = ctx.catalogs.catalog_model(ref.id)
        if arch is None:  # a size as the typical draft's (a DFlash block: a head of the target's size)
            size = ref.params_b or (max(0.1, ctx.model.params_b / 16) if ref.method == "draft_model"
                                    else head_params(ctx.model, ref.method) / 1e9)
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
    req, found, missing, typical = ctx.request, [], [], []
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

            lacking = refuse_unservable(ctx, m)  # no MTP layers / no draft: refused with what works
            ctx.drafts[m] = _typical_draft(ctx, m)
            size = ctx.drafts[m].params_b
            if lacking is None:
                ctx.warn(f"specops does not know {ctx.model.id}'s MTP layers ({ctx.model.source}): predicted with a "
                         f"typical {size:.2f}B module; check that its config.json has num_nextn_predict_layers")
                continue
            ctx.withhold(lacking, f"specops does not know {ctx.model.id} and no {m} draft is given: predicted with a "
                         f"typical {m} draft ({size:.2f}B; the acceptance model's {m} level, no draft-specific effect), "
                         f"and no launch is rendered. To fix: {lacking.fix}")
            typical.append(f"{m}: a typical {size:.2f}B draft predicts (none known for {ctx.model.id}; the launch "
                           "is withheld until --draft names one)")
        else:
            ctx.constraints.forbidden.setdefault(m, rule.id)
            missing.append(m)
    outcome = ("known: " + "; ".join(found)) if found else "no trained drafts known"
    if typical:
        outcome += "; " + "; ".join(typical)
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
