"""How sure a predicted speedup is: an 80% range, the chance of a gain and the expected speedup,
calibrated on the model's out-of-source errors on published rows, and the pick rule that uses them.

**Residuals.** Every published row with a speedup (playbooks/data, DATA_FILES, plus the rows handed
over in playbooks/data/heldout_2026-12.csv) is predicted by the predictor `recommend` ships - the
speedup-table priors with the acceptance model attached - fitted without its own source
(:func:`specops.planner.evidence.cross_validate`, :func:`~specops.planner.evidence.fit_priors`); its
residual is r = ln(published / predicted). Rows of one source are one unit: sources are named the same way across files
(:func:`source_key`), and each residual weighs ``rows_of_its_source ** -SOURCE_EXPONENT``, so a paper
with 20 rows does not outvote 20 single-row sources.

**Strata and pooling.** A prediction is placed in a stratum: engine class (serving engine, the HF paper
harness, or another native runtime: :func:`engine_class`), method family (trained head / separate draft model / prompt lookup), target architecture
(dense / MoE / hybrid) and batch range (1-2, 3-16, 17+). Its residual distribution is a mixture built
from the coarsest level down (all rows → engine class → + method family → + architecture → + batch
range): at each level the stratum's own rows take the share n/(n + POOL_SOURCES) of the weight, n
being the *sources* it holds, and the parent keeps the rest (a level holding the same rows as its
parent adds nothing). A thin stratum is mostly its parent's distribution; a stratum with many
sources is mostly its own.

**The difficulty model** (:class:`Difficulty`; locally adaptive, "normalised" conformal): how far off a
prediction is expected to be depends on what it is, so each residual is written r = μ(x) + σ(x)·z. μ, the bias,
is a ridge regression of r on a separate-draft-model indicator, a serving engine or not, τ's own spread ln(τ_high/τ) (the acceptance
model's uncertainty) and the step's share ln(S/τ); σ, the scale, models the mean |r − μ| on a serving engine or not and
whether the row's hardware was known (a row that names no catalog GPU was predicted on a guessed A100). Both are
fitted on the calibration points only (in the bench: each nested fold's inner residuals), each source's rows
weighing rows ** -SOURCE_EXPONENT. The strata's mixtures hold the normalised residuals z = (r − μ)/σ.

**Mondrian** (group-conditional; :meth:`RangeCalibration.bounds`): z(0.1) and z(0.9) are the union of the stratum
mixture's and those of every group the prediction belongs to (GROUPINGS: engine class, method family, architecture,
batch range, stratum, method), each group's own z weighing n/(n + MONDRIAN_POOL) against the mixture (n: its
sources), so that a range holds 80% of each group's residuals, not only of all of them.

**The range** is split-conformal on that distribution: [S·e^(μ+σ·z(0.1)), S·e^(μ+σ·z(0.9))] of the weighted
quantiles of z for the nominal LEVEL 80%, widened to hold the point S itself, then bounded by
physics: never above τ (the tokens one verification step yields: a step costs at least a plain
forward, so S ≤ τ) - the *true* τ, so the ceiling is τ's one-sided 95% upper bound (CEILING_Z) where the
acceptance model states a spread (:func:`tau_ceiling`), the predicted τ elsewhere - never below S/τ (the speedup when every draft is rejected: the cost of drafting
and verifying for one token). ``width`` is hi/lo.

**P(gain)** = P(S·e^(μ+σz) > 1) under the same distribution, each residual smoothed by a normal kernel of
BANDWIDTH in ln; **expected speedup** = E[clip(S·e^(μ+σz), S/τ, τ)].

**The pick** (:func:`pick`): the candidate with the best expected speedup among those whose P(gain)
is at least the risk level (``--min-p-gain``, default DEFAULT_MIN_P_GAIN) and whose expected speedup
is above 1; when the best by point is refused the next one is tried; none qualifies → no speculation.

Coverage, width, the calibration of P(gain) (Brier score, reliability table) and the regret of the rule
are measured *nested* in bench/uncertainty_bench.py: for each held-out source, the priors and the
acceptance model are fitted and the residual distribution calibrated on the other sources only.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from pydantic import Field

from specops.models import Strict
from specops.planner.difficulty import Difficulty, Where
from specops.planner.evidence import HARNESS_ENGINES, SERVING_ENGINES
from specops.planner.uncertainty_rows import (  # noqa: F401 - the names the bench, tests and evidence import from here
    HELDOUT_FILE,
    calibration_rows,
    legacy_interval,
    load_heldout_2026_12,
    source_key,
    unify_sources,
)

LEVEL = 0.80
"""Nominal coverage of every range."""
POOL_SOURCES = 100.0
"""A stratum holding n sources keeps n/(n + POOL_SOURCES) of the weight against its parent. Chosen on
the nested bench (bench/uncertainty_bench.py; 142 rows, 43 sources; with the difficulty model): a stratum's
rows from other sources say little about a new source - with 3 the ranges held 70% of held-out speedups,
with 30 76%, with 100 80%, 300 79%, median hi/lo 2.13-2.17 throughout. Sources differ more than strata do:
what makes one range differ from another is the difficulty model (μ, σ) and the physics bounds (τ, S/τ);
the strata only tilt the shared distribution of z."""
SOURCE_EXPONENT = 0.5
"""Each residual weighs rows_of_its_source ** -SOURCE_EXPONENT (0: rows count equally; 1: sources do).
On the bench (pool 100, before the difficulty model): 0 held 71% at hi/lo 2.18, 0.5 74% at 2.26, 1 76% at 2.48."""
BANDWIDTH = 0.05
"""Normal kernel (in ln speedup) that smooths each residual for P(gain)."""
DEFAULT_MIN_P_GAIN = 0.80
"""Risk level of the pick: a candidate needs P(speedup > 1) at least this to be chosen. Set from the
regret bench (bench/uncertainty_bench.py): see docs/recommend.md."""
LEVELS = ("all published rows", "engine class", "engine class and method family",
          "engine class, method family and architecture",
          "engine class, method family, architecture and batch range")
CEILING_Z = 2.04
"""The ceiling of a range is τ at the acceptance model's α0 raised by CEILING_Z of its logit spread: τ's
one-sided 95% upper bound as the acceptance model's own held-out errors place it (since 2026-12-07: of 209 chain
rows from 33 sources, each predicted with its source held out, 10% lay above z 1.645 - source-weighted - and the
95% quantile is z 2.033, rounded up to 2.04: :func:`specops.planner.acceptance.held_out_logit_z`; MTP 27% and draft_model 26% above
1.645, the heads 0%. Nested, 142 rows, with published runs: 1.645 83% at median hi/lo 2.40, Brier 0.0817; 2.03
85% at 2.47, Brier 0.0811, regret unchanged 4.27 / 1.68; the serving/model/dense/batch 1-2 stratum 64% at both).
Before: 1.645, the normal quantile; 1.2816 (the upper end of τ's two-sided 80% range) until 2026-12-03. A bound
every speedup must respect should rarely bind on the truth: clipping an 80% speedup range at the upper
end of an 80% τ range trims it twice, and the rows whose τ the acceptance model underpredicts (draft
models on TensorRT-LLM, the EAGLE-3 paper's harness rows) were cut off. Measured nested
(bench/uncertainty_bench.py --ceiling-z Z, 142 rows, 2026-12-03, before the Mondrian union): 1.2816 78% coverage at median hi/lo 1.98, lowest
group of ≥ 10 rows 57%, Brier 0.081, regret 3.81 left / 1.73 slowdown; 1.645 80% at 1.94, 57%, 0.081,
3.98 / 1.73; 1.96 80% at 1.95, 57%, 0.080, 3.98 / 1.73."""
MONDRIAN_POOL: float | None = 3.0
"""Mondrian (group-conditional) calibration (None: off): the range in z is the union of the stratum mixture's
10th-90th percentile and that of every group the prediction belongs to (GROUPINGS, the groups issue 38's goal
names), each group's own normalised residuals taking n/(n + MONDRIAN_POOL) of the weight against the stratum's
mixture (n: the group's sources). Measured nested (bench/uncertainty_bench.py, variants; 142 rows, 2026-12-03):
off, 80% coverage at median hi/lo 2.05 with 6 groups of ≥ 10 rows below 78%, 3 of them (EAGLE-3 72%, MoE 76%,
harness/head/dense/batch 1-2 76%) with ≥ 90% of their rows inside the physics bounds, i.e. short for the
calibration's sake; pool 1: 85% at 2.66, the 3 groups below 78% all bounded by physics (serving/model/dense/
batch 1-2: 64% of its rows lie between the floor and the ceiling; method family model 76%; draft_model 75%),
Brier and regret unchanged (P(gain) and the expected speedup read the stratum mixture, not the union); pool 3
82% at 2.57 with EAGLE-3 at 75%; pool 0 85% at 2.68. Coverage in every group first (issue 38), so on,
at the cost of width: the residuals' between-source share (71% of their variance) is what a source not yet
seen must be covered for. Pool 3 since native runtimes are an engine class of their own (2026-12-05, model alone:
pool 1 84% at 2.53, pool 2 84% at 2.49, pool 3 84% at 2.47 with no group of ≥ 10 rows losing a row against the
two-class pool 1 it replaced; pool 5 83% at 2.42 and pool 10 83% at 2.35 lose one EAGLE-3 row (80% -> 78%) and
one HF row; with two classes pool 3 already loses them)."""
GROUPINGS: dict[str, Callable[[Stratum, str], str]] = {
    "engine class": lambda s, m: s.engine,
    "method family": lambda s, m: s.family,
    "architecture": lambda s, m: s.arch,
    "batch range": lambda s, m: s.batch,
    "stratum": lambda s, m: s.label(),
    "method": lambda s, m: m,
}
"""The groups issue 38's goal names (coverage ≥ 78% in each of ≥ 10 rows): what Mondrian calibration conditions on."""
OWN_STANDS: int | None = None
"""A stratum's own calibration stands (no union with the wider groups) once it has at least this many sources
(None: never; bench/uncertainty_harness.py measures N nested; issue 38, 2026-12-03: not shipped, see there)."""
NEAR_DEPTH = 3
"""A stratum matched at least this deep (engine, family, architecture) with rows of its own is "near"."""


# --- strata -----------------------------------------------------------------------------------------

def engine_class(engine: str) -> str:
    """serving (vLLM, SGLang, TensorRT-LLM), harness (the HF/PyTorch paper harness, `--engine hf`) or native (any
    other runtime a published row ran on: llama.cpp, MLX, T5X, gpt-fast-style PyTorch). `recommend` never asks about
    a native runtime, so their rows calibrate their own class and do not set the HF harness's bias and groups."""
    if engine in SERVING_ENGINES:
        return "serving"
    return "harness" if engine in HARNESS_ENGINES else "native"


def method_family(method: str) -> str:
    """head (EAGLE/EAGLE-3/Medusa heads, native MTP), model (a separate draft LM, DFlash), lookup
    (n-gram, suffix)."""
    from specops.speculation import METHODS

    fam = METHODS[method].family if method in METHODS else "head"
    return {"head": "head", "native": "head", "model": "model", "model_free": "lookup"}.get(fam, "head")


def arch_class(kind: str | None, moe: bool) -> str:
    if kind == "hybrid":
        return "hybrid"
    return "moe" if moe or kind == "moe" else "dense"


def batch_class(batch: int) -> str:
    return "1-2" if batch <= 2 else "3-16" if batch <= 16 else "17+"


@dataclass(frozen=True)
class Stratum:
    engine: str   # serving | harness | native
    family: str   # head | model | lookup
    arch: str     # dense | moe | hybrid
    batch: str    # 1-2 | 3-16 | 17+

    def key(self, depth: int) -> tuple[str, ...]:
        return (self.engine, self.family, self.arch, self.batch)[:depth]

    def label(self) -> str:
        return f"{self.engine}/{self.family}/{self.arch}/batch {self.batch}"


def stratum_of(*, engine: str, method: str, kind: str | None, moe: bool, batch: int) -> Stratum:
    return Stratum(engine_class(engine), method_family(method), arch_class(kind, moe), batch_class(batch))


# --- the calibrated distribution -------------------------------------------------------------------

@dataclass(frozen=True)
class ResidualPoint:
    """One residual: its source (unified), ln(published/predicted), its stratum and citation, and what the
    difficulty model reads (:class:`Difficulty`): the predicted speedup S and τ, τ's ceiling, whether the
    row's hardware was known (0 speedup: not recorded - the calibration is then not adaptive)."""

    source: str
    log_ratio: float
    stratum: Stratum
    cite: str = ""
    speedup: float = 0.0
    tau: float = 0.0
    tau_high: float = 0.0
    hardware_known: bool = True
    method: str = ""
    target: str = ""         # the row's published target, GPU (catalog name, "" unstated), batch and speedup:
    gpu: str = ""            # what specops.planner.published_runs matches a request against
    batch: int = 0
    batch_known: bool = False
    published: float = 0.0
    cite_full: str = ""
    task: str = ""

    @property
    def where(self) -> Where:
        return Where(self.stratum, self.speedup, self.tau, self.tau_high or self.tau, self.hardware_known, self.method)


def points_from(residuals: Iterable) -> list[ResidualPoint]:
    """:class:`ResidualPoint` s from :class:`specops.planner.evidence.Residual` s."""
    from specops.planner.evidence import catalog_gpu

    out = []
    for r in residuals:
        s = stratum_of(engine=r.row.engine, method=r.row.method, kind=getattr(r, "arch", None), moe=r.moe,
                       batch=r.row.batch)
        out.append(ResidualPoint(source_key(r.row.source), r.log_ratio, s, r.row.source.split(",")[0][:60],
                                 r.predicted, r.tau, getattr(r, "tau_high", 0.0) or r.tau,
                                 getattr(r, "hardware_known", True), r.row.method or "", r.row.target,
                                 catalog_gpu(r.row.hardware), r.row.batch, r.row.batch_known,
                                 r.row.speedup or 0.0, r.row.source, r.row.task))
    return out


@dataclass(frozen=True)
class Mixture:
    """The pooled distribution of one stratum's normalised residuals z = (r − μ)/σ (:class:`Difficulty`; plain
    log-ratios where the calibration is not adaptive), sorted, with weights summing to 1."""

    logs: tuple[float, ...]
    weights: tuple[float, ...]
    depth: int            # deepest level with rows of the stratum's own
    own_rows: int         # rows at that level
    own_sources: int
    cites: tuple[str, ...]
    own_share: float = 0.0  # weight of the deepest stratum's own rows (the rest is pooled from its parents)

    def quantile(self, q: float) -> float:
        acc, cum = 0.0, []
        for w in self.weights:
            acc += w
            cum.append(acc)
        i = bisect.bisect_left(cum, q * acc - 1e-12)
        return self.logs[min(i, len(self.logs) - 1)]

    def p_above(self, x: float, bandwidth: float = BANDWIDTH) -> float:
        """P(r > x), each residual smoothed by N(0, bandwidth)."""
        if bandwidth <= 0:
            return sum(w for r, w in zip(self.logs, self.weights, strict=True) if r > x)
        return sum(w * 0.5 * math.erfc((x - r) / (bandwidth * math.sqrt(2))) for r, w in zip(self.logs, self.weights, strict=True))


class RangeCalibration:
    """Residual points, the difficulty model fitted on them and the pooled mixture of each stratum's
    normalised residuals z = (r − μ)/σ (computed once per stratum). ``adaptive``: fit the difficulty model
    (None: where every point records its prediction; False: plain split-conformal on r)."""

    def __init__(self, points: Sequence[ResidualPoint], *, pool: float = POOL_SOURCES, exponent: float = SOURCE_EXPONENT,
                 adaptive: bool | None = None, mondrian: float | None = MONDRIAN_POOL,
                 groupings: dict[str, Callable[[Stratum, str], str]] | None = None, density_depth: int = NEAR_DEPTH,
                 own_stands: int | None = OWN_STANDS, **difficulty):
        self.points = list(points)
        self.own_stands = own_stands
        self.pool, self.exponent = pool, exponent
        self.mondrian = mondrian
        self.groupings = GROUPINGS if groupings is None else groupings
        if adaptive is None:
            adaptive = bool(self.points) and all(p.speedup > 0 and p.tau > 0 for p in self.points)
        self.density_depth = density_depth
        self._near: dict[tuple, dict[str, int]] = {}
        for p in self.points:
            near = self._near.setdefault(p.stratum.key(density_depth), {})
            near[p.source] = near.get(p.source, 0) + 1
        wheres = [replace(p.where, density=self.density(p.stratum, p.source)) for p in self.points]
        self.difficulty = (Difficulty.fit(self.points, exponent=exponent, wheres=wheres, **difficulty)
                           if adaptive and self.points else Difficulty.identity())
        self.scores = [(p.log_ratio - self.difficulty.mu(w)) / self.difficulty.sigma(w)
                       for p, w in zip(self.points, wheres, strict=True)]
        self._cache: dict[Stratum, Mixture] = {}
        self._bounds: dict[tuple, tuple[float, float, str]] = {}

    def density(self, stratum: Stratum, source: str = "") -> int:
        """Evidence near a prediction: the calibration's sources (``source`` left out) that share its stratum to
        ``density_depth`` levels (engine class, method family, architecture by default)."""
        return sum(1 for s in self._near.get(stratum.key(self.density_depth), {}) if s != source)

    def mixture(self, stratum: Stratum) -> Mixture:
        if stratum not in self._cache:
            self._cache[stratum] = self._build(stratum)
        return self._cache[stratum]

    def bounds(self, stratum: Stratum, method: str, level: float = LEVEL) -> tuple[float, float, str]:
        """(z low, z high, the last group that widened it, as "grouping key's n rows (m sources)", or ""): the stratum
        mixture's (1 ∓ level)/2 quantiles,
        and with Mondrian calibration (``mondrian`` a pool) the union with each group's own - the group's points
        taking n/(n + pool) of the weight against the stratum's mixture, n its sources - so the range holds
        ``level`` of each group's residuals, not only of all of them."""
        key = (stratum, method, level)
        if key in self._bounds:
            return self._bounds[key]
        mix = self.mixture(stratum)
        a, b = (1 - level) / 2, (1 + level) / 2
        lo, hi, which = mix.quantile(a), mix.quantile(b), ""
        if self.mondrian is not None and self.points:
            base = dict(zip(mix.logs, mix.weights, strict=True))  # score -> weight (ties merge: same quantiles)
            groupings = self.groupings
            if self.own_stands is not None and "stratum" in groupings:
                label = stratum.label()
                if len({p.source for p in self.points if p.stratum.label() == label}) >= self.own_stands:
                    groupings = {"stratum": groupings["stratum"]}  # its own sources are enough: no wider union
            for name, group in groupings.items():
                g = group(stratum, method)
                mine = [i for i, p in enumerate(self.points) if g and group(p.stratum, p.method) == g]
                if not mine:
                    continue
                n_src = len({self.points[i].source for i in mine})
                share = n_src / (n_src + self.mondrian)
                w: dict[float, float] = {z: (1 - share) * x for z, x in base.items()}
                for i, x in self._level(mine).items():
                    w[self.scores[i]] = w.get(self.scores[i], 0.0) + share * x
                zs = sorted(w)
                m = Mixture(tuple(zs), tuple(w[z] for z in zs), 0, 0, 0, ())
                glo, ghi = m.quantile(a), m.quantile(b)
                if glo < lo - 1e-12 or ghi > hi + 1e-12:
                    which = f"{name} {g}'s {len(mine)} rows ({n_src} sources)"
                lo, hi = min(lo, glo), max(hi, ghi)
        self._bounds[key] = (lo, hi, which)
        return lo, hi, which

    def _level(self, members: list[int]) -> dict[int, float]:
        counts: dict[str, int] = {}
        for i in members:
            counts[self.points[i].source] = counts.get(self.points[i].source, 0) + 1
        raw = {i: counts[self.points[i].source] ** -self.exponent for i in members}
        total = sum(raw.values())
        return {i: w / total for i, w in raw.items()}

    def _build(self, stratum: Stratum) -> Mixture:
        if not self.points:
            return Mixture((0.0,), (1.0,), 0, 0, 0, ())
        weights = self._level(list(range(len(self.points))))
        depth, members, own_share = 0, list(range(len(self.points))), 1.0
        for d in range(1, len(LEVELS)):
            key = stratum.key(d)
            mine = [i for i in range(len(self.points)) if self.points[i].stratum.key(d) == key]
            if not mine:
                break
            if mine == members:  # the same rows as the level above: no new evidence to pool again
                depth = d
                continue
            n_src = len({self.points[i].source for i in mine})
            share = n_src / (n_src + self.pool)
            own = self._level(mine)
            weights = {i: (1 - share) * w for i, w in weights.items()}
            for i, w in own.items():
                weights[i] = weights.get(i, 0.0) + share * w
            depth, members, own_share = d, mine, share
        order = sorted(weights, key=lambda i: self.scores[i])
        cites = tuple(dict.fromkeys(self.points[i].cite for i in sorted(members, key=lambda i: -weights[i])))[:3]
        return Mixture(tuple(self.scores[i] for i in order), tuple(weights[i] for i in order), depth,
                       len(members), len({self.points[i].source for i in members}), cites, own_share)


class Uncertainty(Strict):
    """What a predicted speedup is worth: its range, the chance it is a gain, its expected value."""

    speedup: float = Field(description="The performance model's point prediction.")
    speedup_low: float = Field(description="Lower end of the range (nominal LEVEL coverage), at least S/τ.")
    speedup_high: float = Field(description="Upper end of the range, at most τ.")
    level: float = Field(description="Nominal coverage of the range (0.8).")
    width: float = Field(description="speedup_high / speedup_low.")
    p_gain: float = Field(description="P(speedup > 1) under the calibrated residual distribution.")
    expected_speedup: float = Field(description="Mean speedup under the calibrated residual distribution, "
                                    "bounded by S/τ and τ.")
    tau: float = Field(description="Tokens per verification step, as predicted.")
    tau_high: float = Field(description="τ's one-sided 95% upper bound (the acceptance model's spread, CEILING_Z; τ "
                            "itself where no spread is known): the range's ceiling, since a speedup cannot exceed the "
                            "true τ.")
    floor: float = Field(description="Speedup if every draft is rejected (S/τ): the range's floor.")
    rows: int = Field(description="Published rows of the deepest stratum the distribution draws on.")
    sources: int = Field(description="Sources of those rows.")
    matched_on: str = Field(description="The deepest stratum level with published rows of its own.")
    own_weight: float = Field(description="Share of the distribution those rows carry (the rest is pooled).")
    stratum: str = Field(description="engine class / method family / architecture / batch range.")
    near: bool = Field(description="False: no published row shares the engine class, method family and "
                       "architecture: the range leans on coarser strata.")
    median_error: float = Field(description="Weighted median |ln(published/predicted)| of the distribution.")
    cited: list[str] = Field(default_factory=list, description="Up to three sources of the deepest stratum.")
    bias: float = Field(0.0, description="μ: the ln(published/predicted) the difficulty model expects here "
                        "(positive: the point model tends to underpredict such setups); the range is centred on it.")
    scale: float = Field(1.0, description="σ: how far off, in ln speedup, the difficulty model expects such a "
                         "prediction to be, relative to the calibration's normalised residuals.")
    widened_by: str = Field("", description="The group (Mondrian calibration) whose own residuals widened the range "
                            "beyond its stratum's: grouping, key, rows and sources; empty when none did.")
    evidence_rows: list[str] = Field(default_factory=list, description="The published runs of (nearly) this "
                                     "configuration (same target or a name mapped to it, method, GPU or GPU class, "
                                     "engine class, batch within 4x; specops.planner.published_runs) that moved the "
                                     "range, P(gain) and the expected speedup toward them: method, speedup, batch, GPU, "
                                     "source. Empty: none is near, the prediction is the model's alone.")
    model_p_gain: float | None = Field(None, description="P(gain) from the model's held-out errors alone, before the "
                                       "published runs moved it (null: no run was near).")
    published_checked: bool = Field(False, description="Whether published runs of this configuration were looked "
                                    "for (false: the range of a bare point prediction, with no configuration).")
    note: str = Field("", description="Why this candidate carries this range when it is not the usual one (a measured "
                      "prediction whose calibration has too few residuals for a range of its own); empty otherwise.")

    # names the plan and the old evidence object shared
    @property
    def speedup_range(self) -> tuple[float, float]:
        return self.speedup_low, self.speedup_high

    def published_text(self) -> str:
        """'published: <runs> (model alone: P(gain) p)' or 'no published run near this configuration'."""
        if not self.evidence_rows:
            return "no published run near this configuration" if self.published_checked else ""
        more = f" and {len(self.evidence_rows) - 2} more" if len(self.evidence_rows) > 2 else ""
        return f"published: {'; '.join(self.evidence_rows[:2])}{more} (model alone: P(gain) {self.model_p_gain:.2f})"

    def line(self) -> str:
        near = "" if self.near else "; no published row is near this configuration: the range extrapolates"
        ceiling = (f"τ {self.tau:.2f}" if self.tau_high <= self.tau + 5e-4 else
                   f"τ's 95% bound {self.tau_high:.2f} (τ {self.tau:.2f})")
        fit = ("" if self.bias == 0 and self.scale == 1 else
               f"; such predictions ran {self.bias:+.2f} ln (σ {self.scale:.2f})")
        widened = f"; widened by {self.widened_by}" if self.widened_by else ""
        pub = self.published_text()
        return ((self.note + ": " if self.note else "") + (pub + "; " if pub else "") + f"{self.level:.0%} range {self.speedup_low:.2f}x-{self.speedup_high:.2f}x, "
                f"P(gain) {self.p_gain:.2f}, expected {self.expected_speedup:.2f}x, from held-out errors on "
                f"published rows{fit}: {self.rows} rows ({self.sources} sources) of {self.stratum} weigh "
                f"{self.own_weight:.0%}{widened}; bounds {ceiling}, floor {self.floor:.2f}x{near}")


def assess(speedup: float, tau: float, stratum: Stratum, calibration: RangeCalibration, *,
           level: float = LEVEL, tau_high: float | None = None, hardware_known: bool = True,
           method: str = "", query=None, bounds: tuple[float, float] | None = None,
           roofline_bias: bool = True) -> Uncertainty:
    """The range, P(gain) and expected speedup of a point prediction ``speedup`` with ``tau`` tokens per
    verification step, in ``stratum``. ``tau_high`` (default ``tau``): τ's one-sided 95% bound (:func:`tau_ceiling`) - the
    ceiling, as a speedup is bounded by the *true* τ, which can exceed the predicted one (:func:`tau_ceiling`);
    the floor S/τ stays at the predicted τ (the step's cost relative to a plain step is the model's τ/S).
    The residual is μ + σ·z (:class:`Difficulty`: μ and σ of this prediction, z from the stratum's mixture).
    ``query`` (:class:`specops.planner.published_runs.Query`): the configuration itself; the calibration's published
    runs near it update the distribution (:func:`specops.planner.published_runs.update`) before the physics bounds.
    ``roofline_bias`` False: μ is 0 - the point is not the roofline's (a measured model's speedup), so the roofline's
    bias on published rows does not apply to it; σ and the residuals' shape still do."""
    mix = calibration.mixture(stratum)
    tau = max(1.0, tau)
    high = max(tau, tau_high or tau)
    where = Where(stratum, speedup, tau, high, hardware_known, method, calibration.density(stratum))
    mu, sigma = calibration.difficulty.mu(where) if roofline_bias else 0.0, calibration.difficulty.sigma(where)
    shown_mu, shown_sigma = mu, sigma
    logs = [mu + sigma * z for z in mix.logs]
    floor = min(speedup / tau, speedup)
    if bounds is not None:  # (floor, ceiling) over every γ a source that did not state its γ may have run
        floor, high = min(floor, bounds[0]), max(high, bounds[1])
    cap = max(high, speedup)
    z_lo, z_hi, widened = calibration.bounds(stratum, method, level)
    lo_q, hi_q = mu + sigma * z_lo, mu + sigma * z_hi
    runs, model_p, bandwidth = [], None, BANDWIDTH
    if query is not None:
        from specops.planner.published_runs import near_runs, update

        runs = near_runs(calibration.points, query, speedup)
        if runs:
            model_p = mix.p_above((-math.log(speedup) - mu) / sigma, BANDWIDTH / sigma) if speedup > 0 else 0.0
            m0, m1, k = update(logs, mix.weights, runs)
            logs = [m1 + (x - m0) * k for x in logs]
            lo_q, hi_q = m1 + (lo_q - m0) * k, m1 + (hi_q - m0) * k
            mu, sigma, bandwidth = m1, 1.0, BANDWIDTH * k  # p_above below reads the moved logs directly
            mix = replace(mix, logs=tuple(logs))
    lo = min(speedup, max(floor, speedup * math.exp(lo_q)))
    hi = max(speedup, min(cap, speedup * math.exp(hi_q)))
    if runs:
        p = mix.p_above(-math.log(speedup), bandwidth) if speedup > 0 else 0.0
    else:
        p = mix.p_above((-math.log(speedup) - mu) / sigma, BANDWIDTH / sigma) if speedup > 0 else 0.0
    expected = sum(w * min(cap, max(floor, speedup * math.exp(r))) for r, w in zip(logs, mix.weights, strict=True))
    errs = sorted(zip((abs(r) for r in logs), mix.weights, strict=True))
    acc, med = 0.0, 0.0
    for e, w in errs:
        acc += w
        med = e
        if acc >= 0.5:
            break
    point = round(speedup, 3)  # shown to 3 decimals: the low end rounded up, the high end down (bounds hold)
    lo, hi = min(point, math.ceil(lo * 1000) / 1000), max(point, math.floor(hi * 1000) / 1000)
    return Uncertainty(speedup=point, speedup_low=lo, speedup_high=hi, level=level,
                       width=round(hi / lo, 3) if lo > 0 else math.inf, p_gain=round(min(1.0, max(0.0, p)), 3),
                       expected_speedup=round(expected, 3), tau=round(tau, 3), tau_high=round(high, 3),
                       floor=round(floor, 3),
                       rows=mix.own_rows, sources=mix.own_sources, matched_on=LEVELS[mix.depth],
                       own_weight=round(mix.own_share, 3),
                       stratum=stratum.label(), near=mix.depth >= NEAR_DEPTH or bool(runs),
                       median_error=round(med, 3), cited=list(mix.cites), bias=round(shown_mu, 3),
                       scale=round(shown_sigma, 3), widened_by=widened, published_checked=query is not None,
                       evidence_rows=[r.text() for r in runs],
                       model_p_gain=None if model_p is None else round(min(1.0, max(0.0, model_p)), 3))


def tau_ceiling(prior, gamma: int, tau: float, *, z: float | None = None) -> float:
    """The ceiling of a speedup range: τ at ``gamma`` with the acceptance model's α0 raised by ``z`` (default
    CEILING_Z) of its logit spread - τ's one-sided 95% upper bound - where the acceptance prior carries the
    acceptance model's estimate (:class:`~specops.planner.acceptance.AcceptanceEstimate`; z 1.2816 gives the
    upper end of its 80% ``tau_range``, ``predicted.acceptance.mean_acceptance_length_high``), else the
    predicted ``tau``."""
    est = getattr(prior, "evidence", None)
    if est is None or not gamma:
        return tau
    if not all(hasattr(est, k) for k in ("alpha0", "logit_sd", "decay")):
        return max(tau, est.tau_range(gamma)[1])
    if hasattr(est, "tau_at"):  # the acceptance model's estimate prices a tree by its size (acceptance_tree)
        return max(tau, est.tau_at(gamma, CEILING_Z if z is None else z))
    from specops.planner.acceptance import MAX_ALPHA, MIN_ALPHA
    from specops.speculation import expected_tokens

    a0 = min(MAX_ALPHA, max(MIN_ALPHA, est.alpha0))
    logit = math.log(a0 / (1 - a0)) + (CEILING_Z if z is None else z) * est.logit_sd
    alpha = min(MAX_ALPHA, 1 / (1 + math.exp(-logit)))
    return max(tau, expected_tokens(alpha, gamma, est.decay, MAX_ALPHA))


@lru_cache(maxsize=1)
def default_calibration() -> RangeCalibration:
    """The shipped calibration: residuals of :func:`calibration_rows`, each with its own source left out
    (kept in the planner's disk cache, keyed on every input)."""
    from specops.planner.diskcache import cached

    return RangeCalibration(cached("uncertainty-points", _default_points))


def _default_points() -> list[ResidualPoint]:
    from specops.planner.evidence import cross_validate

    return points_from(cross_validate(calibration_rows(), unstated_gamma=True))


# --- the pick ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Judged:
    """A candidate with its uncertainty (None: no range applies - no speculation)."""

    candidate: object
    speedup: float
    u: Uncertainty | None

    @property
    def p_gain(self) -> float:
        return self.u.p_gain if self.u else 1.0

    @property
    def expected(self) -> float:
        return self.u.expected_speedup if self.u else self.speedup


def eligible(j: Judged, min_p_gain: float) -> bool:
    """The rule's bar: P(gain) at least the risk level and an expected speedup above 1."""
    return j.p_gain >= min_p_gain and j.expected > 1.0


def pick(judged: Sequence[Judged], *, min_p_gain: float, score: Callable[[Judged], float] | None = None):
    """(chosen or None, refused): the best expected score among candidates with P(gain) ≥ ``min_p_gain``
    and an expected speedup above 1 (:func:`eligible`), and the better-by-point candidates refused on the way (falling
    through them, not to no speculation). ``score`` defaults to the expected speedup."""
    score = score or (lambda j: j.expected)
    ok = [j for j in judged if eligible(j, min_p_gain)]
    if not ok:
        return None, sorted(judged, key=lambda j: -j.speedup)
    best = max(ok, key=score)
    refused = [j for j in judged if j not in ok and j.speedup > best.speedup]
    return best, sorted(refused, key=lambda j: -j.speedup)


def rule_text(min_p_gain: float) -> str:
    return (f"best expected speedup among candidates with P(gain) ≥ {min_p_gain:.2f} and expected speedup > 1 "
            f"({LEVEL:.0%} ranges)")
