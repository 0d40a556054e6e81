"""Deploy, wait, record; promote and roll back canaries.

``deploy_kubernetes``: render → validate (offline, every object) → preflight against the cluster
(nothing is written to it before every check passed) → write ``manifests/<name>/`` → server-side
apply → wait for the Deployment rollout → record in the registry.

Canary: ``canary_of=STABLE`` renders a Deployment (and its cache claim) with the stable's
``app.kubernetes.io/name`` and its own ``specops.io/deployment``; the stable's Service sends it
traffic in proportion to replicas. ``promote`` copies the canary's pod spec into the stable
Deployment (keeping the stable's labels, selector, replicas and cache claim), waits for that rollout
and deletes the canary; ``rollback`` deletes the canary. Both are events in the registry.
"""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import ConfigDict, Field

from specops.engines.spec import DeploymentSpec
from specops.errors import ConflictError, EngineError, InputError
from specops.k8s import render as r
from specops.k8s.cluster import Cluster, Progress, is_managed, preflight
from specops.models import Strict
from specops.secrets import redact_argv


def _quiet(_: str) -> None:
    return None


class KubeDeployResult(Strict):
    """What a Kubernetes deploy did."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str = Field(description="Deployment name.")
    namespace: str = Field(description="Namespace.")
    role: str = Field(description="stable or canary.")
    canary_of: str | None = Field(None, description="The stable a canary shares traffic with.")
    dry_run: bool = Field(description="True: nothing stored in the cluster (rendered and written, or server dry run).")
    server_dry_run: bool = Field(False, description="True: the API server checked every object (dryRun=All).")
    paths: list[Path] = Field(default_factory=list, description="Files written.")
    objects: list[dict] = Field(default_factory=list, description="The rendered, validated objects.")
    validated_against: list[str] = Field(default_factory=list, description="Schema used per object.")
    applied: list[str] = Field(default_factory=list, description="'Kind name created|configured' per object.")
    rollout: str | None = Field(None, description="Final rollout state.")
    endpoint: str | None = Field(None, description="In-cluster OpenAI endpoint.")
    recorded: bool = Field(False, description="Recorded in the registry.")
    notes: list[str] = Field(default_factory=list, description="Checks skipped and hints.")

    def summary_lines(self) -> list[str]:
        kinds = ", ".join(f"{o['kind']}/{o['metadata']['name']}" for o in self.objects)
        lines = [f"rendered {len(self.objects)} objects for {self.name} ({self.role}"
                 + (f" of {self.canary_of}" if self.canary_of else "") + f"): {kinds}",
                 f"validated offline: built-in kinds against the Kubernetes {_kver()} schemas, "
                 "custom resources against specops' structural schemas"]
        if self.paths:
            lines.append(f"wrote {self.paths[0].parent}/ ({len(self.paths)} files)")
        if self.server_dry_run:
            lines.append("server dry run: the API server accepted every object; nothing was stored")
        elif self.dry_run:
            lines.append("dry run: nothing applied to a cluster")
        lines += [f"applied {a}" for a in self.applied]
        if self.rollout:
            lines.append(f"rollout: {self.rollout}")
        if self.endpoint:
            lines.append(f"endpoint: {self.endpoint}")
        if not self.dry_run:
            lines.append("recorded in the registry" if self.recorded else "not recorded (no registry available)")
        lines += [f"note: {n}" for n in self.notes]
        return lines


def _kver() -> str:
    from specops.k8s.validate import KUBERNETES_VERSION

    return KUBERNETES_VERSION


def default_out_dir() -> Path:
    return Path("manifests")


# --- rollout -----------------------------------------------------------------------------------------

def rollout_state(dep: dict) -> tuple[bool, str]:
    """(done, words) from a Deployment's spec and status, the way `kubectl rollout status` reads it."""
    want = (dep.get("spec") or {}).get("replicas", 1)
    st = dep.get("status") or {}
    gen = (dep.get("metadata") or {}).get("generation")
    observed = st.get("observedGeneration")
    for cond in st.get("conditions") or []:
        if cond.get("type") == "Progressing" and cond.get("reason") == "ProgressDeadlineExceeded":
            raise EngineError(f"Deployment {dep['metadata']['name']} exceeded its progress deadline",
                              f"kubectl -n {dep['metadata'].get('namespace')} describe deployment "
                              f"{dep['metadata']['name']} (and its pods' events)")
    if gen is not None and (observed is None or observed < gen):
        return False, "waiting for the controller to observe the new spec"
    updated, available, total = (st.get("updatedReplicas") or 0, st.get("availableReplicas") or 0,
                                 st.get("replicas") or 0)
    if updated < want:
        return False, f"{updated}/{want} replicas updated"
    if total > updated:
        return False, f"{total - updated} old replicas terminating"
    if available < want:
        return False, f"{available}/{want} replicas available"
    return True, f"{available}/{want} replicas available"


def wait_rollout(cluster: Cluster, name: str, namespace: str, *, timeout_s: float, progress: Progress,
                 poll_s: float = 1.0) -> str:
    from specops.progress import waiting

    t0 = time.monotonic()
    deadline = t0 + timeout_s
    last, noted = "", t0
    while True:
        dep = cluster.get("apps/v1", "Deployment", name, namespace)
        if dep is None:
            raise EngineError(f"Deployment {namespace}/{name} disappeared during the rollout",
                              "check who deleted it (`kubectl get events`) and deploy again")
        done, words = rollout_state(dep)
        if words != last:
            progress(f"rollout {name}: {words}")
            last = words
        elif not done and time.monotonic() - noted >= 5:  # a long rollout: the time left, every few seconds
            noted = time.monotonic()
            progress(waiting(f"the rollout of {name} ({words})", noted - t0, timeout_s))
        if done:
            return words
        if time.monotonic() >= deadline:
            raise EngineError(f"rollout of Deployment {namespace}/{name} did not finish in {timeout_s:g} s "
                              f"({words}); the objects stay applied",
                              f"kubectl -n {namespace} describe deployment {name}; kubectl -n {namespace} get "
                              f"pods -l {r.LABEL_DEPLOYMENT}={name}; then redeploy or `specops rollback`")
        time.sleep(poll_s)


# --- registry ----------------------------------------------------------------------------------------

def _open_registry(registry):
    if registry is not None:
        return registry
    try:
        from specops.registry import open_registry  # type: ignore[attr-defined]
    except ImportError:
        return None
    return open_registry()


def _ref(ref) -> str | None:
    if ref is None:
        return None
    return ref.ref or (f"{ref.model}@{ref.revision}" if ref.revision else ref.model)


def _method(spec: DeploymentSpec) -> str | None:
    from specops.speculation import canonical

    method = spec.speculative.method.lower()
    return None if method == "none" else canonical(method)


def _record_deploy(reg, spec: DeploymentSpec, dep: dict, endpoint: str, canary_of: str | None) -> None:
    container = dep["spec"]["template"]["spec"]["containers"][0]
    meta = dep["metadata"]
    reg.upsert_deployment(
        spec.name, platform="kubernetes", status="running", actor="specops", target_ref=_ref(spec.target),
        draft_ref=_ref(spec.draft), method=_method(spec),
        num_speculative_tokens=spec.speculative.num_speculative_tokens, vllm_version=spec.engine.vllm_version,
        endpoint=endpoint, served_model_name=meta["annotations"][r.ANN_SERVED_NAME],
        engine_config=spec.model_dump(mode="json", exclude={"local"}),
        argv_redacted=redact_argv([*container["command"], *container["args"]]),
        labels={**meta["labels"], "namespace": meta["namespace"], **({"canary_of": canary_of} if canary_of else {})})
    reg.record_event("deploy", spec.name,
                     f"deployed {spec.name} to Kubernetes namespace {meta['namespace']}"
                     + (f" as a canary of {canary_of}" if canary_of else ""),
                     actor="specops", reason="canary" if canary_of else "deploy",
                     data={"namespace": meta["namespace"], "role": meta["labels"][r.LABEL_ROLE],
                           "replicas": dep["spec"]["replicas"], "canary_of": canary_of})


# --- deploy ------------------------------------------------------------------------------------------

def endpoint_for(app: str, namespace: str, port: int) -> str:
    return f"http://{app}.{namespace}.svc.cluster.local:{port}/v1"


def deploy_kubernetes(spec: DeploymentSpec, *, dry_run: bool = False, canary_of: str | None = None,
                      replicas: int | None = None, out_dir: str | Path | None = None, api_client=None,
                      timeout_s: float = 600, progress: Progress | None = None, thresholds=None,
                      monitoring: bool = True, registry=None, poll_s: float = 1.0, force_conflicts: bool = False,
                      server_dry_run: bool = False) -> KubeDeployResult:
    """Render, validate, preflight, apply, wait, record (see the module docstring).

    ``dry_run``: render and write the manifests only. ``server_dry_run``: also preflight and send
    every object to the API server with ``dryRun=All`` (its admission, defaulting and schema checks
    run; nothing is stored, nothing written locally). ``force_conflicts``: take over fields another
    field manager owns instead of stopping with ``ConflictError``."""
    from specops.k8s.manifests import render_manifests, write_manifests
    from specops.k8s.validate import validate_objects

    say = progress or _quiet
    objs = render_manifests(spec, canary_of=canary_of, replicas=replicas, thresholds=thresholds,
                            monitoring=monitoring)
    ns = spec.kubernetes.namespace
    app = canary_of or spec.name
    result = KubeDeployResult(name=spec.name, namespace=ns, role="canary" if canary_of else "stable",
                              canary_of=canary_of, dry_run=dry_run, objects=objs,
                              validated_against=validate_objects(objs),
                              endpoint=endpoint_for(app, ns, spec.serve.port))
    say(f"rendered and validated {len(objs)} objects")
    if dry_run:
        result.paths = write_manifests(objs, out_dir or default_out_dir())
        return result
    cluster = Cluster(api_client)
    dep_obj = next(o for o in objs if o["kind"] == "Deployment")
    if canary_of:
        _check_stable(cluster, canary_of, ns, dep_obj)
        if replicas is None and spec.canary is not None:  # the share of live traffic the spec asks for
            stable_n = (cluster.get("apps/v1", "Deployment", canary_of, ns) or {}).get("spec", {}).get("replicas", 1)
            n = spec.canary.replicas_next_to(stable_n)
            objs = render_manifests(spec, canary_of=canary_of, replicas=n, thresholds=thresholds, monitoring=monitoring)
            result.objects, dep_obj = objs, next(o for o in objs if o["kind"] == "Deployment")
            result.notes.append(f"canary replicas {n} next to {stable_n} stable: {n / (n + stable_n):.0%} of the "
                                f"Service's traffic (canary.share {spec.canary.share:g})")
    gpus = int(next(iter(dep_obj["spec"]["template"]["spec"]["containers"][0].get("resources", {})
                         .get("limits", {"": "0"}).values())))
    secrets = [s for s in (spec.kubernetes.hf_token_secret,
                           spec.serve.api_key.secret if spec.serve.api_key else None) if s]
    result.notes += preflight(cluster, objs, namespace=ns, gpu_resource=spec.kubernetes.gpu_resource, gpus=gpus,
                              secrets=secrets, progress=say)
    if server_dry_run:
        result.dry_run = result.server_dry_run = True
        for obj in objs:
            _, how = cluster.apply(obj, force=force_conflicts, dry_run=True)
            result.applied.append(f"{obj['kind']}/{obj['metadata']['name']} {how} (server dry run)")
        return result
    result.paths = write_manifests(objs, out_dir or default_out_dir())
    for obj in objs:
        _, how = cluster.apply(obj, force=force_conflicts)
        result.applied.append(f"{obj['kind']}/{obj['metadata']['name']} {how}")
        say(f"applied {obj['kind']}/{obj['metadata']['name']} ({how})")
    save_spec(spec)
    result.rollout = wait_rollout(cluster, spec.name, ns, timeout_s=timeout_s, progress=say, poll_s=poll_s)
    reg = _open_registry(registry)
    if reg is not None:
        _record_deploy(reg, spec, dep_obj, result.endpoint, canary_of)
        result.recorded = True
    if canary_of:
        result.notes.append(f"finish with `specops promote {spec.name}` or undo with `specops rollback {spec.name}`")
    return result


def save_spec(spec: DeploymentSpec) -> Path:
    """Keep the applied spec as ``$SPECOPS_HOME/deployments/<name>/spec.yaml`` (as a local deploy
    does): the monitor's fallback re-renders it."""
    from specops.engines.layout import DeploymentFolder
    from specops.engines.spec import dump_spec

    path = DeploymentFolder.of(spec.name).spec
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_spec(spec))
    return path


def _check_stable(cluster: Cluster, stable: str, ns: str, canary_dep: dict) -> None:
    dep = cluster.get("apps/v1", "Deployment", stable, ns)
    if dep is None or not is_managed(dep):
        raise InputError(f'no specops-managed stable Deployment "{stable}" in namespace {ns} to canary against',
                         "deploy the stable first (`specops deploy STABLE.yaml --platform kubernetes`) or fix "
                         "--canary-of")
    role = (dep["metadata"].get("labels") or {}).get(r.LABEL_ROLE)
    if role != "stable":
        raise InputError(f'"{stable}" is a {role}, not a stable deployment', "canary against a stable deployment")
    theirs = (dep["metadata"].get("annotations") or {}).get(r.ANN_SERVED_NAME)
    ours = canary_dep["metadata"]["annotations"][r.ANN_SERVED_NAME]
    if theirs and theirs != ours:
        raise InputError(f'the canary serves "{ours}" but the stable {stable} serves "{theirs}"; clients of the '
                         "shared Service would get 404 from one of them",
                         f"set serve.served_model_name: {theirs} in the canary spec")


# --- promote / rollback ------------------------------------------------------------------------------

def _canary(cluster: Cluster, name: str, namespace: str) -> tuple[dict, str]:
    dep = cluster.get("apps/v1", "Deployment", name, namespace)
    if dep is None or not is_managed(dep):
        raise InputError(f'no specops-managed Deployment "{name}" in namespace {namespace}',
                         "give the canary's name (see `specops deployment list`) and --namespace")
    meta = dep["metadata"]
    stable = (meta.get("annotations") or {}).get(r.ANN_CANARY_OF)
    if (meta.get("labels") or {}).get(r.LABEL_ROLE) != "canary" or not stable:
        raise InputError(f'"{name}" is a stable deployment, not a canary',
                         "promote or roll back a canary (deployed with --canary-of)")
    return dep, stable


def _namespace(name: str, namespace: str | None, reg) -> str:
    if namespace:
        return namespace
    if reg is not None:
        row = reg.find_deployment(name)
        labels = (getattr(row, "labels", None) or {}) if row is not None else {}
        if labels.get("namespace"):
            return labels["namespace"]
    return "default"


def _delete_canary(cluster: Cluster, name: str, ns: str) -> list[str]:
    gone = []
    if cluster.delete("apps/v1", "Deployment", name, ns):
        gone.append(f"Deployment/{name}")
    if cluster.delete("v1", "PersistentVolumeClaim", f"{name}-model-cache", ns):
        gone.append(f"PersistentVolumeClaim/{name}-model-cache")
    return gone


def promote(name: str, *, api_client=None, namespace: str | None = None, timeout_s: float = 600,
            progress: Progress | None = None, registry=None, poll_s: float = 1.0) -> list[str]:
    """Make canary ``name``'s pod spec the stable's, wait for the rollout, delete the canary."""
    say = progress or _quiet
    reg = _open_registry(registry)
    ns = _namespace(name, namespace, reg)
    cluster = Cluster(api_client)
    canary, stable = _canary(cluster, name, ns)
    current = cluster.get("apps/v1", "Deployment", stable, ns)
    if current is None or not is_managed(current):
        raise InputError(f'the stable Deployment "{stable}" of canary {name} is gone from namespace {ns}',
                         f"roll the canary back (`specops rollback {name}`) or deploy the stable again")
    pod = canary["spec"]["template"]["spec"]
    for vol in pod.get("volumes") or []:
        if vol.get("name") == "model-cache" and vol.get("persistentVolumeClaim"):
            vol["persistentVolumeClaim"]["claimName"] = f"{stable}-model-cache"
    ann = dict(current["metadata"].get("annotations") or {})
    for key in (r.ANN_TARGET, r.ANN_DRAFT, r.ANN_SERVED_NAME):
        if key in (canary["metadata"].get("annotations") or {}):
            ann[key] = canary["metadata"]["annotations"][key]
    ann.pop(r.ANN_CANARY_OF, None)
    ann["specops.io/promoted-from"] = name
    labels = current["metadata"]["labels"]
    new = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": stable, "namespace": ns, "labels": labels, "annotations": ann},
           "spec": {"replicas": current["spec"].get("replicas", 1),
                    "selector": current["spec"]["selector"],
                    "strategy": current["spec"].get("strategy", {"type": "Recreate"}),
                    "template": {"metadata": {"labels": current["spec"]["template"]["metadata"]["labels"],
                                              "annotations": canary["spec"]["template"]["metadata"].get(
                                                  "annotations", {})},
                                 "spec": pod}}}
    from specops.k8s.validate import validate_object

    validate_object(new)
    try:
        cluster.apply(new)
    except ConflictError as exc:
        raise ConflictError(f"promoting {name}: {exc.message}",
                            f"undo the other change to {stable}, or deploy the stable's spec again with "
                            f"`specops deploy STABLE.yaml --platform kubernetes --force-conflicts`, then promote",
                            managers=exc.managers, fields=exc.fields) from None
    say(f"applied Deployment/{stable} with the pod spec of {name}")
    rollout = wait_rollout(cluster, stable, ns, timeout_s=timeout_s, progress=say, poll_s=poll_s)
    gone = _delete_canary(cluster, name, ns)
    say(f"deleted {', '.join(gone)}")
    if reg is not None:
        _record_promote(reg, name, stable, ns)
    return [f"promoted {name} into {stable} (namespace {ns}): {rollout}", f"deleted {', '.join(gone)}",
            f"update {stable}'s spec in git to the canary's configuration so the next deploy keeps it",
            "recorded in the registry" if reg is not None else "not recorded (no registry available)"]


def _record_promote(reg, canary: str, stable: str, ns: str) -> None:
    row = reg.find_deployment(canary)
    if row is not None:
        fields = ("target_ref", "draft_ref", "method", "num_speculative_tokens", "vllm_version",
                  "engine_config", "argv_redacted")
        values = {f: getattr(row, f, None) for f in fields}
        reg.upsert_deployment(stable, platform="kubernetes", status="running", actor="specops", **values)
        reg.set_deployment_status(canary, "stopped", actor="specops", reason=f"promoted into {stable}")
    reg.record_event("promote", stable, f"promoted canary {canary} into {stable} in namespace {ns}",
                     actor="specops", reason="canary promoted", data={"canary": canary, "namespace": ns})


def rollback(name: str, *, api_client=None, namespace: str | None = None, progress: Progress | None = None,
             registry=None) -> list[str]:
    """Delete canary ``name`` (its Deployment and cache claim); the stable keeps serving."""
    say = progress or _quiet
    reg = _open_registry(registry)
    ns = _namespace(name, namespace, reg)
    cluster = Cluster(api_client)
    _, stable = _canary(cluster, name, ns)
    gone = _delete_canary(cluster, name, ns)
    say(f"deleted {', '.join(gone)}")
    if reg is not None:
        if reg.find_deployment(name) is not None:
            reg.set_deployment_status(name, "stopped", actor="specops", reason="canary rolled back")
        reg.record_event("rollback", name, f"rolled back canary {name} of {stable} in namespace {ns}",
                         actor="specops", reason="canary rolled back", data={"stable": stable, "namespace": ns})
    return [f"rolled back canary {name} (namespace {ns}); {stable} serves all traffic", f"deleted {', '.join(gone)}",
            "recorded in the registry" if reg is not None else "not recorded (no registry available)"]
