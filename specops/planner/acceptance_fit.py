"""The acceptance model's fit: observations (each published row's α0 at its γ), position decay, the penalised
backfitting of the effects and slopes, and the fitted :class:`AcceptanceModel` (what the model is and why: the
docstring of :mod:`specops.planner.acceptance`, which re-exports every public name here).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from specops.planner.acceptance_data import ALPHA_IID_GAMMA, AcceptanceRow, family_of, params_of
from specops.planner.acceptance_tree import (
    TreeKappa,
    alpha_from_tree_tau,
    branching,
    default_tree_tokens,
    fit_kappa,
    tree_tau,
)
from specops.planner.priors import DECAY
from specops.speculation import alpha_from_tau as _alpha_from_tau
from specops.speculation import expected_tokens

MAX_ALPHA = 0.97
MIN_ALPHA = 0.02
DRAFT_REF_RATIO = 1 / 16
TARGET_REF_B = 8.0
Z80 = 1.2816  # two-sided 80%: the spread's stated level
DEFAULT_CHAIN_GAMMA = 3  # a chain row that states no γ is solved at 3 (vLLM's common K); never scored
DEFAULT_TREE_DEPTH = {"eagle": 6, "eagle3": 8, "medusa": 4, "other": 5}  # EAGLE-2/3 papers' depths; Medusa 4 heads

# Request task (--task) -> the task class of the data. creative writes like chat; agentic workloads re-emit
# tool output and code (SuffixDecoding's setting): the closest published class is code edits.
TASK_OF_REQUEST = {"code": "code", "math": "math", "chat": "chat", "creative": "chat", "translation": "translation",
                   "summarization": "summarization", "rag": "rag", "agentic": "code-edit"}
UNTASKED = ("mixed",)  # averages over many tasks: they inform the method, not any task
LOOKUP = ("ngram", "suffix")


def task_key(method: str, task_class: str | None) -> tuple[str, str] | None:
    """The shared task effect's key: the task class within the method's kind of draft (model or lookup)."""
    return ("lookup" if method in LOOKUP else "model", task_class) if task_class else None


REFERENCE_TASK = "chat"
"""The task every other task's effect is measured from (and shrunk toward): --task chat, the default. With the
average over tasks as the reference instead, a task with one or two rows of a method sits near that average,
above chat (code and math rows are many and high), so --task qa/summarization/translation read as *raising* a
model draft's acceptance wherever their own rows were few, against every source that publishes the contrast."""

PENALTY = {"method": 0.3, "variant": 6.0, "structure": 0.5, "task": 3.0, "method_task": 1.5, "family": 8.0,
           "method_family": 8.0, "trainer": 6.0, "draft": 3.0, "engine": 8.0, "source": 0.5, "workload": 0.5,
           "lineage": 1.0}
"""Prior precision of each effect, in units of summed row weight. Nuisance effects (variant, family, engine,
trainer) are shrunk hard: with few sources each, a light penalty lets them soak up one source's level (a
code-edit table on vLLM would make every vLLM n-gram request look like a code edit); the source effect takes
that instead. Chosen among five settings by this file's own leave-one-source-out error (bench/acceptance_bench.py):
0.142 → 0.128 median |ln τ|; a mild use of the held-out figure, said here. ``workload``: a workload that repeats
across requests (``repetitive-workload`` rows), per method, penalised as lightly as a source: it is one source's
regime, and what it measures is kept apart from the task effect (such a row carries no task effect). ``lineage``: a
draft model that is a released sibling of its target (:func:`lineage_key`), penalised like a method (1.0, set before
looking at held-out figures; 0.3 and 3.0 were printed after and not taken, see docs/performance-model.md)."""
SLOPE_PENALTY = {"temperature": 0.5, "method_temperature": 2.0, "draft_ratio": 1.0, "target_size": 1.0}
SPEEDUP_ROW_WEIGHT = 0.5
SWEEPS = 60


# --- observations ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Obs:
    """One fitted observation: a row with the γ/structure it is solved at and its α0 (logit)."""

    row: AcceptanceRow
    tau: float
    gamma: int
    y: float          # logit α0
    weight: float
    derived: bool     # τ from a per-task speedup ratio (never scored)


@lru_cache(maxsize=65536)
def alpha_from_tau(tau: float, gamma: int, decay: float, cap: float) -> float:
    """:func:`specops.speculation.alpha_from_tau`, memoised (leave-one-source-out solves the same rows 38 times)."""
    return _alpha_from_tau(tau, gamma, decay, cap)


def _logit(a: float) -> float:
    a = min(MAX_ALPHA, max(MIN_ALPHA, a))
    return math.log(a / (1 - a))


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def solve_gamma(row: AcceptanceRow) -> int:
    """The γ (chain length or tree depth) a row is solved and predicted at: stated, else the default."""
    if row.gamma:
        return row.gamma
    if "alpha-iid" in row.flags:
        return ALPHA_IID_GAMMA
    if row.structure == "tree":
        return DEFAULT_TREE_DEPTH.get(row.method, 5)
    return DEFAULT_CHAIN_GAMMA


TREE_SIZE_TERM = True
"""Trees by their size (:mod:`specops.planner.acceptance_tree`: the method's chain α0 and decay, b^κ candidates a
level) rather than the old switch (a chain of the tree's depth with no decay plus a per-method tree effect). False
restores the switch: bench/acceptance_bench.py prints both, held out."""
NO_KAPPA = TreeKappa(0.0, (), 0)


def tree_tokens(row: AcceptanceRow) -> int | None:
    """Draft tokens of a tree row (root not counted): stated, else its harness's default (acceptance_tree)."""
    if row.structure != "tree":
        return None
    return row.tree_tokens or default_tree_tokens(row.method, row.variant)


def row_branching(row: AcceptanceRow) -> float:
    """b: candidates per level of the row's tree (1.0 for a chain)."""
    return branching(solve_gamma(row), tree_tokens(row)) if row.structure == "tree" else 1.0


def _kappa_points(rows: Sequence[AcceptanceRow], decay: Callable[[AcceptanceRow], float]):
    """Tree-size sweep points for :func:`specops.planner.acceptance_tree.fit_kappa`: rows with a published τ and a
    stated γ (and, for trees, stated tokens), grouped by source, target, method, variant, draft, task, temperature."""
    out = []
    for r in rows:
        tau = r.published_tau()
        if not r.used or tau is None or tau <= 1.0 or not r.gamma or (r.structure == "tree" and not r.tree_tokens):
            continue
        key = (r.source_id, r.target.lower(), r.method, r.variant, r.draft.lower(), r.task_class, r.temperature)
        out.append((r.id, key, r.gamma, row_branching(r), decay(r), tau))
    return out


def _overall_tau(rows: Sequence[AcceptanceRow], r: AcceptanceRow) -> float | None:
    """The τ of the overall row of a per-task speedup row's table (same source, table, method)."""
    table = r.location.split(" table,")[0]
    for o in rows:
        if (o.source_id == r.source_id and o.tau is not None and o.task_class == "mixed" and o.method == r.method
                and o.variant == r.variant and o.target.lower().replace(" ", "-")[:12] == r.target.lower().replace(" ", "-")[:12]
                and (o.location.split(" table,")[0] == table or _hw(o) == _hw(r))):
            return o.tau
    return None


def _hw(r: AcceptanceRow) -> str:
    return "3090" if "3090" in r.location else "a100"


def observations(rows: Sequence[AcceptanceRow], decay: Callable[[AcceptanceRow], float],
                 kappa: TreeKappa | None = None) -> list[Obs]:
    by_source: dict[tuple[str, str], int] = {}
    overall: dict[tuple[str, str, str], list[AcceptanceRow]] = {}  # the candidates _overall_tau looks through
    for r in rows:
        by_source[(r.source_id, r.method)] = by_source.get((r.source_id, r.method), 0) + 1
        if r.tau is not None and r.task_class == "mixed":
            overall.setdefault((r.source_id, r.method, r.variant), []).append(r)
    out = []
    for r in rows:
        if not r.used:
            continue
        tau, derived = r.published_tau(), False
        if tau is None and r.speedup and r.speedup_overall:
            ref = _overall_tau(overall.get((r.source_id, r.method, r.variant), ()), r)
            if ref is None:
                continue
            tau, derived = ref * r.speedup / r.speedup_overall, True
        if tau is None or tau <= 1.0:
            continue
        g = solve_gamma(r)
        tau = min(tau, g + 0.999)
        if r.structure == "tree" and TREE_SIZE_TERM:
            eff = (kappa or NO_KAPPA).effective(row_branching(r))
            a = alpha_from_tree_tau(tau, g, decay(r), eff, MAX_ALPHA, MIN_ALPHA)
        else:
            d = 1.0 if r.structure == "tree" else decay(r)
            a = alpha_from_tau(tau, g, d, MAX_ALPHA)
        w = 1 / math.sqrt(by_source[(r.source_id, r.method)]) * (SPEEDUP_ROW_WEIGHT if derived else 1.0)
        out.append(Obs(r, tau, g, _logit(a), w, derived))
    return out


# --- position decay -------------------------------------------------------------------------------

def _decay_of_row(r: AcceptanceRow) -> float | None:
    c = [x for x in r.conditional() if x > 0]
    if len(c) < 3:
        return None
    xs, ys = list(range(len(c))), [math.log(min(0.999, x)) for x in c]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return max(0.7, min(1.0, math.exp(slope)))


@lru_cache(maxsize=4096)
def _decay_of_sweep(pts: tuple[tuple[int, float], ...]) -> float | None:
    """The d in [0.80, 1.00] under which one α0 explains every γ of a sweep (least spread of logit α0).
    Not above 1: a lookup draft ends where its match ends, and d > 1 would let τ grow without bound in γ."""
    if len({g for g, _ in pts}) < 2:
        return None

    def spread(d: float) -> float:
        return statistics.pvariance([_logit(alpha_from_tau(min(t, g + 0.999), g, round(d, 4), MAX_ALPHA)) for g, t in pts])

    coarse = min((0.80 + 0.025 * i for i in range(9)), key=spread)
    return min((max(0.80, min(1.0, coarse + 0.005 * i)) for i in range(-5, 6)), key=spread)


@dataclass(frozen=True)
class DecayEstimate:
    value: float
    rows: tuple[str, ...]   # ids behind it ('' tuple: the priors' default)
    cell: str


def decay_table(rows: Sequence[AcceptanceRow]) -> dict[tuple[str, str], DecayEstimate]:
    """Position decay by (method, task class) and (method, '*') from per-position rows and γ sweeps."""
    found: dict[str, list[tuple[float, str, tuple[str, ...]]]] = {}
    for r in rows:
        if r.used and r.structure == "chain":
            d = _decay_of_row(r)
            if d is not None:
                found.setdefault(r.method, []).append((d, cell_task(r) or r.task_class, (r.id,)))
    sweeps: dict[tuple, list[AcceptanceRow]] = {}
    for r in rows:
        if r.used and r.structure == "chain" and r.gamma and r.published_tau() and not r.per_position:
            key = (r.source_id, r.target, r.method, r.variant, r.task, r.temperature, r.location.split(",")[0][:40])
            sweeps.setdefault(key, []).append(r)
    for key, group in sweeps.items():
        d = _decay_of_sweep(tuple((r.gamma, r.published_tau()) for r in group))
        if d is not None:
            found.setdefault(key[2], []).append((d, cell_task(group[0]) or group[0].task_class, tuple(r.id for r in group)))
    out: dict[tuple[str, str], DecayEstimate] = {}
    for method, items in found.items():
        out[(method, "*")] = DecayEstimate(statistics.median(d for d, _, _ in items),
                                           tuple(i for _, _, ids in items for i in ids), f"{method} (all tasks)")
        for cls in {c for _, c, _ in items}:
            own = [d for d, c, _ in items if c == cls]
            if len(own) >= 2:
                out[(method, cls)] = DecayEstimate(statistics.median(own),
                                                   tuple(i for _, c, ids in items if c == cls for i in ids), f"{method} × {cls}")
    return out


# --- the model ------------------------------------------------------------------------------------

def _keys(o: AcceptanceRow, *, source: bool = True) -> dict[str, object]:
    task = None if o.task_class in UNTASKED or o.task_class == REFERENCE_TASK or o.repetitive else o.task_class
    return {
        "method": o.method, "variant": (o.method, o.variant) if o.variant else None,
        "structure": structure_key(o.method, o.structure), "task": task_key(o.method, task), "method_task": (o.method, task) if task else None,
        "family": o.target_family or None, "method_family": (o.method, o.target_family) if o.target_family else None,
        "trainer": (o.method, o.draft_trainer) if o.draft_trainer else None, "draft": o.draft.lower() or None,
        "engine": o.engine or None, "source": o.source_id if source else None,
        "workload": (o.method, "repetitive") if o.repetitive else None,
        "lineage": lineage_key(o.method, o.draft, o.target_family, o.draft_params_b),
    }


def structure_key(method: str, structure: str) -> tuple:
    """The ``structure`` effect's key. While trees are priced by their size (``TREE_SIZE_TERM``) a tree shares its
    method's chain key, so a tree of one candidate a level (b = 1) is exactly its chain and the tree term alone
    carries what the tree adds; the effect is then a second, lighter-penalised method level (dropping it moved
    every method's level toward μ: DFlash held out 0.163 → 0.214 median |ln τ|). Otherwise (the old switch) its
    own (method, 'tree') shift."""
    return (method, "chain") if TREE_SIZE_TERM else (method, structure)


SIBLING_MIN_B = 0.3
"""The smallest draft counted as a released sibling of its target (Qwen2.5-0.5B, Qwen3-0.6B, Llama-3.2-1B): below it
sit the distilled toy drafts of the old pairs (Vicuna-68M, LLaMA-68M/160M, T5-small), which accept far less."""


def lineage_key(method: str, draft: str | None, target_family: str | None, draft_params_b: float | None) -> tuple | None:
    """The ``lineage`` effect's key: a draft model that is a released sibling of its target (same family and generation
    as :func:`family_of` names them: llama3, qwen2.5, qwen3, ...; the same tokenizer and instruction data), not a
    distilled toy or an older pair (T5, LaMDA, Vicuna-68M: no family_of family, or under ``SIBLING_MIN_B``)."""
    if method != "draft_model" or not draft or not target_family:
        return None
    size = draft_params_b or params_of(draft)
    return (method, "sibling") if family_of(draft) == target_family and size and size >= SIBLING_MIN_B else None


def cell_task(o: AcceptanceRow) -> str | None:
    """The task part of a row's cell (spreads, the rows a request's estimate cites): None for averages over tasks; a
    repetitive workload's rows form their own cell, so a request (never assumed repetitive) does not cite them."""
    if o.task_class in UNTASKED:
        return None
    return f"{o.task_class} (repetitive workload)" if o.repetitive else o.task_class


def _slopes(r: AcceptanceRow) -> dict[str, tuple[object, float]]:
    t = r.temperature or 0.0
    x = xt = 0.0
    if r.method == "draft_model" and r.draft_params_b and r.target_params_b:
        x = math.log(r.draft_params_b / r.target_params_b / DRAFT_REF_RATIO)
        xt = math.log(r.target_params_b / TARGET_REF_B)
    return {"temperature": ("*", t), "method_temperature": (r.method, t), "draft_ratio": ("*", x), "target_size": ("*", xt)}


@dataclass
class AcceptanceModel:
    """Fitted effects (logit α0), decay table, residual spreads, and the rows behind each cell."""

    mu: float
    effects: dict[str, dict[object, float]]
    slopes: dict[str, dict[object, float]]
    decay: dict[tuple[str, str], DecayEstimate]
    spread: dict[tuple, float]             # (method, task) / (method,) / () -> residual SD (logit)
    cells: dict[tuple, tuple[str, ...]]   # (method, task) / (method,) -> ids of the rows fitted there
    sources: dict[tuple, frozenset[str]] = field(default_factory=dict)  # same keys -> source ids
    rows_fitted: int = 0
    drafts: dict[str, tuple[str, ...]] = field(default_factory=dict)  # lower-cased draft id -> ids of its rows
    draft_sources: dict[str, frozenset[str]] = field(default_factory=dict)  # lower-cased draft id -> source ids
    unexplained: dict[str, float] = field(default_factory=dict)  # method -> logit SD of its rows around its chat level
    kappa: TreeKappa = NO_KAPPA  # the tree term's shared κ (acceptance_tree)

    def draft_offset(self, draft: str | None) -> float:
        """A named draft's rows speak for it: the mean effect of the sources that measured it (a draft measured
        by one source has its level in that source's effect, not in its own shrunk draft effect)."""
        srcs = self.draft_sources.get((draft or "").lower())
        if not srcs:
            return 0.0
        return statistics.fmean(self.effects["source"].get(s, 0.0) for s in srcs)

    @property
    def methods(self) -> set[str]:
        return {k for k in self.effects["method"]}

    def decay_for(self, method: str, task_class: str) -> DecayEstimate:
        return (self.decay.get((method, task_class)) or self.decay.get((method, "*"))
                or DecayEstimate(DECAY.get(method, 1.0), (), "default"))

    def logit(self, keys: dict[str, object], slopes: dict[str, tuple[object, float]]) -> float:
        y = self.mu
        for g, k in keys.items():
            if k is not None:
                y += self.effects.get(g, {}).get(k, 0.0)
        for g, (k, x) in slopes.items():
            y += self.slopes.get(g, {}).get(k, 0.0) * x
        return y

    def predict_row(self, r: AcceptanceRow) -> float | None:
        """τ for a published row at its γ (source effect zero); None for a method the fit has no row of."""
        if r.method not in self.methods:  # as estimate_prior(): a lookup method without rows borrows its relative's
            if BORROW.get(r.method) not in self.methods:
                return None
            r = AcceptanceRow(**{**r.__dict__, "method": BORROW[r.method], "variant": ""})
        keys = _keys(r, source=False)
        if keys["workload"] is not None and keys["workload"] not in self.effects.get("workload", {}):
            return None  # a repetitive workload and no row of one in the fit: no evidence near, not extrapolated
        if keys["task"] is not None and not self.cells.get((r.method, keys["task"][1])):
            keys = {**keys, "task": None, "method_task": None}  # as estimate(): no row of the method for this task
        a = min(MAX_ALPHA, _sigmoid(self.logit(keys, _slopes(r)) + self.draft_offset(r.draft)))
        if r.structure == "tree" and TREE_SIZE_TERM:
            return tree_tau(a, solve_gamma(r), self.decay_for(r.method, r.task_class).value,
                            self.kappa.effective(row_branching(r)), MAX_ALPHA)
        d = 1.0 if r.structure == "tree" else self.decay_for(r.method, r.task_class).value
        return expected_tokens(a, solve_gamma(r), d, MAX_ALPHA)

    def spread_for(self, method: str, task_class: str | None) -> float:
        return self.spread.get((method, task_class)) or self.spread.get((method,)) or self.spread[()]


def _backfit(keys: list[dict[str, object]], slopes: list[dict[str, tuple[object, float]]], w: list[float],
             y: list[float], mu: float, effects: dict[str, dict[object, float]],
             slope: dict[str, dict[object, float]]) -> list[float]:
    """Penalised backfitting, SWEEPS times over μ, each effect group (PENALTY order) and each slope group, filling
    ``effects`` and ``slope`` in place; returns the fitted logits with the final μ appended.

    The keys of one group partition the rows, so all keys of a group are updated at once (numpy, as the one-key-at-a-
    time loop did: a key's update reads only its own rows): the same fixed point, ~20x faster, which lets every
    leave-one-source-out fold refit the model (bench/uncertainty_bench.py's nested folds refit it ~900 times)."""
    import numpy as np

    n = len(y)
    wa, ya = np.asarray(w, dtype=float), np.asarray(y, dtype=float)
    wsum = float(wa.sum())
    groups = []
    for g, lam in PENALTY.items():
        index: dict[object, int] = {}
        codes = np.array([index.setdefault(k[g], len(index)) if k[g] is not None else -1 for k in keys], dtype=int)
        rows = np.nonzero(codes >= 0)[0]
        c = codes[rows]
        wk = np.bincount(c, weights=wa[rows], minlength=len(index))
        groups.append((g, lam, list(index), rows, c, wk))
    sgroups = []
    for g, lam in SLOPE_PENALTY.items():
        index = {}
        xs = np.array([s[g][1] for s in slopes], dtype=float)
        codes = np.array([index.setdefault(s[g][0], len(index)) if s[g][1] else -1 for s in slopes], dtype=int)
        rows = np.nonzero(codes >= 0)[0]
        c, x = codes[rows], xs[rows]
        sxx = np.bincount(c, weights=wa[rows] * x * x, minlength=len(index))
        sgroups.append((g, lam, list(index), rows, c, x, sxx))
    values = {g: np.zeros(len(names)) for g, _, names, *_ in groups}
    svalues = {g: np.zeros(len(names)) for g, _, names, *_ in sgroups}
    current = np.full(n, mu)
    for _ in range(SWEEPS):
        shift = float((wa * (ya - current)).sum()) / wsum
        mu += shift
        current += shift
        for g, lam, _names, rows, c, wk in groups:
            old = values[g]
            num = np.bincount(c, weights=wa[rows] * (ya[rows] - current[rows]), minlength=len(old)) + wk * old
            new = num / (wk + lam)
            current[rows] += (new - old)[c]
            values[g] = new
        for g, lam, _names, rows, c, x, sxx in sgroups:
            old = svalues[g]
            num = np.bincount(c, weights=wa[rows] * x * (ya[rows] - current[rows]), minlength=len(old)) + sxx * old
            new = num / (sxx + lam)
            current[rows] += (new - old)[c] * x
            svalues[g] = new
    for g, _, names, *_ in groups:
        effects[g] = {k: float(v) for k, v in zip(names, values[g], strict=True)}
    for g, _, names, *_ in sgroups:
        slope[g] = {k: float(v) for k, v in zip(names, svalues[g], strict=True)}
    return [*current.tolist(), mu]


def _fit(obs: Sequence[Obs], decay: dict[tuple[str, str], DecayEstimate], kappa: TreeKappa = NO_KAPPA) -> AcceptanceModel:
    keys = [_keys(o.row) for o in obs]
    slopes = [_slopes(o.row) for o in obs]
    w = [o.weight for o in obs]
    y = [o.y for o in obs]
    wsum = sum(w)
    mu = sum(wi * yi for wi, yi in zip(w, y, strict=True)) / wsum
    effects: dict[str, dict[object, float]] = {g: {} for g in PENALTY}
    slope: dict[str, dict[object, float]] = {g: {} for g in SLOPE_PENALTY}

    n = len(obs)
    current = _backfit(keys, slopes, w, y, mu, effects, slope)
    mu = current.pop()  # _backfit returns the fitted values with μ appended
    model = AcceptanceModel(mu, effects, slope, decay, {}, {}, rows_fitted=n, kappa=kappa)
    for o in obs:
        if o.row.draft:
            key = o.row.draft.lower()
            model.drafts[key] = (*model.drafts.get(key, ()), o.row.id)
            model.draft_sources[key] = model.draft_sources.get(key, frozenset()) | {o.row.source_id}
    # residuals a new source sees: without the row's own source effect
    res = [(o, y[i] - (current[i] - effects["source"].get(o.row.source_id, 0.0))) for i, o in enumerate(obs)]
    groups: dict[tuple, list[tuple[float, float, Obs]]] = {}
    for o, e in res:
        task = cell_task(o.row)
        for key in ((o.row.method, task), (o.row.method,), ()):
            groups.setdefault(key, []).append((o.weight, e, o))
    glob = groups[()]
    sd_all = math.sqrt(sum(wi * e * e for wi, e, _ in glob) / sum(wi for wi, _, _ in glob))
    model.spread[()] = sd_all
    # how far a row of a method lands from its --task chat level when neither its task nor its workload is known: the
    # width a request gets where no row of the method resembles it (lookup methods, see estimate)
    loose = ("source", "task", "method_task", "workload")
    wide: dict[str, list[tuple[float, float]]] = {}
    for i, o in enumerate(obs):
        k = keys[i]
        e = y[i] - current[i] + sum(effects[g].get(k[g], 0.0) for g in loose if k[g] is not None)
        wide.setdefault(o.row.method, []).append((o.weight, e))
    model.unexplained = {m: math.sqrt(sum(wi * e * e for wi, e in v) / sum(wi for wi, _ in v)) for m, v in wide.items()}
    k0 = 1.5  # rows' worth of weight the parent's spread counts for
    for key, items in sorted(groups.items(), key=lambda kv: len(kv[0])):
        ids = tuple(o.row.id for _, _, o in items)
        model.cells[key] = ids
        model.sources[key] = frozenset(o.row.source_id for _, _, o in items)
        if not key:
            continue
        parent = model.spread[key[:-1]] if len(key) > 1 else sd_all
        sw = sum(wi for wi, _, _ in items)
        model.spread[key] = math.sqrt((sum(wi * e * e for wi, e, _ in items) + k0 * parent ** 2) / (sw + k0))
    return model


def fit(rows: Sequence[AcceptanceRow]) -> AcceptanceModel:
    """The acceptance model on these rows only (decay, observations, effects, spreads)."""
    decay = decay_table(rows)

    def d(r: AcceptanceRow) -> float:
        est = decay.get((r.method, r.task_class)) or decay.get((r.method, "*"))
        return est.value if est else DECAY.get(r.method, 1.0)

    kappa = fit_kappa(_kappa_points(rows, d), _logit, MAX_ALPHA, MIN_ALPHA) if TREE_SIZE_TERM else NO_KAPPA
    return _fit(observations(rows, d, kappa), decay, kappa)


BORROW = {"suffix": "ngram"}
"""A lookup method whose relative has rows from more sources for the request's task (or, with no rows of its own
for it, more sources in all) borrows the relative's estimate for that task (said in the source): suffix decoding's rows are one source (TensorRT-LLM's cross-request n-gram pool, chat and a
repetitive translation set) plus vLLM PR #24852's MT-Bench run and rows without γ (vllm-ascend #7349, ik_llama.cpp
#1646), so its level rests on one source; prompt lookup's task dependence (Spec-Bench, EAGLE-3 Table 1) is the nearer evidence."""
