"""A tree's acceptance by its size: the tree term of the acceptance model (:mod:`specops.planner.acceptance`).

A token tree of depth D that verifies n draft tokens (the root, the target's own token, not counted) has on
average b = n / D candidates per level (b ≥ 1; a chain is b = 1). Level k is accepted when one of its b
candidates is the target's token; with the chain's per-position acceptance α_k = α0·d^k (the method's own α0 and
decay d) and candidates that are not independent (the top-b of one draft distribution share its mistakes), the
level accepts with

    α'_k = 1 − (1 − α_k)^(b^κ),        τ = 1 + Σ_{k=1..D} Π_{i<k} α'_i,

κ in [0, 1.5] one shared parameter for every method (κ = 1: independent candidates; κ = 0: the tree is worth its
chain). b^κ is the tree's *effective* number of candidates per level. κ is fitted on tree-size sweeps only: one
source, target, draft, task and temperature measured at two or more (depth, tokens) settings (SpecForge #339 and
AngelSlim #163 on Qwen3-30B-A3B in SGLang), as the position decay is fitted on γ sweeps: the κ under which one α0
explains every setting of a sweep (least pooled spread of logit α0). With no sweep in the rows a tree is its chain
(κ = 0), the low side, said in ``TreeKappa.rows``.

Where a row's tree size is unstated, the harness's documented default is used (``DEFAULT_TREE_TOKENS``): EAGLE-1's
static tree of 26 nodes (EAGLE paper App. A.1), EAGLE-2/EAGLE-3's ``total_token=60`` (SafeAILab/EAGLE's
``EaModel`` default, the EAGLE-2 and EAGLE-3 papers' setting), Medusa-1's 63-node ``mc_sim_7b_63`` tree.
SGLang's ``speculative_num_draft_tokens`` counts the root: a row of SGLang states n + 1 (``priors._structure``
subtracts it; the acceptance table stores n).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from specops.speculation import bisect

KAPPA_GRID = tuple(round(0.05 * i, 2) for i in range(31))  # 0.00 .. 1.50
DEFAULT_TREE_TOKENS = {("eagle", "1"): 26, ("eagle", ""): 60, ("eagle", "2"): 60, ("eagle3", ""): 60,
                       ("medusa", ""): 63}
"""Draft tokens (root not counted) of a tree whose size the row does not state: keyed (method, variant), then
(method, ''). EAGLE-1's static tree (EAGLE App. A.1: ~26 nodes), EAGLE-2/3's total_token=60, Medusa's 63-node tree."""


def default_tree_tokens(method: str, variant: str | None) -> int | None:
    return DEFAULT_TREE_TOKENS.get((method, variant or "")) or DEFAULT_TREE_TOKENS.get((method, ""))


def branching(depth: int, tokens: int | None) -> float:
    """Candidates per level of a tree of ``tokens`` draft tokens at ``depth`` (1.0: a chain, or size unknown)."""
    if not tokens or depth < 1:
        return 1.0
    return max(1.0, tokens / depth)


def level_rates(alpha0: float, depth: int, decay: float, effective: float, cap: float) -> list[float]:
    """α'_k for k = 0..depth−1: each level's acceptance with ``effective`` (= b^κ) candidates."""
    out = []
    for k in range(depth):
        a = min(cap, alpha0 * decay ** k)
        out.append(min(cap, 1.0 - (1.0 - a) ** effective))
    return out


def tree_cumulative(alpha0: float, depth: int, decay: float, effective: float, cap: float) -> list[float]:
    """P(the first k levels accepted), k = 1..depth (what AcceptancePrior.per_position holds)."""
    out, p = [], 1.0
    for a in level_rates(alpha0, depth, decay, effective, cap):
        p *= a
        out.append(p)
    return out


def tree_tau(alpha0: float, depth: int, decay: float, effective: float, cap: float) -> float:
    """τ of the tree; with ``effective`` 1 it is :func:`specops.speculation.expected_tokens` of the chain."""
    return 1.0 + sum(tree_cumulative(alpha0, depth, decay, effective, cap))


@lru_cache(maxsize=65536)
def alpha_from_tree_tau(tau: float, depth: int, decay: float, effective: float, cap: float, floor: float) -> float:
    """The α0 in [floor, cap] whose tree τ is ``tau`` (clamped): τ rises with α0, so the one solver
    (:func:`specops.speculation.bisect`)."""
    return bisect(lambda a: tree_tau(a, depth, decay, effective, cap), tau, floor, cap)


@dataclass(frozen=True)
class TreeKappa:
    """The fitted κ and the sweeps behind it (row ids; empty: no sweep, κ = 0)."""

    value: float
    rows: tuple[str, ...]
    sweeps: int

    def effective(self, b: float) -> float:
        return b ** self.value


def fit_kappa(points: Sequence[tuple[str, tuple, int, float, float, float]], logit: Callable[[float], float],
              cap: float, floor: float) -> TreeKappa:
    """κ from sweeps: ``points`` are (row id, sweep key, depth, branching b, decay, τ). A sweep counts when it has
    two or more distinct (depth, b) settings and at least one tree (b > 1); κ minimises the pooled within-sweep
    variance of logit α0 over ``KAPPA_GRID``."""
    groups: dict[tuple, list[tuple[str, int, float, float, float]]] = {}
    for rid, key, depth, b, d, tau in points:
        groups.setdefault(key, []).append((rid, depth, b, d, tau))
    sweeps = [g for g in groups.values() if len({(p[1], round(p[2], 3)) for p in g}) >= 2 and any(p[2] > 1 for p in g)]
    if not sweeps:
        return TreeKappa(0.0, (), 0)

    def spread(kappa: float) -> float:
        total = 0.0
        for g in sweeps:
            ys = [logit(alpha_from_tree_tau(min(tau, depth + 0.999), depth, d, b ** kappa, cap, floor))
                  for _, depth, b, d, tau in g]
            total += statistics.pvariance(ys) * len(ys)
        return total

    best = min(KAPPA_GRID, key=spread)
    return TreeKappa(best, tuple(p[0] for g in sweeps for p in g), len(sweeps))
