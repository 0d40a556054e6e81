"""The difficulty model of the speedup ranges (:mod:`specops.planner.uncertainty`): how far off, and in which
direction, a prediction of a given kind is expected to be - locally adaptive ("normalised") split-conformal.

Each calibration residual r = ln(published/predicted) is written μ(x) + σ(x)·z: μ, the bias, is a ridge
regression of r on :func:`_center_features`; σ, the scale, models the mean |r − μ| as exp(x·β) on
:func:`_scale_features` (a Gamma fit with a log link); both weighted so that each source's rows weigh rows ** -exponent. The ranges are then
conformal in z (uncertainty.RangeCalibration). Pure Python: the systems are 3x3 to 6x6.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from specops.speculation import solve_linear


@dataclass(frozen=True)
class Where:
    """What the difficulty model knows of a prediction before its outcome."""

    stratum: object  # uncertainty.Stratum: .engine (serving | harness | native), .family (head | model | lookup)
    speedup: float
    tau: float
    tau_high: float
    hardware_known: bool = True
    method: str = ""
    density: float = 0.0  # sources of the calibration, its own left out, near it (uncertainty.RangeCalibration.density)


def _center_features(w: Where) -> list[float]:
    """The bias μ(x) reads: a separate draft model or not, engine class (serving or not), τ's own spread ln(τ_high/τ),
    the step's share ln(S/τ). Not prompt lookup: its 11 published rows (most at batch 1) ran +0.2 to +1.4 in ln, and a
    lookup term lifted n-gram over the cost model's pick where nothing was measured (--task code on an 8B
    model: n-gram 1.78x expected 2.40x over EAGLE-3 2.30x; batch 256: n-gram at 0.88x); see CENTER_FEATURES. Not
    a native runtime either (llama.cpp, MLX, T5X, ...: uncertainty.engine_class): see CENTER_FEATURES."""
    tau = max(1.0, w.tau)
    return [1.0, float(w.stratum.family == "model"), float(w.stratum.engine == "serving"),
            math.log(max(w.tau_high, tau) / tau), math.log(max(w.speedup, 1e-3) / tau)]


def _scale_features(w: Where) -> list[float]:
    """The scale σ(x) reads: engine class and whether the hardware was known."""
    return [1.0, float(w.stratum.engine == "serving"), float(w.hardware_known)]


CENTER_FEATURES: Callable[[Where], list[float]] = _center_features
SCALE_FEATURES: Callable[[Where], list[float]] = _scale_features
"""The features, chosen on the nested bench (bench/uncertainty_bench.py, "difficulty model variants", 142 rows):
plain split-conformal 77% coverage at median hi/lo 2.67, Brier 0.092, regret 8.99 left / 1.78 slowdown; a scale
alone 80% at 2.37; a bias alone 74% at 2.21; these (bias and scale) 80% at 2.17, Brier 0.082, 6.17 / 1.73; with a
prompt-lookup term in the bias 80% at 2.11, 3.98 / 1.73, but it lifts n-gram over the cost model's pick where
nothing was measured (see _center_features); adding τ's spread and S/τ to the scale, or the family, 79% at 2.23 /
75% at 2.13 with more regret. A bias term for native runtimes (2026-12-05, model alone, Mondrian pool 10): 85% at
2.34, regret left 4.27 -> 3.68, the HF harness rows' median hi/lo 3.69 -> 3.10 with no group losing a row - but its
intercept lets the native rows' draft-model runs (10 of their 14 at +0.2 to +2.2 in ln: T5X, MagicDec, llama.cpp)
lift the shared draft-model term (serving draft models' μ about +0.29 -> +0.34), and recommend then moves 10 of 120 picks of a
grid, 8 from EAGLE-3 to a separate draft model predicted slower (Qwen3-8B on an H100 at batch 1: 1.81x -> 1.39x;
Llama-3.1-8B on an A100 at batch 256: none -> draft_model at 0.92x), where nothing was measured (bench
uncertainty_variants.pick_section). Its draft term fitted on the other engines only: 86% at 2.55, regret left 7.33.
Not shipped; nor a scale term for native runtimes (81% at 2.34, the HF rows 89% -> 81%, EAGLE-3 70%)."""
RIDGE = 1.0
"""Ridge penalty on every coefficient but the intercept (weights sum to the number of sources). On the bench:
ridge 1 80% at 2.17; 5 77% at 2.19, regret 9.31 left; 20 77% at 2.33, 7.06 left."""
SCALE_FLOOR = 0.01
"""ln σ is fitted on ln(|r − μ| + SCALE_FLOOR): a residual of exactly 0 does not pull σ to nothing. Small, so
that kinds of prediction whose errors differ by a factor keep that factor (a floor of 0.05 makes a kind that
errs by ±0.1 look half as close as it is, over-covering it and under-covering the far ones); on the nested
bench 0.01, 0.02 and 0.1 give the same figures (80% at hi/lo 2.17): it only seeds the scale's fit (SCALE_STEPS)."""
SCALE_STEPS = 12
"""Fisher-scoring steps of the scale's fit: σ(x) models the mean |r − μ| (a kind of prediction that errs twice
as far gets twice the σ), not the geometric mean, which the smallest residuals would drag down."""
HUBER, HUBER_STEPS = 0.0, 8
"""μ by least squares (HUBER 0), or a Huber regression of δ HUBER in ln (HUBER_STEPS reweightings). Measured
nested (bench/uncertainty_bench.py, 142 rows): least squares 80% coverage, Brier 0.082, regret 6.17 left / 1.73
slowdown; Huber δ 0.1 78%, 0.085, 9.72 / 1.73; δ 0.4 78%, 0.083, 6.70 / 1.73: the far-off rows (suffix decoding published at e^1.1-e^1.4 of
its prediction) are evidence, not noise to discount."""
CENTER_CAP, SCALE_RANGE = 0.5, (0.05, 1.5)
"""|μ| ≤ CENTER_CAP; σ within SCALE_RANGE (in ln speedup)."""


def _ridge(xs: list[list[float]], ys: list[float], ws: list[float], ridge: float) -> list[float]:
    k = len(xs[0])
    a = [[sum(w * x[i] * x[j] for x, w in zip(xs, ws, strict=True)) + (ridge if i == j and i else 0.0)
          for j in range(k)] for i in range(k)]
    b = [sum(w * x[i] * y for x, y, w in zip(xs, ys, ws, strict=True)) for i in range(k)]
    return solve_linear(a, b)


@dataclass(frozen=True)
class Difficulty:
    """Locally adaptive (normalised) conformal: the residual r of a prediction is modelled as
    μ(x) + σ(x)·z, μ a ridge regression of r on :func:`_center_features`, ln σ one of ln|r − μ| on
    :func:`_scale_features`, both fitted on the calibration points with each source's rows weighing
    rows ** -exponent; the ranges are then conformal in z. :meth:`identity` (μ 0, σ 1) is plain
    split-conformal."""

    center: tuple[float, ...] = ()
    scale: tuple[float, ...] = ()
    center_features: Callable[[Where], list[float]] | None = None
    scale_features: Callable[[Where], list[float]] | None = None
    cap: float = CENTER_CAP

    @classmethod
    def identity(cls) -> Difficulty:
        return cls()

    @classmethod
    def fit(cls, points: Sequence, *, exponent: float = 0.5, ridge: float = RIDGE,
            center_features: Callable[[Where], list[float]] | None = None,
            scale_features: Callable[[Where], list[float]] | None = None, cap: float = CENTER_CAP,
            huber: float = HUBER, floor: float = SCALE_FLOOR, wheres: Sequence[Where] | None = None) -> Difficulty:
        """Fitted on ``points`` (uncertainty.ResidualPoint: .source, .log_ratio, .where); ``center_features`` /
        ``scale_features``: default CENTER_FEATURES / SCALE_FEATURES;
        ``lambda w: [1.0]`` fits a constant)."""
        cf, sf = center_features or CENTER_FEATURES, scale_features or SCALE_FEATURES
        counts: dict[str, int] = {}
        for p in points:
            counts[p.source] = counts.get(p.source, 0) + 1
        raw = [counts[p.source] ** -exponent for p in points]
        ws = [w * len(counts) / sum(raw) for w in raw]
        wheres = list(wheres) if wheres is not None else [p.where for p in points]
        xs, ys = [cf(w) for w in wheres], [p.log_ratio for p in points]
        center = _ridge(xs, ys, ws, ridge)
        for _ in range(HUBER_STEPS if huber else 0):  # Huber: a far-off residual pulls by δ, not by its size
            res = [y - sum(c * f for c, f in zip(center, x, strict=True)) for x, y in zip(xs, ys, strict=True)]
            center = _ridge(xs, ys, [w * min(1.0, huber / max(abs(e), 1e-9)) for w, e in zip(ws, res, strict=True)], ridge)
        d = cls(tuple(center), (), cf, sf, cap)
        dev = [abs(p.log_ratio - d.mu(w)) for p, w in zip(points, wheres, strict=True)]
        xs = [sf(w) for w in wheres]
        scale = _ridge(xs, [math.log(e + floor) for e in dev], ws, ridge)  # a start: ln|r − μ| regressed
        for _ in range(SCALE_STEPS):  # then E|r − μ| = exp(x·β): a Gamma fit with a log link (Fisher scoring)
            eta = [sum(c * f for c, f in zip(scale, x, strict=True)) for x in xs]
            scale = _ridge(xs, [n + e / math.exp(n) - 1 for n, e in zip(eta, dev, strict=True)], ws, ridge)
        return replace(d, scale=tuple(scale))

    def mu(self, w: Where) -> float:
        if not self.center or self.center_features is None:
            return 0.0
        x = sum(c * f for c, f in zip(self.center, self.center_features(w), strict=True))
        return max(-self.cap, min(self.cap, x))

    def sigma(self, w: Where) -> float:
        if not self.scale or self.scale_features is None:
            return 1.0
        x = math.exp(sum(c * f for c, f in zip(self.scale, self.scale_features(w), strict=True)))
        return max(SCALE_RANGE[0], min(SCALE_RANGE[1], x))
