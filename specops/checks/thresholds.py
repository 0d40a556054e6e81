"""Thresholds that mean the same at every γ.

vLLM's accepted/drafted rate falls as γ grows (a healthy EAGLE-3 at γ=7 shows ≈0.36), so acceptance
floors apply to the per-token α: the i.i.d. equivalent solved from τ and γ
(:func:`specops.metrics.alpha_from_tau`), or position-0 acceptance. The hard floor is the α below
which the performance model predicts a speedup under 1 for this deployment.

The performance model is injected (``SpeedupModel``: α, γ -> predicted speedup). :func:`speedup_model`
prefers the planner's model when the planner offers one; otherwise it is Leviathan et al. 2023 §3,
``S = (1 − α^(γ+1)) / ((1 − α)(γ·c + 1))`` with the profile's draft cost ratio c.
"""

from __future__ import annotations

from collections.abc import Callable

from specops.checks.types import Profile
from specops.speculation import SEPARATE_MODEL_METHODS, bisect, expected_tokens

SpeedupModel = Callable[[float, int], float]
OPS = {">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b,
       "<=": lambda a, b: a <= b, "==": lambda a, b: a == b}


def leviathan_speedup(draft_cost_ratio: float) -> SpeedupModel:
    def model(alpha: float, gamma: int) -> float:
        return expected_tokens(alpha, gamma) / (gamma * draft_cost_ratio + 1.0)
    model.__doc__ = f"Leviathan et al. 2023 §3, c={draft_cost_ratio}"
    return model


def speedup_model(profile: Profile, deployment: dict | None = None, registry=None) -> tuple[SpeedupModel, str]:
    """The performance model for a deployment and where it comes from (shown next to the floor): the
    planner's when the profile names a GPU and the target resolves in the planner's catalogs."""
    planner = planner_model(profile, deployment or {}, registry)
    if planner is not None:
        return planner
    return leviathan_speedup(profile.draft_cost_ratio), (
        f"Leviathan et al. 2023 §3 with draft cost ratio c={profile.draft_cost_ratio} (profile)")


def planner_model(profile: Profile, deployment: dict, registry=None) -> tuple[SpeedupModel, str] | None:
    """specops.planner.perfmodel's prediction at the profile's GPU, batch and lengths; None when the
    profile names no GPU or the target is not known to the planner's catalogs."""
    if not profile.gpu or not deployment.get("method") or not deployment.get("target_ref"):
        return None
    from specops.errors import SpecopsError
    from specops.planner.catalog import generic_model, load_catalogs
    from specops.planner.perfmodel import VLLM_PROFILE, DraftSpec, Setup, evaluate, head_params
    from specops.planner.priors import AcceptancePrior

    try:
        cats = load_catalogs()
        name = deployment["target_ref"].rpartition("@")[0] or deployment["target_ref"]
        model = cats.catalog_model(name)
        if model is None and registry is not None:
            model = cats.model(registry.get_target(deployment["target_ref"]).source)
        if model is None:
            return None
        gpu = cats.gpu(profile.gpu)
    except SpecopsError:
        return None
    method = deployment["method"]
    if method in SEPARATE_MODEL_METHODS:
        size = model.params_b / 16
        draft = DraftSpec(method, deployment.get("draft_ref"), size, model=generic_model("draft", size), typical=True)
    else:
        draft = DraftSpec(method, deployment.get("draft_ref"), head_params(model, method) / 1e9,
                          "3" if method == "eagle3" else None, typical=True)
    tp = int((deployment.get("engine_config") or {}).get("tensor_parallel_size") or 1)
    setup = Setup(model, gpu, tp, VLLM_PROFILE)

    def predict(alpha: float, gamma: int) -> float:
        prior = AcceptancePrior(alpha0=alpha, decay=1.0, source="validate")
        return evaluate(setup, draft, prior, gamma=gamma, kv_dtype="auto", batch=profile.batch,
                        context_len=profile.context_len, output_len=profile.output_len).speedup
    return predict, (f"planner performance model: {model.id} on {tp}x {gpu.name}, batch {profile.batch}, "
                     f"{profile.context_len}+{profile.output_len} tokens")


def performance_floor(model: SpeedupModel, gamma: int) -> float:
    """The α at which predicted speedup crosses 1 (speedup grows with α). 0 if it never drops under 1,
    1 if it never reaches 1 (speculation cannot pay at this γ)."""
    if model(0.0, gamma) >= 1.0:
        return 0.0
    if model(1.0, gamma) < 1.0:
        return 1.0
    return bisect(lambda a: model(a, gamma), 1.0, 0.0, 1.0)


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 100]) of a non-empty list (the benchmark's definition)."""
    from specops.benchmark.stats import percentile as _percentile

    if not values:
        raise ValueError("percentile of no values")
    return _percentile(values, q)


def statistic(values: list[float], stat: str) -> float:
    if stat == "p50":
        return percentile(values, 50)
    if stat == "p5":
        return percentile(values, 5)
    if stat == "mean":
        return sum(values) / len(values)
    if stat == "min":
        return min(values)
    return values[-1]
