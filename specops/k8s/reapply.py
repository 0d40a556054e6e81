"""Change a running Kubernetes deployment in place: the monitor's fallback actions.

``reapply_spec`` re-renders a changed spec (speculation off, or a new γ) and server-side applies its
Deployment only, as field manager ``specops``: the cache claim, Service and monitoring objects do not
depend on the speculative settings, and the in-cluster Role grants ``get`` and ``patch`` on
Deployments and nothing on the rest (specops.retrain.incluster.NEEDED). The live replica count is
kept (an autoscaler or `kubectl scale` may have changed it; applying the same value does not take
the field over). A field another manager changed in the Deployment is a ``ConflictError``: the
monitor reports it and does not force (a person decides). The spec applied is saved as the
deployment's ``spec.yaml`` and recorded in the registry (the row's method, γ, draft, argv and spec,
plus a ``fallback`` event), as a local redeploy records it. The rollout is not awaited: a 70B engine
takes minutes to start, longer than a monitor cycle; the Deployment's own rolling update keeps the
old pods serving until the new ones are ready.
"""

from __future__ import annotations

from pydantic import Field

from specops.engines.spec import DeploymentSpec
from specops.errors import ConflictError, InputError
from specops.k8s import render as r
from specops.k8s.cluster import Cluster, is_managed
from specops.models import Strict


class ReapplyResult(Strict):
    """What ``reapply_spec`` changed."""


    name: str = Field(description="Deployment name.")
    namespace: str = Field(description="Namespace.")
    args_before: list[str] = Field(description="The vllm container's args before.")
    args_after: list[str] = Field(description="The vllm container's args after.")
    changed: bool = Field(description="False: the Deployment already had these args (nothing applied).")
    generation: int | None = Field(None, description="The Deployment's metadata.generation after the apply.")


def _args(dep: dict) -> list[str]:
    containers = dep["spec"]["template"]["spec"]["containers"]
    main = next((c for c in containers if c.get("name") == "vllm"), containers[0])
    return list(main.get("args") or [])


def reapply_spec(spec: DeploymentSpec, *, reason: str, registry=None, api_client=None, actor: str = "specops",
                 canary_of: str | None = None) -> ReapplyResult:
    """Apply ``spec``'s re-rendered Deployment over the live one (see the module docstring)."""
    from specops.k8s.deploy import _method, _ref, endpoint_for, save_spec
    from specops.k8s.manifests import render_manifests

    ns = spec.kubernetes.namespace
    cluster = Cluster(api_client)
    live = cluster.get("apps/v1", "Deployment", spec.name, ns)
    if live is None or not is_managed(live):
        raise InputError(f'no specops-managed Deployment "{spec.name}" in namespace {ns} to change',
                         "deploy it first (`specops deploy SPEC --platform kubernetes`) or check the namespace")
    if canary_of is None:
        canary_of = (live["metadata"].get("annotations") or {}).get(r.ANN_CANARY_OF)
    replicas = (live.get("spec") or {}).get("replicas")
    objs = render_manifests(spec, canary_of=canary_of, replicas=replicas, monitoring=False)
    dep = next(o for o in objs if o["kind"] == "Deployment")
    before, after = _args(live), _args(dep)
    result = ReapplyResult(name=spec.name, namespace=ns, args_before=before, args_after=after,
                           changed=before != after, generation=live["metadata"].get("generation"))
    if result.changed:
        try:
            out, _ = cluster.apply(dep)
        except ConflictError as exc:
            raise ConflictError(exc.message, "undo the other change, or put it in the spec and deploy it with "
                                "`specops deploy SPEC --platform kubernetes --force-conflicts` (the monitor "
                                "never forces)", managers=exc.managers, fields=exc.fields) from None
        result.generation = out["metadata"].get("generation")
    save_spec(spec)
    if registry is not None:
        container = dep["spec"]["template"]["spec"]["containers"][0]
        row_status = registry.get_deployment(spec.name).status
        registry.set_deployment_status(
            spec.name, row_status, actor=actor, reason=reason[:2000], method=_method(spec),
            num_speculative_tokens=spec.speculative.num_speculative_tokens, draft_ref=_ref(spec.draft),
            engine_config=spec.model_dump(mode="json", exclude={"local"}),
            argv_redacted=[*container["command"], *container["args"]],
            endpoint=endpoint_for(canary_of or spec.name, ns, spec.serve.port))
        registry.record_event("fallback", spec.name,
                              f"re-applied Deployment {ns}/{spec.name}: "
                              + ("speculation off" if _method(spec) is None else
                                 f"{_method(spec)} with num_speculative_tokens="
                                 f"{spec.speculative.num_speculative_tokens}")
                              + ("" if result.changed else " (already so; nothing applied)"),
                              actor=actor, reason=reason[:2000],
                              data={"namespace": ns, "generation": result.generation, "changed": result.changed,
                                    "method": _method(spec),
                                    "num_speculative_tokens": spec.speculative.num_speculative_tokens})
    return result
