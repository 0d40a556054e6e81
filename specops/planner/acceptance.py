"""Acceptance from evidence: per-token acceptance fitted on playbooks/data/acceptance_2026-12.csv alone.

Every published row (mean acceptance length τ, vLLM's accepted/drafted rate r, Leviathan's α, per-position
rates) becomes one observation: the first-position acceptance α0 that reproduces its τ at its γ,
``τ = 1 + Σ_{k=1..γ} Π_{i<k} α0·d^i`` (d: the method's position decay, below). A row with r and γ has
τ = 1 + r·γ; a row with α (i.i.d.) has τ = (1 − α^(γ+1)) / (1 − α). Trees (EAGLE papers, SGLang topk > 1)
are priced by their size (:mod:`specops.planner.acceptance_tree`): depth D, n draft tokens, b = n/D candidates
a level, each level accepting 1 − (1 − α0·d^k)^(b^κ) with the method's own α0 and decay and one κ fitted on
tree-size sweeps; a tree of b = 1 is its chain (``TREE_SIZE_TERM``; the old switch, a chain of the depth with
d = 1 plus a per-method tree effect, is kept behind it for the bench's before/after).

The model, in logit(α0) (``_fit``): a sum of effects, each shrunk toward zero, i.e. toward its parent:

    logit α0 = μ + method + method×variant + method×structure + kind×task + method×task + family
             + method×family + method×trainer + draft + engine + source + lineage + (β_T + β_T,method)·T
             + β_r·ln(r/r_ref) + β_size·ln(target/8B)          (the last three: draft models only)

fitted by penalised backfitting (ridge; penalty ``PENALTY`` per effect, in units of summed row weight):
a cell with few rows moves little from its parent (method×task from the task effect and the method, the
method from the global mean). Chat is the reference task (``REFERENCE_TASK``: chat and mixed rows carry no
task effect, so a thin task cell shrinks toward chat) and the shared task effect is kept per kind of draft
(``LOOKUP`` methods copy from the context: a task moves them the other way from a model draft). Each row weighs 1/√(rows of its source for its method), so a 50-row table does
not outvote ten sources. The source effect absorbs what one source shares (harness, prompts, template, stated or
unstated γ) and is zero for anything predicted: a new request, or a source held out.

Rows with only a per-task speedup (Spec-Bench) enter as τ ratios: within one table, method and batch 1 the
step cost does not depend on the task, so τ(task) = τ(overall) · speedup(task) / speedup(overall). They
are weighted half and never scored.

Per-position decay d (``decay_table``): fitted where per-position rates or γ sweeps are published
(conditional rates c_k = p_k / p_{k−1}; ln c_k linear in k), by method and, where two or more such rows
exist for one task class, by method × task class; the priors' DECAY elsewhere.

Spread: the residuals of the training rows without their source effect (what a new source sees), pooled
from method × task toward method toward all rows; stated with every estimate as an 80% range of τ.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from specops.planner import acceptance_fit as _fit_module
from specops.planner.acceptance_data import (  # noqa: F401 - the table's names, re-exported
    ALPHA_IID_GAMMA,
    DATA_FILE,
    EXCLUDED_FLAGS,
    AcceptanceRow,
    family_of,
    load_rows,
    params_of,
    parse,
)
from specops.planner.acceptance_fit import (  # noqa: F401 - the fit's names, re-exported
    BORROW,
    DEFAULT_CHAIN_GAMMA,
    DEFAULT_TREE_DEPTH,
    DRAFT_REF_RATIO,
    LOOKUP,
    MAX_ALPHA,
    MIN_ALPHA,
    PENALTY,
    REFERENCE_TASK,
    SIBLING_MIN_B,
    SLOPE_PENALTY,
    SPEEDUP_ROW_WEIGHT,
    SWEEPS,
    TARGET_REF_B,
    TASK_OF_REQUEST,
    UNTASKED,
    Z80,
    AcceptanceModel,
    DecayEstimate,
    Obs,
    _backfit,
    _fit,
    _keys,
    _logit,
    _sigmoid,
    _slopes,
    alpha_from_tau,
    cell_task,
    decay_table,
    fit,
    lineage_key,
    observations,
    row_branching,
    solve_gamma,
    structure_key,
    task_key,
)
from specops.planner.acceptance_tree import branching, default_tree_tokens, tree_cumulative, tree_tau
from specops.planner.priors import DECAY  # noqa: F401 - re-exported (the fit's default decay)

# --- estimates for a request ----------------------------------------------------------------------

@dataclass(frozen=True)
class AcceptanceEstimate:
    """α0 for one candidate, with where it comes from and how sure it is."""

    alpha0: float
    decay: float
    logit_sd: float
    task_class: str
    cell_rows: tuple[str, ...]        # rows of this method × task class
    cell_sources: int
    method_rows: int
    task_shift: float                 # α0 with this task minus α0 with --task chat (chat: minus no task effect)
    decay_note: str
    draft_rows: tuple[str, ...] = ()  # rows that name this very draft (its own effect)
    evidence_note: str = ""           # where no published row resembles the request (said, and the range widened)
    branching: float = 1.0            # a tree's effective candidates a level, b^κ (1.0: a chain; acceptance_tree)
    tree_note: str = ""               # a tree's size and the κ behind its term

    def tau(self, gamma: int) -> float:
        return tree_tau(self.alpha0, gamma, self.decay, self.branching, MAX_ALPHA)

    def tau_at(self, gamma: int, z: float) -> float:
        """τ at ``gamma`` with α0 moved by ``z`` logit spreads (z = ±Z80: the 80% range's ends)."""
        a = min(MAX_ALPHA, _sigmoid(_logit(self.alpha0) + z * self.logit_sd))
        return tree_tau(a, gamma, self.decay, self.branching, MAX_ALPHA)

    def tau_range(self, gamma: int) -> tuple[float, float]:
        return (self.tau_at(gamma, -Z80), self.tau_at(gamma, Z80))

    def cumulative(self, depth: int) -> tuple[float, ...]:
        """P(the first k positions or levels accepted), k = 1..depth."""
        return tuple(tree_cumulative(self.alpha0, depth, self.decay, self.branching, MAX_ALPHA))

    def source_text(self, method: str) -> str:
        ids = ", ".join(self.cell_rows[:6]) + (f" +{len(self.cell_rows) - 6}" if len(self.cell_rows) > 6 else "")
        cell = (f"{len(self.cell_rows)} {method} × {self.task_class} rows from {self.cell_sources} sources ({ids})"
                if self.cell_rows else f"no {method} × {self.task_class} row")
        own = (f"; {len(self.draft_rows)} rows name this draft ({', '.join(self.draft_rows[:4])})" if self.draft_rows else "")
        near = f"; {self.evidence_note}" if self.evidence_note else ""
        tree = f"; {self.tree_note}" if self.tree_note else ""
        return (f"acceptance model (playbooks/data/{DATA_FILE}): {cell}, {self.method_rows} {method} rows in all{own}; "
                f"logit spread ±{self.logit_sd:.2f}; decay {self.decay:.3f} ({self.decay_note}){tree}{near}")

    def task_note(self, method: str, task: str) -> str:
        if not self.cell_rows:
            near = f"; {self.evidence_note}" if self.evidence_note else ""
            return (f"no published {method} rows for --task {task} ({self.task_class}), so --task does not move {method}'s "
                    f"acceptance: its --task chat level (fitted on the {self.method_rows} {method} rows of all tasks) is used{near}")
        ids = ", ".join(self.cell_rows[:8]) + (" …" if len(self.cell_rows) > 8 else "")
        if self.task_class == REFERENCE_TASK:
            return (f"{method}'s acceptance at --task {task} is its chat level (chat is the reference task the other "
                    f"tasks move from), from {len(self.cell_rows)} published chat rows of {self.cell_sources} sources ({ids})")
        direction = "raises" if self.task_shift > 0.005 else "lowers" if self.task_shift < -0.005 else "does not move"
        return (f"--task {task} {direction} {method}'s acceptance relative to --task chat (α0 {self.task_shift:+.3f}), from "
                f"{len(self.cell_rows)} published {self.task_class} rows of {self.cell_sources} sources ({ids})")


def estimate(model: AcceptanceModel, method: str, *, task: str, temperature: float = 0.0, variant: str | None = None,
             structure: str = "chain", draft: str | None = None, draft_ratio: float | None = None,
             target: str | None = None, trainer: str | None = None, engine: str | None = "vllm",
             target_params_b: float | None = None, depth: int | None = None,
             tree_tokens: int | None = None) -> AcceptanceEstimate | None:
    """α0 for one candidate (None: the data has no row of this method). ``target_params_b`` (else read from the
    target's name, e.g. '-70B-') places a draft model on the target-size slope. A tree (``structure='tree'``) of
    ``tree_tokens`` draft tokens (root not counted) at ``depth`` gets the tree term (:func:`tree_term`)."""
    if method not in model.methods:
        return None
    cls = TASK_OF_REQUEST.get(task, task)
    ratio = math.log((draft_ratio or DRAFT_REF_RATIO) / DRAFT_REF_RATIO) if method == "draft_model" else 0.0
    size = target_params_b or params_of(target)
    xt = math.log(size / TARGET_REF_B) if method == "draft_model" and size else 0.0
    fam = family_of(target)
    tk = None if cls == REFERENCE_TASK else cls
    keys = {"method": method, "variant": (method, variant) if variant else None, "structure": structure_key(method, structure),
            "task": task_key(method, tk), "method_task": (method, tk) if tk else None, "family": fam or None,
            "method_family": (method, fam) if fam else None, "trainer": (method, trainer) if trainer else None,
            "draft": (draft or "").lower() or None, "engine": engine, "source": None, "workload": None,
            "lineage": lineage_key(method, draft, fam, (draft_ratio * size) if draft_ratio and size else None)}
    slopes = {"temperature": ("*", temperature), "method_temperature": (method, temperature), "draft_ratio": ("*", ratio),
              "target_size": ("*", xt)}
    rows = model.cells.get((method, cls), ())
    if not rows:  # no row of this method for this task: its --task chat level (the task's effect on other
        keys = {**keys, "task": None, "method_task": None}  # methods need not hold for this one)
    own = model.draft_offset(draft)
    y = model.logit(keys, slopes) + own
    y0 = model.logit({**keys, "task": None, "method_task": None}, slopes) + own  # --task chat: the reference
    dec = model.decay_for(method, cls)
    a = min(MAX_ALPHA, _sigmoid(y))
    sd, note = model.spread_for(method, cls), ""
    if method in LOOKUP and not rows:
        sd, note = _no_evidence_near(model, method, cls, sd)
    eff, tree_note = tree_term(model, method, variant, structure, depth, tree_tokens)
    return AcceptanceEstimate(
        alpha0=a, decay=1.0 if structure == "tree" and not _fit_module.TREE_SIZE_TERM else dec.value, logit_sd=sd, task_class=cls,
        cell_rows=rows, cell_sources=len(model.sources.get((method, cls), ())),
        method_rows=len(model.cells.get((method,), ())), task_shift=a - min(MAX_ALPHA, _sigmoid(y0)),
        decay_note=f"fitted on {', '.join(dec.rows[:4])}{' …' if len(dec.rows) > 4 else ''} ({dec.cell})" if dec.rows
        else "priors default: no per-position or γ-sweep row",
        draft_rows=model.drafts.get((draft or "").lower(), ()), evidence_note=note, branching=eff, tree_note=tree_note)


def tree_term(model: AcceptanceModel, method: str, variant: str | None, structure: str, depth: int | None,
              tokens: int | None) -> tuple[float, str]:
    """(b^κ, what it rests on) for a request's tree; (1.0, '') for a chain. Unstated depth or tokens: the
    harness defaults (``DEFAULT_TREE_DEPTH``, :data:`specops.planner.acceptance_tree.DEFAULT_TREE_TOKENS`), said."""
    if structure != "tree" or not _fit_module.TREE_SIZE_TERM:
        return 1.0, ""
    d = depth or DEFAULT_TREE_DEPTH.get(method, 5)
    n = tokens or default_tree_tokens(method, variant)
    b = branching(d, n)
    k = model.kappa
    basis = (f"κ {k.value:.2f} fitted on {k.sweeps} tree-size sweeps ({', '.join(k.rows[:4])}{' …' if len(k.rows) > 4 else ''})"
             if k.rows else "no tree-size sweep in the data: κ 0, the tree counted as its chain")
    size = f"{n} draft tokens" + ("" if tokens else " (the method's default tree)") if n else "size unknown"
    return k.effective(b), (f"tree of depth {d}{'' if depth else ' (default)'}, {size}: {b:.2f} candidates a level, "
                            f"{k.effective(b):.2f} effective; {basis}")


def _no_evidence_near(model: AcceptanceModel, method: str, cls: str, sd: float) -> tuple[float, str]:
    """A lookup draft copies from the context, so its acceptance is the workload's (how much repeats, within and across
    requests), which a task name alone does not fix: where no row of the method has this task, the range is the
    spread of the method's rows around its chat level (task and workload unexplained), and the evidence says so,
    naming any rows of a repetitive workload of this task (their level is not assumed for a request)."""
    wide = max(sd, model.unexplained.get(method, sd))
    rep = model.cells.get((method, f"{cls} (repetitive workload)"), ())
    also = (f"; its {len(rep)} {cls} rows ({', '.join(rep[:3])}{' …' if len(rep) > 3 else ''}) measure a workload that "
            f"repeats across requests, not assumed here" if rep else "")
    return wide, (f"no evidence near: no {method} row of a {cls} workload like this one, range widened to the spread of "
                  f"{method}'s rows around its chat level (logit ±{wide:.2f}){also}")


def default_model() -> AcceptanceModel:
    """The model fitted on every shipped row (computed once per set of inputs, see diskcache)."""
    from specops.planner.diskcache import cached

    return cached("acceptance", lambda: fit(load_rows()))


# --- checks -----------------------------------------------------------------------------------------

def scorable(r: AcceptanceRow) -> bool:
    """A row whose published τ the model is judged on: fitted kind, τ derivable, γ stated."""
    return r.used and (r.gamma_stated or "alpha-iid" in r.flags) and r.published_tau() is not None


def lower_bounds(model: AcceptanceModel, rows: Iterable[AcceptanceRow]) -> list[tuple[AcceptanceRow, float]]:
    """(row, predicted τ at the row's γ or 5) for rows that publish only a speedup (τ ≥ that speedup)."""
    out = []
    for r in rows:
        if r.tau_lower_bound is None:
            continue
        probe = AcceptanceRow(**{**r.__dict__, "flags": frozenset(), "gamma": r.gamma or 5})
        p = model.predict_row(probe)
        if p is not None:
            out.append((r, p))
    return out


# --- cross-validation (leave one source out, :mod:`specops.planner.loso`) -------------------------

def cross_validate(rows: Sequence[AcceptanceRow] | None = None):
    """Every scorable row's τ predicted by the model fitted without its source."""
    from specops.planner.loso import leave_one_source_out

    rows = list(rows if rows is not None else load_rows())
    return leave_one_source_out(rows, fit=fit, predict=lambda m, r: m.predict_row(r),
                                published=lambda r: r.published_tau() if scorable(r) else None,
                                source=lambda r: r.source_id)


# --- the priors' entry point --------------------------------------------------------------------------

TREE_LEVELS = 16
"""Levels a tree prior's per-position rates are stored for (AcceptancePrior.cumulative continues past them)."""


def estimate_prior(model: AcceptanceModel, method: str, *, task: str, temperature: float = 0.0,
                   generation: str | None = None, structure: str = "chain", draft: str | None = None,
                   draft_ratio: float | None = None, target: str | None = None, target_params_b: float | None = None,
                   depth: int | None = None, tree_tokens: int | None = None):
    """The :class:`~specops.planner.priors.AcceptancePrior` for one candidate, or None (no row of the method). A tree
    (``depth``, ``tree_tokens``: draft tokens, root not counted) carries its levels' cumulative rates."""
    from specops.planner.priors import AcceptancePrior

    use, borrowed = method, ""
    relative = BORROW.get(method)
    cls = TASK_OF_REQUEST.get(task, task)
    mine, theirs = model.sources.get((method, cls), frozenset()), model.sources.get((relative, cls), frozenset())
    wider = len(model.sources.get((relative,), ())) > len(model.sources.get((method,), ()))
    if relative in model.methods and (method not in model.methods or len(theirs) > len(mine) or (not mine and wider)):
        why = f"no {method} rows for {cls}" if not mine else (f"{len(theirs)} sources of {relative} × {cls} rows "
                                                               f"against {len(mine)} of {method}'s")
        rep = model.cells.get((method, f"{cls} (repetitive workload)"), ())
        if rep:
            why += (f"; {method}'s {len(rep)} {cls} rows ({', '.join(rep[:3])} …) measure a workload that repeats "
                    f"across requests, not assumed for a request")
        use, borrowed = relative, f" (borrowed from {relative}: {why})"
    variant = generation if use == "eagle3" and generation in ("3", "3.1") else None
    est = estimate(model, use, task=task, temperature=temperature, variant=variant, structure=structure, draft=draft,
                   draft_ratio=draft_ratio, target=target, target_params_b=target_params_b, depth=depth,
                   tree_tokens=tree_tokens)
    if est is None:
        return None
    levels = est.cumulative(TREE_LEVELS) if est.branching != 1.0 else None
    return AcceptancePrior(est.alpha0, est.decay, est.source_text(use) + borrowed, levels, est)


def held_out_logit_z(rows: Sequence[AcceptanceRow] | None = None) -> list[tuple[str, str, float]]:
    """(method, source, z) of every chain row that states γ and τ, predicted with its source held out: z is the
    published α0's logit minus the held-out prediction's, over the logit spread the held-out model states for that
    row - how many of its own spreads the acceptance model is off on a source it never saw. The ceiling of a speedup
    range (uncertainty.CEILING_Z, τ's one-sided 95% bound) is set from their source-weighted 95% quantile."""
    from specops.planner.acceptance_fit import MAX_ALPHA

    def logit(a: float) -> float:
        a = max(1e-4, min(a, 1 - 1e-4))
        return math.log(a / (1 - a))

    rows = list(rows) if rows is not None else load_rows()
    out: list[tuple[str, str, float]] = []
    for src in sorted({r.source_id for r in rows}):
        test = [r for r in rows if r.source_id == src and scorable(r) and r.structure == "chain"]
        if not test:
            continue
        model = fit([r for r in rows if r.source_id != src])
        for r in test:
            p = model.predict_row(r)
            if p is None:
                continue
            g, d = solve_gamma(r), model.decay_for(r.method, r.task_class).value
            err = logit(alpha_from_tau(min(r.published_tau(), g + 0.999), g, d, MAX_ALPHA)) - logit(
                alpha_from_tau(min(p, g + 0.999), g, d, MAX_ALPHA))
            out.append((r.method, src, err / model.spread_for(r.method, cell_task(r) or r.task_class)))
    return out


def weighted_share_above(zs: Sequence[tuple[str, str, float]], z: float) -> float:
    """Share of ``zs`` above ``z``, each source's rows weighing rows ** -0.5 (as the ranges' residuals do)."""
    count: dict[str, int] = {}
    for _, s, _ in zs:
        count[s] = count.get(s, 0) + 1
    total = sum(count[s] ** -0.5 for _, s, _ in zs)
    return sum(count[s] ** -0.5 for _, s, v in zs if v > z) / total


def weighted_quantile_z(zs: Sequence[tuple[str, str, float]], q: float) -> float:
    """The source-weighted ``q`` quantile of ``zs`` (weights as :func:`weighted_share_above`)."""
    count: dict[str, int] = {}
    for _, s, _ in zs:
        count[s] = count.get(s, 0) + 1
    ranked = sorted((v, count[s] ** -0.5) for _, s, v in zs)
    total, acc = sum(w for _, w in ranked), 0.0
    for v, w in ranked:
        acc += w
        if acc >= q * total:
            return v
    return ranked[-1][0]
