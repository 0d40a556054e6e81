"""The variants half of bench/uncertainty_bench.py (issue 38): the difficulty model's and the calibration's choices,
each re-assessed on the same nested folds (uncertainty_bench._reassess: no refit of the point model), and how far the
acceptance model's own held-out errors exceed the ceiling's z. Imported by uncertainty_bench.py's coverage section; not
a bench of its own.

Each variant line: nested coverage and median hi/lo over every row, Brier score of P(gain), regret of the default rule
(left on the table / slowdown taken), coverage/median hi/lo of the serving rows and of the HF harness rows (what a
user of `recommend --engine` sees; native runtimes - llama.cpp, MLX, T5X, ... - are scored but never asked about),
then the lowest group of ≥ 10 rows and the lowest of those with ≥ 90% of their rows inside the physics bounds.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from uncertainty_bench import (
    DEFAULT_MIN_P_GAIN,
    Held,
    _brier,
    _groups,
    _inside,
    _reachable,
    _reassess,
    lowest_groups,
    new_rule,
    regret,
    situations,
)

from specops.planner.evidence import SERVING_ENGINES
from specops.planner.uncertainty import Stratum


def _worst(held: list[Held]) -> str:
    """The least-covered group of ≥ 10 rows over every grouping, and the lowest among those whose rows are ≥ 90%
    within the physics bounds (what the calibration alone decides)."""
    share, k, _ = lowest_groups(held, 1)[0]
    free = sorted((sum(map(_inside, items)) / len(items), g) for g, items in _groups(held)
                  if sum(map(_reachable, items)) / len(items) >= 0.9)[0]
    return f"{100 * share:.0f}% ({k}); within bounds {100 * free[0]:.0f}% ({free[1]})"


def difficulty_section(held: list[Held]) -> None:
    """The difficulty model's choices, each re-assessed on the same nested folds: what each feature is worth."""
    from specops.planner import difficulty as unc

    def feats(*names):
        def f(w, names=names):
            return [1.0] + [_FEATURES[n](w) for n in names]
        return f

    native = feats("model", "serving", "tau_spread", "step", "native")  # the shipped bias + a native term
    variants = {
        "plain split-conformal (no difficulty model)": {"adaptive": False},
        "bias only by family+engine, no scale": {"center_features": feats("model", "lookup", "serving"),
                                                  "scale_features": feats()},
        "scale only (engine, hardware known)": {"center_features": feats(), "scale_features": feats("serving", "hw")},
        "bias family+engine, scale engine+hw": {"center_features": feats("model", "lookup", "serving"),
                                                "scale_features": feats("serving", "hw")},
        "shipped + bias for prompt lookup": {"center_features": feats("model", "lookup", "serving", "tau_spread",
                                                                        "step")},
        "shipped + bias for prompt lookup and for suffix decoding": {
            "center_features": feats("model", "lookup", "suffix", "serving", "tau_spread", "step")},
        "shipped (bias: draft model, engine, τ spread, S/τ; scale: engine, hw; 3 engine classes; Mondrian pool 3)": {},
        "two engine classes, Mondrian pool 1 (shipped until 2026-12-05)": {"strata": _two_classes, "mondrian": 1.0},
        "two engine classes, Mondrian pool 3": {"strata": _two_classes},
        "two engine classes, Mondrian pool 10": {"strata": _two_classes, "mondrian": 10.0},
        "two engine classes + bias by native runtime, Mondrian pool 1": {"strata": _two_classes, "center_features": native,
                                                                         "mondrian": 1.0},
        "two engine classes + bias by native runtime, Mondrian pool 10": {"strata": _two_classes,
                                                                          "center_features": native, "mondrian": 10.0},
        "two engine classes + scale by native runtime, Mondrian pool 1": {
            "strata": _two_classes, "scale_features": feats("serving", "hw", "native"), "mondrian": 1.0},
        "shipped, Mondrian pool 1": {"mondrian": 1.0},
        "shipped + bias by native runtime": {"center_features": native},
        "shipped + bias by native runtime, Mondrian pool 10 (see pick_section)": {"center_features": native,
                                                                                 "mondrian": 10.0},
        "shipped + bias by native runtime, its draft term from the others' rows": {"center_features": feats(
            "model_not_native", "serving", "tau_spread", "step", "native"), "mondrian": 10.0},
        "shipped + scale by native runtime": {"scale_features": feats("serving", "hw", "native")},
        "shipped + bias and scale by native runtime": {"center_features": native,
                                                       "scale_features": feats("serving", "hw", "native")},
        "shipped, HF and serving ranges calibrated without native rows": {"apart": True},
        "shipped, unstated-γ rows bounded over every γ they may have run (--gamma-bounds)": {"bounds": True},
        "two engine classes, pool 1, unstated-γ rows bounded over every γ": {"strata": _two_classes, "mondrian": 1.0,
                                                                           "bounds": True},
        "shipped without Mondrian (the range until 2026-12-03)": {"mondrian": None},
        "shipped without Mondrian, drawn at 86%": {"mondrian": None, "level": 0.86},
        "shipped, ridge 5": {"ridge": 5.0},
        "shipped, scale floor 0.01": {"floor": 0.01},
        "shipped, scale floor 0.02": {"floor": 0.02},
        "shipped, scale floor 0.1": {"floor": 0.1},
        "shipped, μ by least squares (no Huber)": {"huber": 0.0},
        "shipped, Huber δ 0.1": {"huber": 0.1},
        "shipped, Huber δ 0.4": {"huber": 0.4},
        "shipped, |μ| ≤ 0.3": {"cap": 0.3},
        "shipped, ridge 20": {"ridge": 20.0},
        "shipped + scale by τ spread, S/τ": {"scale_features": feats("serving", "hw", "tau_spread", "step")},
        "shipped + scale by family": {"scale_features": feats("serving", "hw", "model", "lookup")},
        "shipped, bias for draft_model only (not DFlash)": {"center_features": feats("draft", "serving", "tau_spread",
                                                                                       "step")},
        "shipped + bias for MoE": {"center_features": feats("model", "serving", "tau_spread", "step", "moe")},
        "shipped + scale by MoE": {"scale_features": feats("serving", "hw", "moe")},
        "shipped + scale by serving trained head on dense": {"scale_features": feats("serving", "hw", "srv_head_dense")},
        "shipped + bias and scale by batch 17+": {"center_features": feats("model", "serving", "tau_spread", "step", "big"),
                                                  "scale_features": feats("serving", "hw", "big")},
        "bias by stratum and method (one-hot, shrunk: ridge 10), τ spread, S/τ": {
            "center_features": _stratum_bias, "ridge": 10.0},
        "bias by stratum and method (one-hot, shrunk: ridge 3), τ spread, S/τ": {
            "center_features": _stratum_bias, "ridge": 3.0},
        "shipped, sources count equally (exponent 1)": {"exponent": 1.0},
        "shipped, exponent 0.75": {"exponent": 0.75},
        "shipped, drawn at 82% (a finite-sample correction in sources)": {"level": 0.82},
        "shipped, calibrated without rows published above their ceiling": {"keep": _not_above_ceiling},
        "shipped + scale by evidence density (other sources near it)": {"scale_features": feats("serving", "hw",
                                                                                               "density")},
        "shipped + scale by density, near = engine and family only": {"scale_features": feats("serving", "hw", "density"),
                                                                       "density_depth": 2},
        "shipped + bias and scale by evidence density": {"center_features": feats("model", "serving", "tau_spread",
                                                                                 "step", "density"),
                                                        "scale_features": feats("serving", "hw", "density")},
        "Mondrian by every goal group, pool 0 (each group's own z)": {"mondrian": 0.0},
        "Mondrian by every goal group, pool 1": {"mondrian": 1.0},
        "Mondrian by every goal group, pool 2": {"mondrian": 2.0},
        "Mondrian by every goal group, pool 3 (shipped)": {"mondrian": 3.0},
        "Mondrian by every goal group, pool 5": {"mondrian": 5.0},
        "Mondrian by every goal group, pool 10": {"mondrian": 10.0},
        "Mondrian by every goal group, pool 20": {"mondrian": 20.0},
        "Mondrian by every goal group, pool 30": {"mondrian": 30.0},
        "Mondrian by every goal group, pool 3, drawn at 76%": {"mondrian": 3.0, "level": 0.76},
        "Mondrian by method, pool 0": {"mondrian": 0.0, "groupings": _grouping("method")},
        "Mondrian by method and architecture, pool 1": {"mondrian": 1.0, "groupings": _grouping("method",
                                                                                               "architecture")},
        "Mondrian by method and architecture, pool 3": {"mondrian": 3.0, "groupings": _grouping("method",
                                                                                               "architecture")},
        "Mondrian by stratum, pool 0": {"mondrian": 0.0, "groupings": _grouping("stratum")},
    }
    from specops.planner.uncertainty import MONDRIAN_POOL

    print(f"-- variants of the difficulty model and the calibration, the same nested folds re-assessed (shipped ridge "
          f"{unc.RIDGE:g}; each with the shipped Mondrian pool {MONDRIAN_POOL} unless it says otherwise) --")
    print(f"   {'variant':<66} {'cover':>5} {'hi/lo':>5} {'Brier':>5} {'left':>5} {'slow':>5} {'serving':>9} {'HF':>9}  "
          f"lowest group of ≥ 10 rows; lowest of those ≥ 90% within the bounds")
    sits = situations(held)
    for label, options in variants.items():
        again = _reassess(held, **options)
        by_id = {id(h.row): a for h, a in zip(held, again, strict=True)}
        m, hm, _, _ = regret({k: [by_id[id(h.row)] for h in v] for k, v in sits.items()}, new_rule(DEFAULT_MIN_P_GAIN))
        cov = 100 * sum(map(_inside, again)) / len(again)
        print(f"   {label:<66} {cov:4.0f}% {statistics.median(h.u.width for h in again):5.2f} {_brier(again):5.3f} "
              f"{m:5.2f} {hm:5.2f} {_part(again, _serving)} {_part(again, _hf)}  {_worst(again)}")


def _serving(h: Held) -> bool:
    return h.row.engine in SERVING_ENGINES


def _hf(h: Held) -> bool:
    return h.row.engine == "hf"


def _part(held: list[Held], keep) -> str:
    """'coverage%/median hi/lo' of the rows ``keep`` admits."""
    items = [h for h in held if keep(h)]
    return f"{100 * sum(map(_inside, items)) / len(items):3.0f}%/{statistics.median(h.u.width for h in items):.2f}"


@dataclass(frozen=True)
class _Harness(Stratum):
    """A native runtime's stratum placed in the harness class (the strata until 2026-12-05), still known as native
    to a variant's features."""

    native: bool = False


def _two_classes(s: Stratum) -> Stratum:
    """The strata until 2026-12-05: native runtimes in the harness class."""
    return _Harness("harness", s.family, s.arch, s.batch, True) if s.engine == "native" else s


_FEATURES = {
    "model": lambda w: float(w.stratum.family == "model"),
    "lookup": lambda w: float(w.stratum.family == "lookup"),
    "serving": lambda w: float(w.stratum.engine == "serving"),
    "native": lambda w: float(w.stratum.engine == "native" or getattr(w.stratum, "native", False)),
    "model_not_native": lambda w: float(w.stratum.family == "model" and not (w.stratum.engine == "native"
                                                                             or getattr(w.stratum, "native", False))),
    "suffix": lambda w: float(w.method == "suffix"),
    "hw": lambda w: float(w.hardware_known),
    "draft": lambda w: float(w.method == "draft_model"),
    "moe": lambda w: float(w.stratum.arch == "moe"),
    "big": lambda w: float(w.stratum.batch == "17+"),
    "srv_head_dense": lambda w: float((w.stratum.engine, w.stratum.family, w.stratum.arch) == ("serving", "head", "dense")),
    "density": lambda w: math.log1p(w.density),
    "tau_spread": lambda w: math.log(max(w.tau_high, w.tau, 1.0) / max(w.tau, 1.0)),
    "step": lambda w: math.log(max(w.speedup, 1e-3) / max(w.tau, 1.0)),
}


def _grouping(*names: str) -> dict:
    from specops.planner.uncertainty import GROUPINGS

    return {n: GROUPINGS[n] for n in names}


def _stratum_bias(w) -> list[float]:
    """μ on one-hot strata (engine, family, architecture, batch, their main interactions) and methods, plus τ's
    spread and S/τ: a bias per stratum shrunk toward the overall one by the ridge."""
    s = w.stratum
    hot = [s.engine == "serving", s.family == "model", s.family == "lookup", s.arch == "moe", s.arch == "hybrid",
           s.batch == "3-16", s.batch == "17+", s.engine == "serving" and s.family == "model",
           s.engine == "serving" and s.arch == "moe", s.family == "head" and s.arch == "moe",
           w.method == "mtp", w.method == "eagle3", w.method == "draft_model", w.method == "suffix"]
    return [1.0, *map(float, hot), _FEATURES["tau_spread"](w), _FEATURES["step"](w)]


def _not_above_ceiling(p) -> bool:
    """A calibration point whose published speedup is not above its τ ceiling (one that is: its τ is implausible
    for what the acceptance model knows of its method)."""
    return not (p.speedup > 0 and p.speedup * math.exp(p.log_ratio) > (p.tau_high or p.tau))




def ceiling_section() -> None:
    """How often the acceptance model's held-out errors pass the ceiling's z (uncertainty.CEILING_Z): every chain row
    of playbooks/data/acceptance_2026-12.csv that states γ and τ, predicted with its source held out
    (acceptance.held_out_logit_z); each source's rows weigh rows ** -0.5. A ceiling at τ's one-sided 95% bound should
    be passed by 5% of them; the quantile is what CEILING_Z is set from."""
    from specops.planner.acceptance import held_out_logit_z, weighted_quantile_z, weighted_share_above
    from specops.planner.uncertainty import CEILING_Z

    zs = held_out_logit_z()
    print(f"\n== the ceiling's z against the acceptance model's held-out errors (shipped CEILING_Z {CEILING_Z}) ==")
    for label, keep in (("all methods", lambda m: True), ("draft_model", lambda m: m == "draft_model"),
                        ("all but dflash and mtp", lambda m: m not in ("dflash", "mtp"))):
        items = [x for x in zs if keep(x[0])]
        sources = len({s for _, s, _ in items})
        print(f"   {label:<24} {len(items):>3} rows, {sources:>2} sources: above z {CEILING_Z} "
              f"{100 * weighted_share_above(items, CEILING_Z):.0f}% (weighted), above 1.645 "
              f"{100 * weighted_share_above(items, 1.645):.0f}%; held-out one-sided 95% quantile of z "
              f"{weighted_quantile_z(items, 0.95):.2f}")


PICK_MODELS = ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct", "Qwen/Qwen3-8B",
               "openai/gpt-oss-120b", "Qwen/Qwen3-30B-A3B")
PICK_GPUS = ("H100", "A100-80GB", "B200", "L40S")


def pick_section() -> None:
    """What `recommend` would pick with the native-runtime bias term (not shipped) against the shipped calibration, both
    on the shipped calibration points: a grid of targets, GPUs, batches (1, 8, 64, 256) and engines (vllm, hf). Not
    nested: it is about what users would be told, where the nested figures cannot look (few published setups hold two
    methods)."""
    import itertools

    from specops.errors import SpecopsError
    from specops.planner import RecommendRequest, recommend
    from specops.planner.uncertainty import RangeCalibration, default_calibration

    shipped = default_calibration()
    native = RangeCalibration(shipped.points, mondrian=10.0, center_features=lambda w: [
        1.0, *(_FEATURES[n](w) for n in ("model", "serving", "tau_spread", "step", "native"))])
    moved, n = [], 0
    for model, gpu, batch, engine in itertools.product(PICK_MODELS, PICK_GPUS, (1, 8, 64, 256), ("vllm", "hf")):
        request = RecommendRequest(model=model, gpu=gpu, batch_size=batch, engine=engine)
        try:
            a, b = recommend(request, residuals=shipped), recommend(request, residuals=native)
        except SpecopsError:  # the weights do not fit that GPU: no plan either way
            continue
        n += 1
        if a.method != b.method:
            moved.append((request, a, b))
    print(f"\n== picks with the native-runtime bias (Mondrian pool 10; not shipped) against the shipped calibration: "
          f"{len(moved)} of {n} move ==")
    for r, a, b in moved:
        print(f"   {r.model} {r.gpu} batch {r.batch_size} {r.engine}: {a.method} {a.predicted.speedup:.2f}x -> {b.method} "
              f"{b.predicted.speedup:.2f}x (P(gain) {b.predicted.p_gain or 0:.2f}, expected "
              f"{b.predicted.expected_speedup or 0:.2f}x)")
