"""The grid planner: which engine configurations to start, in what order, and which loads to run
inside each engine's life.

Engine restarts dominate the cost (40–70 s on the project's CPU box; a run of the workload takes
seconds), so a plan is a list of :class:`Session` s — one engine life each — and everything that can
change without a restart (concurrency, repeats) happens inside a session:

- **Most informative first.** The baseline, then each method at the middle γ, then the extremes, then
  the γ farthest from any already planned one (bisection), methods interleaved. A run cut short by
  its budget still has the points that shape the fit.
- **Interleaved repeats.** Pass 1 visits every configuration once; pass 2 visits them again in the
  same order (A B C … A B C …), so a slow drift of the shared machine shows as spread instead of as a
  difference between configurations. Inside a session, loads interleave too (c1 c4 c1 c4).
- **Budget.** :func:`plan_grid` drops the least informative sessions that do not fit the budget at the
  estimated costs; the runner re-checks with the costs it actually observes.
"""

from __future__ import annotations

import re

from pydantic import Field

from specops.errors import InputError, did_you_mean
from specops.models import Strict
from specops.tune.types import DRAFT_METHODS, TUNE_METHODS, EngineConfig, GridPoint


class Session(Strict):
    """One engine life: start ``config``, run ``points`` (same config, various loads), stop."""


    config: EngineConfig
    pass_index: int = Field(ge=0, description="0 for the first visit of this config, 1 for the repeat pass, ...")
    points: list[GridPoint] = Field(description="Loads to run in order, inside one engine life.")


class GridOptions(Strict):
    """What to measure and how much time there is."""


    methods: list[str] = Field(default_factory=lambda: ["none", "ngram", "draft_model"],
                               description="Methods; 'none' (the baseline) is always added.")
    gammas: list[int] = Field(default_factory=lambda: [1, 2, 3, 4, 6], description="γ values for speculative methods.")
    concurrency: list[int] = Field(default_factory=lambda: [1, 4], description="Concurrency levels (no restart).")
    draft: str | None = Field(None, description="Draft folder for draft_model / eagle*.")
    synthetic_rates: list[float] = Field(default_factory=list, description="α values of the cost runs "
                                         "(vLLM's synthetic rejection sampler) per method and γ; empty: none.")
    passes: int = Field(2, ge=1, le=10, description="Visits per configuration (interleaved A B A B).")
    inner_repeats: int = Field(1, ge=1, le=10, description="Runs per load inside one engine life.")
    budget_s: float | None = Field(None, gt=0, description="Wall-clock budget (s); None: no limit.")
    restart_s: float = Field(60.0, gt=0, description="Estimated engine start + stop (s).")
    run_s: float = Field(15.0, gt=0, description="Estimated run of the workload at one load (s).")


def parse_gammas(text: str) -> list[int]:
    """'1-8' -> 1..8; '1,2,3,4,6' -> those; '2-4,6' -> 2,3,4,6."""
    out: set[int] = set()
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"(\d+)\s*-\s*(\d+)", part)
        try:
            values = range(int(m.group(1)), int(m.group(2)) + 1) if m else [int(part)]
        except ValueError:
            values = []
        if not values:
            raise InputError(f'--gammas "{text}": "{part}" is not a number or a range', "use e.g. 1-8 or 1,2,3,4,6")
        out.update(values)
    if not out or any(g < 1 or g > 16 for g in out):
        raise InputError(f'--gammas "{text}" must list γ values between 1 and 16', "use e.g. 1-8 or 1,2,3,4,6")
    return sorted(out)


def parse_ints(text: str, flag: str = "--concurrency") -> list[int]:
    try:
        values = sorted({int(x) for x in str(text).split(",") if x.strip()})
    except ValueError:
        values = []
    if not values or any(v < 1 or v > 4096 for v in values):
        raise InputError(f'{flag} "{text}" is not a list of positive integers', "use e.g. 1,4,16")
    return values


def parse_cpus(text: str) -> list[int]:
    """``--cpus``: CPU ids as a list and/or ranges, e.g. ``1``, ``0-3``, ``0,2``."""
    values: set[int] = set()
    try:
        for part in str(text).split(","):
            part = part.strip()
            if not part:
                continue
            lo, sep, hi = part.partition("-")
            values.update(range(int(lo), int(hi) + 1) if sep else [int(lo)])
    except ValueError:
        values = set()
    if not values or min(values) < 0:
        raise InputError(f'--cpus "{text}" is not a list of CPU ids', "use e.g. 1, 0-3 or 0,2")
    return sorted(values)


def parse_methods(text: str) -> list[str]:
    methods = [m.strip().lower() for m in str(text).split(",") if m.strip()]
    for m in methods:
        if m not in TUNE_METHODS:
            raise InputError(f'unknown method "{m}" in --methods.{did_you_mean(m, TUNE_METHODS)}',
                             f"use a comma list of {', '.join(TUNE_METHODS)}")
    if not methods:
        raise InputError("--methods is empty", "use e.g. ngram,draft_model")
    return list(dict.fromkeys(methods))


def gamma_order(gammas: list[int]) -> list[int]:
    """Middle first, then the extremes, then bisection: [1,2,3,4,6] -> [3, 1, 6, 2, 4]."""
    gs = sorted(set(gammas))
    if not gs:
        return []
    order = [gs[(len(gs) - 1) // 2]]
    for g in (gs[0], gs[-1]):
        if g not in order:
            order.append(g)
    rest = [g for g in gs if g not in order]
    while rest:  # the γ farthest from every chosen one, ties to the smaller
        best = max(rest, key=lambda g: (min(abs(g - c) for c in order), -g))
        order.append(best)
        rest.remove(best)
    return order


def config_order(methods: list[str], gammas: list[int], draft: str | None,
                 synthetic_rates: list[float] | None = None) -> list[EngineConfig]:
    """Baseline first, then methods interleaved by γ rank (each method's middle γ before any extreme);
    each standard configuration is followed by its synthetic cost runs (one per α), if any."""
    spec_methods = [m for m in methods if m != "none"]
    order = [EngineConfig(method="none")]
    for g in gamma_order(gammas):
        for m in spec_methods:
            d = draft if m in DRAFT_METHODS else None
            order.append(EngineConfig(method=m, gamma=g, draft=d))
            order += [EngineConfig(method=m, gamma=g, draft=d, synthetic_rate=a) for a in synthetic_rates or []]
    return order


def loads(concurrency: list[int], inner_repeats: int, pass_index: int) -> list[tuple[int, int]]:
    """(concurrency, repeat) pairs for one session, interleaved c1 c4 c1 c4; repeats are numbered
    across passes so every measurement of a point has its own key."""
    return [(c, pass_index * inner_repeats + r) for r in range(inner_repeats) for c in sorted(concurrency)]


def session(config: EngineConfig, pass_index: int, concurrency: list[int], inner_repeats: int) -> Session:
    """One engine life of ``config`` in pass ``pass_index``: every load, interleaved."""
    points = [GridPoint(config=config, concurrency=c, repeat=r)
              for c, r in loads(concurrency, inner_repeats, pass_index)]
    return Session(config=config, pass_index=pass_index, points=points)


def plan_grid(opts: GridOptions) -> list[Session]:
    """The sessions to run, most informative first, within the budget at the estimated costs."""
    for m in opts.methods:
        if m in DRAFT_METHODS and not opts.draft:
            raise InputError(f"--methods includes {m}, which needs a draft model",
                             "pass --draft DIR (or give the draft in the spec), or drop it from --methods")
    configs = config_order(list(opts.methods), opts.gammas, opts.draft, opts.synthetic_rates)
    sessions = []
    for p in range(opts.passes):
        for cfg in configs:
            sessions.append(session(cfg, p, opts.concurrency, opts.inner_repeats))
    if opts.budget_s is None:
        return sessions
    kept, spent = [], 0.0
    for s in sessions:
        cost = session_cost(s, opts.restart_s, opts.run_s)
        if spent + cost > opts.budget_s:
            continue  # a later, cheaper session may still fit; order is kept
        kept.append(s)
        spent += cost
    return kept


def session_cost(session: Session, restart_s: float, run_s: float) -> float:
    return restart_s + run_s * len(session.points)


def estimate_seconds(sessions: list[Session], restart_s: float, run_s: float) -> float:
    return sum(session_cost(s, restart_s, run_s) for s in sessions)
