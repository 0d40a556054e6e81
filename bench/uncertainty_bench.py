"""Uncertainty benchmark (issue 38): nested coverage and width of the ranges, calibration of P(gain),
and the regret of the pick rule, before (the range and veto `recommend` shipped until now) and after
(specops.planner.uncertainty). Prints numbers, asserts nothing.

Nested: for each source S of the published rows (specops.planner.uncertainty.calibration_rows, sources
unified), the acceptance priors are fitted on the other sources only, the residuals that calibrate the
ranges are the other sources' own leave-one-source-out residuals computed without S, and only then are
S's rows predicted and scored (specops.planner.loso.leave_one_source_out). The difficulty model
(specops.planner.difficulty: the bias μ and scale σ of each kind of prediction) is fitted on those inner
residuals only; "difficulty model variants" (bench/uncertainty_variants.py) re-assesses the same folds with other
choices of it, native runtimes (engine class native) apart or not, and prints what recommend would pick with the
native-runtime bias that is not shipped. The "width goal" line puts the serving and HF rows' median hi/lo next to
their oracle width and the replication floor.

Regret: rows of one source that share a setup (target, hardware, batch, task, temperature, location)
are one situation; its candidates are the methods published there. A rule picks one or none from the
held-out predictions. Left on the table: ln(best published gain) − ln(gain of the pick) where a
published method gained (a pick below 1 gains nothing); slowdown taken: −ln(published) of a pick
published below 1. Both summed over situations, overall and per stratum.

Run: .venv/bin/python bench/uncertainty_bench.py [--point-tau] [--ceiling-z Z] [--gamma-bounds] [--no-published]
[--published-only]
(--no-published: every section without the update by published runs near each row (specops.planner.published_runs;
each fold's runs are the other sources' only); --published-only: stop after the published-run section, which prints
the model alone against the update either way.)
(--ceiling-z: the ceiling at τ's upper bound at Z of the acceptance model's logit spread instead of
uncertainty.CEILING_Z, in the nested folds and the scored rows alike; 1.2816 is the ceiling shipped until 2026-12-03.)
"""

from __future__ import annotations

import math
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from specops.planner.evidence import (  # noqa: E402
    catalog_gpu,  # noqa: E402
    cross_validate,
    fit_priors,
    gamma_bounds,
    gpu_class,
    hardware_known,
    looks_moe,
    predict_at_best_gamma,
    predict_row,
    predictable,
    prior_of,
)
from specops.planner.loso import leave_one_source_out  # noqa: E402
from specops.planner.published_runs import mapped_target, query_for  # noqa: E402
from specops.planner.replications import source_of  # noqa: E402
from specops.planner.uncertainty import (  # noqa: E402
    DEFAULT_MIN_P_GAIN,
    LEVEL,
    Judged,
    RangeCalibration,
    assess,
    calibration_rows,
    legacy_interval,
    pick,
    points_from,
    stratum_of,
    tau_ceiling,
)

if "--ceiling-z" in sys.argv:
    import specops.planner.uncertainty as _unc

    _unc.CEILING_Z = float(sys.argv[sys.argv.index("--ceiling-z") + 1])

PUBLISHED = "--no-published" not in sys.argv
"""Update each prediction with the other sources' published runs near it (specops.planner.published_runs);
--no-published: the model's distribution alone (the figures before issue 38's published-run update)."""

TAU_HIGH = "--point-tau" not in sys.argv
"""Cap each range at the upper end of τ's own 80% range (as recommend does); --point-tau caps at the point τ."""

GAMMA_BOUNDS = "--gamma-bounds" in sys.argv
"""--gamma-bounds: bound a row whose source does not state γ by the floor and ceiling over every γ it may have run
(evidence.gamma_bounds) instead of at the model's best γ, where its range is drawn. Not the default: the width scored
is then no longer the width recommend prints at that γ (a user always states γ or takes the best one); the variants
section prints both, and reach_section the share of rows within either bounds."""

P_GRID = (0.0, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)


@dataclass
class Fold:
    priors: object
    calibration: RangeCalibration
    residuals: list  # the other sources' residuals (for the legacy range)
    cat: object


@dataclass(frozen=True)
class Held:
    """One held-out row: the prediction, the new range and the old one."""

    row: object
    speedup: float
    tau: float
    u: object
    old: tuple[float, float]
    stratum: object = None
    calibration: object = None   # the fold's (for re-assessing with other settings)
    tau_high: float = 0.0        # the ceiling the range was capped at
    model_only: object = None    # the Uncertainty without the published runs near it (specops.planner.published_runs)
    query: object = None         # the configuration, for the published-run lookup
    bounds: tuple | None = None  # (floor, ceiling) over every γ an unstated-γ row may have run (evidence.gamma_bounds)

    @property
    def published(self) -> float:
        return self.row.speedup


def _fitter(rows):
    """fit(train) for leave_one_source_out: the held-out source is every source of ``rows`` absent from train; it is
    left out of the acceptance model too, in the fold's priors and in each of its inner folds."""
    from specops.planner.catalog import load_catalogs

    everything = {r.source for r in rows}

    def fit(train):
        held = everything - {r.source for r in train}
        res = cross_validate(train, unstated_gamma=True, held_out=held)
        return Fold(fit_priors(train, held_out=held), RangeCalibration(points_from(res)), res, load_catalogs())

    return fit


def _predict(fold: Fold, row):
    e, setup = predict_row(row, fold.priors, fold.cat) if row.gamma else predict_at_best_gamma(row, fold.priors, fold.cat, None)
    return e, setup


def held_out(rows=None) -> list[Held]:
    rows = rows if rows is not None else calibration_rows()
    cache: dict[int, Held] = {}

    def extra(fold: Fold, row):
        e, setup = _predict(fold, row)
        moe = setup.model.is_moe or looks_moe(row.target)
        s = stratum_of(engine=row.engine, method=row.method, kind=setup.model.kind(), moe=moe, batch=row.batch)
        high = tau_ceiling(prior_of(row, fold.priors, fold.cat), e.gamma, e.tau) if TAU_HIGH else e.tau
        bounds = gamma_bounds(row, fold.priors, fold.cat) if TAU_HIGH and not row.gamma else None
        kw = dict(tau_high=high, hardware_known=hardware_known(row.hardware), method=row.method,
                  bounds=bounds if GAMMA_BOUNDS else None)
        names = [row.target, mapped_target(row.target) or ""] + ([setup.model.id, *setup.model.names]
                                                                  if row.catalog_target else [])
        q = query_for(names=names, method=row.method, gpu=catalog_gpu(row.hardware) or "?",
                      engine=s.engine, batch=row.batch if row.batch_known else 0, task=row.task)
        u = assess(e.speedup, e.tau, s, fold.calibration, query=q if PUBLISHED else None, **kw)
        u0 = assess(e.speedup, e.tau, s, fold.calibration, **kw)
        old = legacy_interval(e.speedup, method=row.method, batch=row.batch, gpu_class=gpu_class(setup.gpu.name),
                              moe=moe, residuals=fold.residuals)
        cache[id(row)] = Held(row, e.speedup, e.tau, u, old, s, fold.calibration, high, u0, q, bounds)
        return {}

    leave_one_source_out(rows, fit=_fitter(rows), predict=lambda f, r: (extra(f, r), cache[id(r)].speedup)[1],
                         published=lambda r: r.speedup if predictable(r, unstated_gamma=True) else None,
                         source=lambda r: source_of(r.source))  # one author's repeats held out together
    return [cache[id(r)] for r in rows if id(r) in cache]


# --- coverage -----------------------------------------------------------------------------------------

def _cov(items, rng) -> str:
    inside = sum(lo <= h.published <= hi for h in items for lo, hi in [rng(h)])
    ratios = [hi / lo for h in items for lo, hi in [rng(h)]]
    return f"coverage: {100 * inside / len(items):.0f}% over {len(items)} rows, median hi/lo {statistics.median(ratios):.2f}"


def coverage_section(held: list[Held]) -> None:
    new = lambda h: (h.u.speedup_low, h.u.speedup_high)  # noqa: E731
    old = lambda h: h.old  # noqa: E731
    print(f"== ranges, nested by source (nominal {LEVEL:.0%}) ==")
    print(f"before (the range recommend printed until now): {_cov(held, old)}")
    print(f"after  (specops.planner.uncertainty):           {_cov(held, new)}")
    above_tau = sum(h.old[1] > h.tau + 1e-9 for h in held)
    print(f"   before: {above_tau} of {len(held)} upper ends above τ; after: "
          f"{sum(h.u.speedup_high > h.tau + 1e-9 for h in held)} above the point τ, "
          f"{sum(h.u.speedup_high > h.u.tau_high + 1e-9 for h in held)} above the ceiling (τ's upper end"
          f"{'' if TAU_HIGH else ', off: --point-tau'})")
    feasible = [h for h in held if h.published <= h.tau]
    print(f"   published above the predicted τ (the acceptance model underpredicts τ there): {len(held) - len(feasible)} "
          f"rows, above the ceiling {sum(h.published > h.u.tau_high for h in held)}; among the other {len(feasible)}: "
          f"after {_cov(feasible, new)}")
    handed = [h for h in held if h.row.location.endswith("]")]  # heldout_2026-12.csv rows carry their [id]
    if handed:
        print(f"   the 2026-12 hand-over ({len(handed)} rows never used before): before {_cov(handed, old)}; "
              f"after {_cov(handed, new)}")
    for label, key in GROUPS.items():
        print(f"-- per {label} (after | before) --")
        buckets: dict[str, list[Held]] = {}
        for h in held:
            buckets.setdefault(key(h), []).append(h)
        for k, items in sorted(buckets.items()):
            mark = "" if len(items) >= 10 else "   (< 10 rows)"
            print(f"   {k:<34} {_cov(items, new)} | {_cov(items, old)}{mark}")
    print(goal_line(held))
    from uncertainty_published import width_goal_lines

    width_goal_lines(held)
    reach_section(held)
    room_section(held)
    pool_section(held)
    from uncertainty_variants import (  # bench/, beside this script
        ceiling_section,
        difficulty_section,
        pick_section,
    )

    difficulty_section(held)
    pick_section()
    ceiling_section()


GROUPS = {
    "stratum": lambda h: h.u.stratum,
    "engine class": lambda h: h.u.stratum.split("/")[0],
    "method family": lambda h: h.u.stratum.split("/")[1],
    "architecture": lambda h: h.u.stratum.split("/")[2],
    "batch range": lambda h: h.u.stratum.split("/")[3],
    "method": lambda h: h.row.method,
}
GOAL_COVERAGE, GOAL_WIDTH = 0.78, 1.6
"""Issue 38's goal: coverage ≥ 78% overall and in every group of ≥ 10 rows (any of GROUPS), median hi/lo ≤ 1.6."""


def _inside(h: Held) -> bool:
    return h.u.speedup_low <= h.published <= h.u.speedup_high


def _reachable(h: Held) -> bool:
    """Published within the physics bounds of its range (the all-rejected floor and τ's ceiling): a row outside them
    is missed by every range that respects them, however it is calibrated."""
    return h.u.floor - 1e-9 <= h.published <= h.u.tau_high + 1e-9


def _groups(held: list[Held]) -> list[tuple[str, list[Held]]]:
    """('grouping: key', rows) of every group of ≥ 10 rows over every grouping."""
    out = []
    for label, key in GROUPS.items():
        buckets: dict[str, list[Held]] = {}
        for h in held:
            buckets.setdefault(key(h), []).append(h)
        out += [(f"{label}: {k}", items) for k, items in sorted(buckets.items()) if len(items) >= 10]
    return out


def lowest_groups(held: list[Held], n: int = 3) -> list[tuple[float, str, int]]:
    """(coverage, 'grouping: key', rows) of the ``n`` least-covered groups of ≥ 10 rows over every grouping."""
    return sorted((sum(map(_inside, items)) / len(items), k, len(items)) for k, items in _groups(held))[:n]


def reach_share(held: list[Held], group: str) -> float:
    items = dict(_groups(held))[group]
    return sum(map(_reachable, items)) / len(items)


def goal_line(held: list[Held]) -> str:
    cov = sum(map(_inside, held)) / len(held)
    width = statistics.median(h.u.width for h in held)
    low = lowest_groups(held)
    met = cov >= GOAL_COVERAGE and width <= GOAL_WIDTH and low[0][0] >= GOAL_COVERAGE
    groups = ", ".join(f"{100 * c:.0f}% ({k}, {n} rows; {100 * reach_share(held, k):.0f}% within the bounds)"
                       for c, k, n in low)
    return (f"goal (coverage ≥ {GOAL_COVERAGE:.0%} overall and in every group of ≥ 10 rows, median hi/lo ≤ "
            f"{GOAL_WIDTH}): {'met' if met else 'NOT met'}: {100 * cov:.0f}%, hi/lo {width:.2f}; lowest groups {groups}")


def _q(v: list[float], q: float) -> float:
    v = sorted(v)
    pos = q * (len(v) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def _reachable_any_gamma(h: Held) -> bool:
    """Published within the physics bounds of some γ its source may have run (evidence.gamma_bounds; a row that states
    γ: its own bounds)."""
    lo, hi = (min(h.u.floor, h.bounds[0]), max(h.u.tau_high, h.bounds[1])) if h.bounds else (h.u.floor, h.u.tau_high)
    return lo - 1e-9 <= h.published <= hi + 1e-9


def reach_section(held: list[Held]) -> None:
    """Per group: the share of rows published between the floor and the ceiling - the most any range bounded by
    physics holds - next to the coverage. A group whose share is below the goal fails it whatever the calibration:
    its τ (the ceiling) or its point is too low, a point-model error (acceptance, step cost), not a range's. Beside it,
    the share within the bounds of some γ an unstated-γ row's source may have run (:func:`_reachable_any_gamma`)."""
    below = [(k, items) for k, items in _groups(held)
             if sum(map(_reachable, items)) / len(items) < GOAL_COVERAGE + 0.1]
    print(f"-- within the physics bounds (floor S/τ, ceiling τ's 95% bound): groups of ≥ 10 rows below "
          f"{100 * (GOAL_COVERAGE + 0.1):.0f}% (the most any bounded range holds | its coverage | within the bounds "
          f"of some γ an unstated-γ row may have run) --")
    for k, items in below:
        print(f"   {k:<44} {100 * sum(map(_reachable, items)) / len(items):3.0f}% of {len(items)} rows | "
              f"covered {100 * sum(map(_inside, items)) / len(items):.0f}% | any γ "
              f"{100 * sum(map(_reachable_any_gamma, items)) / len(items):.0f}%")
    print(f"   all rows: {100 * sum(map(_reachable, held)) / len(held):.0f}% within the bounds; "
          f"{100 * sum(map(_reachable_any_gamma, held)) / len(held):.0f}% within those of some γ "
          f"({sum(h.bounds is not None for h in held)} rows do not state γ)")


def oracle_width(items: list[Held]) -> float:
    """The 10th-90th percentile of the rows' own held-out residuals r − μ, as hi/lo: a range that knew the scored
    rows' errors, which no calibration does."""
    r = [math.log(h.published / h.speedup) - h.u.bias for h in items]
    return math.exp(_q(r, 0.9) - _q(r, 0.1))


ROOM = (("all rows", lambda h: True), ("serving engines", lambda h: h.u.stratum.startswith("serving")),
        ("HF harness", lambda h: h.u.stratum.startswith("harness")),
        ("native runtimes", lambda h: h.u.stratum.startswith("native")),
        ("serving, trained heads, dense", lambda h: h.u.stratum.startswith("serving/head/dense")))


def room_section(held: list[Held]) -> None:
    """How narrow an 80% range of the shipped point model can be: the held-out rows' own residuals (after μ),
    their 10th to 90th percentile (:func:`oracle_width`), and the rows above the ceiling, which no range bounded by τ
    holds."""
    print("-- room left by the point model: the 10th-90th percentile of the held-out residuals r − μ themselves "
          "(an oracle width) --")
    for label, keep in ROOM:
        items = [h for h in held if keep(h)]
        above = sum(h.published > h.u.tau_high + 1e-9 for h in items)
        print(f"   {label:<30} {len(items):>3} rows: oracle hi/lo {oracle_width(items):.2f} "
              f"(shipped median {statistics.median(h.u.width for h in items):.2f}); {above} published above the ceiling")
    by: dict[str, list[float]] = {}
    for h in held:
        by.setdefault(h.row.source, []).append(math.log(h.published / h.speedup) - h.u.bias)
    every = [x for v in by.values() for x in v]
    within = sum((x - statistics.mean(v)) ** 2 for v in by.values() for x in v) / len(every)
    print(f"   between sources: {100 * (1 - within / statistics.pvariance(every)):.0f}% of the variance of r − μ "
          f"({len(by)} sources; within a source the spread is sd {math.sqrt(within):.2f} in ln): a source's error is "
          f"mostly shared by its rows, so a range for a source not yet seen must cover that shared error")


def _reassess(held: list[Held], *, level: float = LEVEL, keep=None, strata=None, bounds: bool = GAMMA_BOUNDS,
              apart: bool = False, **options) -> list[Held]:
    """The same nested folds, each fold's calibration rebuilt with ``options`` (no refit of the point model) from
    the points ``keep`` admits (default all), the ranges drawn at ``level``. ``strata``: a map of every stratum (the
    points' and the scored rows'); ``bounds``: unstated-γ rows bounded over every γ they may have run (default: as
    --gamma-bounds says); ``apart``:
    serving and HF rows calibrated without the native runtimes' points (native rows with every point)."""
    cals: dict[tuple, RangeCalibration] = {}
    out = []
    for h in held:
        stratum = strata(h.stratum) if strata else h.stratum
        native = apart and h.stratum.engine == "native"
        cal = cals.get((id(h.calibration), native))
        if cal is None:
            points = [replace(p, stratum=strata(p.stratum)) if strata else p for p in h.calibration.points
                      if (keep is None or keep(p)) and (not apart or native or p.stratum.engine != "native")]
            cal = cals[(id(h.calibration), native)] = RangeCalibration(points, **options)
        u = assess(h.speedup, h.tau, stratum, cal, tau_high=h.tau_high, hardware_known=hardware_known(h.row.hardware),
                   method=h.row.method, level=level, bounds=h.bounds if bounds else None)
        out.append(replace(h, u=u, stratum=stratum))
    return out


def _brier(held: list[Held]) -> float:
    return statistics.mean((h.u.p_gain - (1.0 if h.published > 1 else 0.0)) ** 2 for h in held)


def pool_section(held: list[Held]) -> None:
    """The same folds re-assessed with other POOL_SOURCES (no refit): how much the strata's own rows are worth."""
    from specops.planner.uncertainty import POOL_SOURCES

    print(f"-- pooling sensitivity: the same nested folds re-assessed (shipped POOL_SOURCES {POOL_SOURCES:g}) --")
    for pool in (1, 3, 10, 30, 100, 300):
        cals: dict[int, RangeCalibration] = {}

        def rng(h: Held, pool=pool, cals=cals):
            cal = cals.setdefault(id(h.calibration), RangeCalibration(h.calibration.points, pool=pool))
            u = assess(h.speedup, h.tau, h.stratum, cal, tau_high=h.tau_high, hardware_known=hardware_known(h.row.hardware),
                   method=h.row.method, bounds=h.bounds if GAMMA_BOUNDS else None)
            return u.speedup_low, u.speedup_high

        buckets: dict[str, list[Held]] = {}
        for h in held:
            buckets.setdefault(h.u.stratum, []).append(h)
        worst = min(((sum(lo <= h.published <= hi for h in items for lo, hi in [rng(h)]) / len(items), k)
                     for k, items in buckets.items() if len(items) >= 10))
        print(f"   pool {pool:>5g}: {_cov(held, rng)}; lowest stratum of ≥ 10 rows {100 * worst[0]:.0f}% ({worst[1]})")


# --- P(gain) --------------------------------------------------------------------------------------------

def calibration_section(held: list[Held]) -> None:
    gained = [1.0 if h.published > 1 else 0.0 for h in held]
    p = [h.u.p_gain for h in held]
    brier = statistics.mean((a - b) ** 2 for a, b in zip(p, gained, strict=True))
    base = statistics.mean(gained)
    clim = statistics.mean((base - g) ** 2 for g in gained)
    point = statistics.mean(((1.0 if h.speedup > 1 else 0.0) - g) ** 2 for h, g in zip(held, gained, strict=True))
    old = statistics.mean(((1.0 if h.old[0] >= 1 else 0.0) - g) ** 2 for h, g in zip(held, gained, strict=True))
    print("\n== P(gain) on held-out rows (published speedup > 1) ==")
    print(f"Brier score: {brier:.3f} over {len(held)} rows (base rate {base:.2f}: constant {base:.2f} scores {clim:.3f}; "
          f"'point > 1' as 0/1 scores {point:.3f}; the old 'lower end ≥ 1' as 0/1 scores {old:.3f})")
    print("reliability: P(gain) bin -> rows, mean P(gain), share that gained")
    for lo, hi in ((0, 0.5), (0.5, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 0.97), (0.97, 1.01)):
        idx = [i for i, x in enumerate(p) if lo <= x < hi]
        if idx:
            print(f"   [{lo:.2f}, {min(hi, 1):.2f}) n={len(idx):>3}  mean P {statistics.mean(p[i] for i in idx):.2f}  "
                  f"gained {statistics.mean(gained[i] for i in idx):.2f}")
    exp_err = statistics.median(abs(math.log(h.published / h.u.expected_speedup)) for h in held)
    pt_err = statistics.median(abs(math.log(h.published / h.speedup)) for h in held)
    print(f"expected speedup: median |ln(published/expected)| {exp_err:.3f} (the point: {pt_err:.3f})")


# --- regret ---------------------------------------------------------------------------------------------

def situations(held: list[Held]) -> dict[tuple, list[Held]]:
    out: dict[tuple, list[Held]] = {}
    for h in held:
        r = h.row
        out.setdefault((r.source, r.location, r.target, r.hardware, r.batch, r.task, r.temperature, r.engine), []).append(h)
    return out


def today(cands: list[Held]) -> Held | None:
    """The rule until now: the best point; none when it is below 1 or its range's lower end is."""
    best = max(cands, key=lambda h: h.speedup)
    return best if best.speedup >= 1 and best.old[0] >= 1 else None


def new_rule(min_p: float, point_gain: bool = False):
    def rule(cands: list[Held]) -> Held | None:
        per_method: dict[str, Held] = {}  # recommend's candidates: each method at its best point
        for h in cands:
            if h.row.method not in per_method or h.speedup > per_method[h.row.method].speedup:
                per_method[h.row.method] = h
        judged = [Judged(h, h.speedup, h.u) for h in per_method.values() if not point_gain or h.speedup > 1]
        # (point_gain: a variant that also asks for the point above 1x)
        chosen, _ = pick(judged, min_p_gain=min_p) if judged else (None, [])
        return chosen.candidate if chosen else None
    return rule


def regret(sits: dict, rule) -> tuple[float, float, int, int]:
    missed = harm = 0.0
    n_missed = n_harm = 0
    for cands in sits.values():
        best = max(h.published for h in cands)
        chosen = rule(cands)
        got = chosen.published if chosen else 1.0
        left = max(0.0, math.log(max(best, 1.0)) - math.log(max(got, 1.0)))
        slow = max(0.0, -math.log(got))
        missed += left
        harm += slow
        n_missed += left > 1e-9
        n_harm += slow > 1e-9
    return missed, harm, n_missed, n_harm


def regret_section(held: list[Held]) -> None:
    sits = situations(held)
    print(f"\n== regret over {len(sits)} published situations ({len(held)} rows, each held out by source) ==")
    print("   left on the table: Σ ln(best published gain / gain of the pick); slowdown taken: Σ −ln(published) "
          "of picks published below 1")
    rules = {"today (best point, vetoed when the old range dips below 1)": today,
             "best point, no veto": lambda c: max(c, key=lambda h: h.speedup) if max(h.speedup for h in c) > 1 else None,
             "never speculate": lambda c: None}
    rules.update({f"new, P(gain) ≥ {p:.2f}": new_rule(p) for p in P_GRID})
    rules.update({f"new, P(gain) ≥ {p:.2f} and the point above 1x": new_rule(p, True) for p in (0.7, 0.8, 0.85)})
    for label, rule in rules.items():
        m, h, nm, nh = regret(sits, rule)
        print(f"   {label:<60} left {m:6.2f} ({nm:>2} situations)  slowdown {h:5.2f} ({nh:>2})")
    base_m, base_h, _, _ = regret(sits, today)
    at_harm = [(regret(sits, new_rule(p)), p) for p in P_GRID]
    (m_best, h_best, _, _), p_best = min(((r, p) for r, p in at_harm if r[1] <= base_h + 1e-9), key=lambda x: x[0][0])
    print(f"   at today's harm (slowdown ≤ {base_h:.2f}) the least left on the table: P(gain) ≥ {p_best:.2f} "
          f"(left {m_best:.2f}, slowdown {h_best:.2f})")
    new_m, new_h, nm, nh = regret(sits, new_rule(DEFAULT_MIN_P_GAIN))
    print(f"regret: today left {base_m:.2f} on the table, took {base_h:.2f} slowdown; new rule (P(gain) ≥ "
          f"{DEFAULT_MIN_P_GAIN:.2f}, the default) left {new_m:.2f}, took {new_h:.2f}")
    print("-- per stratum (today | new at the default) --")
    by: dict[str, dict] = {}
    for k, cands in sits.items():
        by.setdefault(cands[0].u.stratum, {})[k] = cands
    for s, group in sorted(by.items()):
        a, b = regret(group, today), regret(group, new_rule(DEFAULT_MIN_P_GAIN))
        print(f"   {s:<34} n={len(group):>3}  left {a[0]:5.2f} -> {b[0]:5.2f}   slowdown {a[1]:5.2f} -> {b[1]:5.2f}")


def main() -> None:
    from uncertainty_harness import (  # bench/, beside this script
        cases_section,
        decomposition_section,
        eager_fit_section,
        own_stands_section,
    )
    from uncertainty_published import between_sources, published_section

    held = held_out()
    between_sources()
    published_section(held)
    if "--published-only" in sys.argv:
        return
    coverage_section(held)
    calibration_section(held)
    regret_section(held)
    decomposition_section()
    eager_fit_section()
    own_stands_section(held, reassess=_reassess, groups=_groups, cov=_cov)
    cases_section()


if __name__ == "__main__":
    main()
