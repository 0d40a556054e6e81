"""What `specops recommend --gpus-available N --qps Q --tpot-slo MS` calls: the capacity search
(specops.planner.capacity) over `recommend` with this installation's priors, and its Kubernetes objects
(specops.k8s.autoscale)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specops.errors import InputError

if TYPE_CHECKING:
    from specops.planner.capacity import CapacityPlan


def capacity(values: dict[str, Any], *, gpus_available: int, qps: float, tpot_slo_ms: float | None,
             ttft_slo_ms: float | None = None, calibration: str | None = None,
             use_registry: bool = True) -> CapacityPlan:
    """The layout of ``gpus_available`` GPUs that serves ``qps`` within the SLO with the fewest GPUs.

    ``values`` are `recommend`'s other inputs (model, gpu, context_len, output_len, task, ...); --gpus, --batch-size
    and a pinned γ are the search's to choose and are refused here."""
    from pydantic import ValidationError

    from specops.api.recommend import build_request, recommend_with_defaults
    from specops.planner.capacity import CapacityRequest, plan_capacity
    from specops.planner.catalog import load_catalogs

    if tpot_slo_ms is None:
        raise InputError("--gpus-available asks for a layout within an SLO, and no --tpot-slo was given",
                         "add --tpot-slo MS (e.g. --tpot-slo 40), and --ttft-slo MS to bound the time to first token")
    for flag, key in (("--gpus/--tp", "gpus"), ("--batch-size", "batch_size"),
                      ("--num-speculative-tokens", "num_speculative_tokens")):
        if values.get(key) not in (None, 1 if key == "gpus" else None):
            raise InputError(f"{flag} is chosen by the capacity search (--gpus-available)",
                             f"drop {flag.split('/')[0]}: the search tries every layout of the pool")
    try:
        slo = CapacityRequest(gpus_available=gpus_available, qps=qps, tpot_slo_ms=tpot_slo_ms, ttft_slo_ms=ttft_slo_ms)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err.get("loc") else "input"
        flag = {"tpot_slo_ms": "--tpot-slo", "ttft_slo_ms": "--ttft-slo"}.get(key, "--" + key.replace("_", "-"))
        msg = err.get("msg", "invalid value").removeprefix("Value error, ")
        raise InputError(f"{flag} {err.get('input')}: {msg}", f"give {flag} a valid value") from None
    base = build_request(**{k: v for k, v in values.items() if k not in ("qps", "gpus", "batch_size")})
    model = load_catalogs().model(base.model, params_b=base.params_b, quantization=base.quantization,
                                  active_params_b=base.active_params_b)
    from specops.planner.load import at_rate

    cache: dict[str, Any] = {}

    def at_batch(request):  # a plan at a batch does not depend on the rate: the rates' searches share them
        key = request.model_dump_json()
        if key not in cache:
            cache[key] = recommend_with_defaults(request, calibration=calibration, use_registry=use_registry)
        return cache[key].model_copy(deep=True)  # at_rate writes the load into the plan it returns

    def plan_at(request):  # what recommend(request) does with --qps (planner.recommend), over the shared plans
        return at_batch(request) if request.qps is None else at_rate(request, at_batch)

    return plan_capacity(plan_at, base, slo, model)


CURVE_ALPHAS = (0.3, 0.5, 0.65, 0.8, 0.9)
"""First-position acceptance α0 the capacity is recomputed at for the monitor's curve (``by_acceptance``)."""


def capacity_curve(result: CapacityPlan, values: dict[str, Any]) -> list[tuple[float, float]]:
    """[accepted/drafted, requests/s a replica] of the chosen speculative configuration at other acceptance: the same
    capacity search with the method's prior replaced (planner.priors ``override``) at each of :data:`CURVE_ALPHAS`,
    with the published priors (not the registry's). Empty for no speculation."""
    from specops.api.recommend import build_request
    from specops.planner.capacity import CapacityRequest, replica_capacity
    from specops.planner.load import at_rate
    from specops.planner.priors import default_priors
    from specops.planner.recommend import recommend

    c = result.chosen
    if c.method == "none":
        return []
    slo = CapacityRequest(gpus_available=result.gpus_available, qps=result.qps, tpot_slo_ms=result.tpot_slo_ms,
                          ttft_slo_ms=result.ttft_slo_ms)
    base = build_request(**{k: v for k, v in values.items() if k not in ("qps", "gpus", "batch_size")})
    base = base.model_copy(update={"gpus": c.gpus_per_replica, "tpot_ms": result.tpot_slo_ms, "method": c.method,
                                   "draft": c.draft, "num_speculative_tokens": None, "batch_size": 1, "qps": None})
    out = []
    for alpha in CURVE_ALPHAS:
        priors = default_priors().override(c.method, base.task, alpha, source=f"capacity curve at α0={alpha}")
        cache: dict[str, Any] = {}

        def at_batch(request, priors=priors, cache=cache):
            key = request.model_dump_json()
            if key not in cache:
                cache[key] = recommend(request, priors=priors)
            return cache[key].model_copy(deep=True)

        def plan_at(request, at_batch=at_batch):
            return at_batch(request) if request.qps is None else at_rate(request, at_batch)

        rate = at_batch(base).predicted.acceptance_rate
        out.append((round(rate, 4), round(replica_capacity(plan_at, base, slo)[0], 3)))
    return sorted(out)


def capacity_deployment_yaml(result: CapacityPlan, values: dict[str, Any], name: str | None = None, *,
                             keda: bool = False) -> str:
    """The chosen layout as a DeploymentSpec for Kubernetes: replicas and TP, ``kubernetes.autoscaling`` (an HPA, or a
    KEDA ScaledObject with ``keda``) on the capacity metric, and ``capacity`` (the SLO and the per-replica capacity
    by acceptance the monitor exports it from)."""
    from specops.api.recommend import deployment_yaml
    from specops.engines.spec import AutoscalingBlock, CapacityExpectation

    c = result.chosen
    curve = capacity_curve(result, values)
    cap = CapacityExpectation(
        tpot_slo_ms=result.tpot_slo_ms, ttft_slo_ms=result.ttft_slo_ms, context_len=result.context_len,
        output_len=result.output_len, capacity_rps=c.capacity_rps, by_acceptance=curve,
        source=f"specops recommend --gpus-available {result.gpus_available} --qps {result.qps:g} (predicted: "
        f"step-cost model, {result.plan.predicted.acceptance_prior_source})")

    def edit(spec):
        auto = AutoscalingBlock(min_replicas=1, max_replicas=max(c.replicas or 1, result.gpus_available //
                                                                   c.gpus_per_replica), keda=keda)
        data = spec.model_dump()
        data["kubernetes"].update(replicas=c.replicas, autoscaling=auto.model_dump())
        return type(spec).model_validate({**data, "platform": "kubernetes", "capacity": cap.model_dump()})

    extra = [f"capacity: {c.replicas} replicas x {c.gpus_per_replica} GPUs for {result.qps:g} req/s, "
             f"{c.capacity_rps:g} req/s a replica within TPOT {result.tpot_slo_ms:g} ms, headroom {c.headroom:+.0%}"]
    return deployment_yaml(result.plan, name, edit=edit, extra=extra)
