"""Render the complete set of Kubernetes objects for one DeploymentSpec.

Objects (plain dicts, ready for YAML or server-side apply):

- ``PersistentVolumeClaim`` ``<name>-model-cache``: the Hugging Face cache (HF_HOME) and vLLM's
  compile cache. ReadWriteOnce with a ``Recreate`` strategy for one replica (the claim is released
  before the new pod starts); ReadWriteMany with a surge-one rolling update for more.
- ``Deployment`` ``<name>``: ``vllm serve MODEL ...`` from ``vllm/vllm-openai:v<version>``, GPU
  limits, probes on ``/health``, secrets only by ``secretKeyRef``, optional prefetch init containers
  (``hf download`` pinned to the revisions), ``/dev/shm`` in memory, non-root.
- ``Service`` ``<app>`` (stable only): selects ``app.kubernetes.io/name=<app>``, so a canary that
  carries the stable's app label receives traffic in proportion to its replicas.
- ``PodMonitor`` and ``PrometheusRule`` (stable only; a canary is scraped by its stable's monitor and
  evaluated by its stable's rules, told apart by ``specops_deployment``).
- ``LLMInferenceService`` (optional, ``kubernetes.kserve``): see :mod:`specops.k8s.kserve`.

Secrets never appear: the API key and HF token are referenced by Secret name and key only.
"""

from __future__ import annotations

import hashlib
import json
import re

from specops.capabilities import parse_version
from specops.engines.spec import DeploymentSpec
from specops.errors import InputError
from specops.k8s.alerts import AlertThresholds, prometheus_rule

MANAGER = "specops"
LABEL_NAME = "app.kubernetes.io/name"
LABEL_INSTANCE = "app.kubernetes.io/instance"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_DEPLOYMENT = "specops.io/deployment"
LABEL_ROLE = "specops.io/role"
ANN_CANARY_OF = "specops.io/canary-of"
ANN_SERVED_NAME = "specops.io/served-model-name"
ANN_CONFIG_HASH = "specops.io/config-hash"
ANN_TARGET = "specops.io/target"
ANN_DRAFT = "specops.io/draft"

HTTP_PORT_NAME = "http"
CACHE_MOUNT = "/models"
SHM_SIZE = "16Gi"
# vLLM 0.33 images ship huggingface_hub >= 1.0, whose CLI is `hf`; older images only `huggingface-cli`.
HF_CLI_FROM = (0, 11, 0)

_EXTENDED_RESOURCE = re.compile(
    r"^(?=.{1,253}/)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def check_gpu_resource(name: str) -> None:
    """An extended resource name is ``<domain>/<name>`` outside ``kubernetes.io`` (e.g. nvidia.com/gpu)."""
    domain = name.split("/", 1)[0]
    if not _EXTENDED_RESOURCE.match(name) or domain.endswith("kubernetes.io"):
        raise InputError(f'kubernetes.gpu_resource "{name}" is not an extended resource name',
                         "use <vendor-domain>/<name> as the device plugin advertises it, e.g. nvidia.com/gpu "
                         "or amd.com/gpu (see `kubectl describe node`)")


def labels(name: str, app: str, role: str) -> dict[str, str]:
    return {LABEL_NAME: app, LABEL_INSTANCE: name, LABEL_MANAGED_BY: MANAGER,
            LABEL_DEPLOYMENT: name, LABEL_ROLE: role}


def _meta(name: str, ns: str, lbl: dict[str, str], annotations: dict[str, str] | None = None) -> dict:
    meta: dict = {"name": name, "namespace": ns, "labels": dict(lbl)}
    if annotations:
        meta["annotations"] = annotations
    return meta


def _is_hub_id(model: str) -> bool:
    return not model.startswith(("/", "./", "../", "~"))


def _require_revisions(spec: DeploymentSpec) -> None:
    for role, ref in (("target", spec.target), ("draft", spec.draft)):
        if ref is not None and _is_hub_id(ref.model) and not ref.revision:
            raise InputError(f"{role}.revision is not set for the hub model {ref.model}; a Kubernetes deployment "
                             "pins every hub model to a commit so that all replicas serve the same weights",
                             f"set {role}.revision to the commit hash (`hf api` or the model page's "
                             "'Files and versions' tab shows it)")


def container_args(spec: DeploymentSpec, served_name: str) -> list[str]:
    """``MODEL --flag ...`` for ``vllm serve`` (the program is the container's command)."""
    from specops.engines.argv import render_args

    cfg = spec.launch_config(host="0.0.0.0")
    cfg = cfg.model_copy(update={
        "served_model_name": served_name,
        "revision": spec.target.revision if _is_hub_id(spec.target.model) else None,
        "draft_revision": (spec.draft.revision if spec.draft is not None and _is_hub_id(spec.draft.model)
                           else None),
    })
    return [cfg.model, *render_args(cfg)]


def _env(spec: DeploymentSpec) -> list[dict]:
    env: list[dict] = [
        {"name": "HF_HOME", "value": f"{CACHE_MOUNT}/hf"},
        {"name": "VLLM_CACHE_ROOT", "value": f"{CACHE_MOUNT}/vllm"},
        {"name": "XDG_CACHE_HOME", "value": f"{CACHE_MOUNT}/cache"},
        {"name": "HOME", "value": "/tmp"},
        {"name": "VLLM_NO_USAGE_STATS", "value": "1"},
        {"name": "DO_NOT_TRACK", "value": "1"},
    ]
    env += _hf_token_env(spec)
    key = spec.serve.api_key
    if key is not None:
        if not key.secret:
            raise InputError("serve.api_key names an environment variable or file; on Kubernetes the key must "
                             "come from a Secret (a value is never copied into manifests)",
                             "create a Secret and set `serve.api_key: {secret: NAME, key: KEY}`")
        env.append({"name": "VLLM_API_KEY",
                    "valueFrom": {"secretKeyRef": {"name": key.secret, "key": key.key}}})
    return env


def _hf_token_env(spec: DeploymentSpec) -> list[dict]:
    secret = spec.kubernetes.hf_token_secret
    if not secret:
        return []
    ref = {"secretKeyRef": {"name": secret, "key": "token"}}
    return [{"name": "HF_TOKEN", "valueFrom": ref}]


def _security() -> tuple[dict, dict]:
    pod = {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000,
           "seccompProfile": {"type": "RuntimeDefault"}}
    container = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    return pod, container


def _probes(prefetch: bool) -> dict:
    http = {"path": "/health", "port": HTTP_PORT_NAME}
    # Loading a 70B checkpoint from the cache and compiling takes minutes; without a prefetch init
    # container the download also happens inside this window.
    startup_s = 1800 if prefetch else 3600
    return {
        "startupProbe": {"httpGet": http, "periodSeconds": 10, "timeoutSeconds": 5,
                         "failureThreshold": startup_s // 10},
        "readinessProbe": {"httpGet": http, "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 3},
        "livenessProbe": {"httpGet": http, "periodSeconds": 20, "timeoutSeconds": 10, "failureThreshold": 3},
    }


def _prefetch_containers(spec: DeploymentSpec, image: str, env: list[dict], sec: dict) -> list[dict]:
    if not spec.kubernetes.prefetch:
        return []
    cli = ["hf", "download"] if parse_version(spec.engine.vllm_version) >= HF_CLI_FROM else [
        "huggingface-cli", "download"]
    hf_env = [e for e in env if e["name"] in ("HF_HOME", "HOME", "XDG_CACHE_HOME", "HF_TOKEN")]
    out = []
    for role, ref in (("target", spec.target), ("draft", spec.draft)):
        if ref is None or not _is_hub_id(ref.model):
            continue
        out.append({
            "name": f"prefetch-{role}", "image": image, "command": [*cli, ref.model, "--revision", ref.revision],
            "env": hf_env, "securityContext": sec,
            "volumeMounts": [{"name": "model-cache", "mountPath": CACHE_MOUNT}],
        })
    return out


def config_hash(args: list[str], image: str) -> str:
    return hashlib.sha256(json.dumps([image, args]).encode()).hexdigest()[:16]


def deployment(spec: DeploymentSpec, *, name: str, app: str, role: str, replicas: int,
               served_name: str, canary_of: str | None, rwx: bool) -> dict:
    k = spec.kubernetes
    check_gpu_resource(k.gpu_resource)
    image = k.image or f"vllm/vllm-openai:v{spec.engine.vllm_version.lstrip('v')}"
    args = container_args(spec, served_name)
    env = _env(spec)
    pod_sec, sec = _security()
    gpus = k.gpus_per_replica if k.gpus_per_replica is not None else spec.engine.tensor_parallel_size
    lbl = labels(name, app, role)
    ann = {ANN_SERVED_NAME: served_name, ANN_TARGET: _ref_text(spec.target)}
    if spec.draft is not None:
        ann[ANN_DRAFT] = _ref_text(spec.draft)
    if canary_of:
        ann[ANN_CANARY_OF] = canary_of
    main = {
        "name": "vllm", "image": image, "command": ["vllm", "serve"], "args": args,
        "ports": [{"name": HTTP_PORT_NAME, "containerPort": spec.serve.port, "protocol": "TCP"}],
        "env": env, **_probes(k.prefetch), "securityContext": sec,
        "volumeMounts": [{"name": "model-cache", "mountPath": CACHE_MOUNT},
                         {"name": "dshm", "mountPath": "/dev/shm"}],
    }
    if gpus:
        main["resources"] = {"limits": {k.gpu_resource: str(gpus)}}
    pod: dict = {
        "securityContext": pod_sec,
        "terminationGracePeriodSeconds": 60,
        "containers": [main],
        "volumes": [
            {"name": "model-cache", "persistentVolumeClaim": {"claimName": f"{name}-model-cache"}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_SIZE}},
        ],
    }
    init = _prefetch_containers(spec, image, env, sec)
    if init:
        pod["initContainers"] = init
    if k.node_selector:
        pod["nodeSelector"] = dict(k.node_selector)
    if k.tolerations:
        pod["tolerations"] = [dict(t) for t in k.tolerations]
    strategy = ({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}} if rwx
                else {"type": "Recreate"})
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": _meta(name, k.namespace, lbl, ann),
        "spec": {
            "replicas": replicas,
            "revisionHistoryLimit": 5,
            "strategy": strategy,
            "selector": {"matchLabels": {LABEL_NAME: app, LABEL_DEPLOYMENT: name}},
            "template": {"metadata": {"labels": lbl, "annotations": {ANN_CONFIG_HASH: config_hash(args, image)}},
                         "spec": pod},
        },
    }


def _ref_text(ref) -> str:
    text = ref.ref or ref.model
    return f"{text}@{ref.revision}" if ref.revision and not ref.ref else text


def pvc(spec: DeploymentSpec, *, name: str, app: str, role: str, rwx: bool) -> dict:
    k = spec.kubernetes
    body: dict = {"accessModes": ["ReadWriteMany" if rwx else "ReadWriteOnce"],
                  "resources": {"requests": {"storage": k.cache_size}}}
    if k.storage_class:
        body["storageClassName"] = k.storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": _meta(f"{name}-model-cache", k.namespace, labels(name, app, role)), "spec": body}


def service(spec: DeploymentSpec, *, app: str) -> dict:
    k = spec.kubernetes
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": _meta(app, k.namespace, labels(app, app, "stable")),
            "spec": {"type": k.service_type,
                     "selector": {LABEL_NAME: app, LABEL_MANAGED_BY: MANAGER},
                     "ports": [{"name": HTTP_PORT_NAME, "port": spec.serve.port, "targetPort": HTTP_PORT_NAME,
                                "protocol": "TCP"}]}}


def pod_monitor(spec: DeploymentSpec, *, app: str) -> dict:
    k = spec.kubernetes

    def relabel(label: str, target: str) -> dict:
        source = "__meta_kubernetes_pod_label_" + re.sub(r"[^a-zA-Z0-9_]", "_", label)
        return {"sourceLabels": [source], "targetLabel": target, "action": "replace"}

    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
            "metadata": _meta(app, k.namespace, labels(app, app, "stable")),
            "spec": {"selector": {"matchLabels": {LABEL_NAME: app, LABEL_MANAGED_BY: MANAGER}},
                     "podMetricsEndpoints": [{
                         "port": HTTP_PORT_NAME, "path": "/metrics", "interval": "15s",
                         "relabelings": [relabel(LABEL_DEPLOYMENT, "specops_deployment"),
                                         relabel(LABEL_ROLE, "specops_role"),
                                         relabel(LABEL_NAME, "specops_app")]}]}}


def render_objects(spec: DeploymentSpec, *, canary_of: str | None = None, replicas: int | None = None,
                   thresholds: AlertThresholds | None = None, monitoring: bool = True) -> list[dict]:
    """The objects for ``spec`` (not yet validated; :func:`specops.k8s.render_manifests` validates)."""
    if canary_of is not None and canary_of == spec.name:
        raise InputError(f'a canary needs its own name; "{spec.name}" is the stable it would replace',
                         "give the canary spec another name, e.g. " + f"{spec.name}-canary")
    _require_revisions(spec)
    n = replicas if replicas is not None else spec.kubernetes.replicas
    if n < 0:
        raise InputError(f"replicas must be 0 or more (got {n})", "pass --replicas 1 or more")
    role = "canary" if canary_of else "stable"
    app = canary_of or spec.name
    served = spec.serve.served_model_name or app
    rwx = n > 1
    objs = [pvc(spec, name=spec.name, app=app, role=role, rwx=rwx),
            deployment(spec, name=spec.name, app=app, role=role, replicas=n, served_name=served,
                       canary_of=canary_of, rwx=rwx)]
    if canary_of:
        return objs
    objs.append(service(spec, app=app))
    if monitoring:
        objs.append(pod_monitor(spec, app=app))
        objs.append(prometheus_rule(app=app, namespace=spec.kubernetes.namespace,
                                    speculative=spec.speculative.method.lower() != "none",
                                    thresholds=AlertThresholds.for_spec(spec, thresholds),
                                    labels=labels(app, app, "stable")))
    if spec.kubernetes.autoscaling is not None:  # issue 44: HPA or KEDA ScaledObject on the capacity metric
        from specops.k8s.autoscale import autoscaler_objects

        objs += autoscaler_objects(spec, labels(app, app, "stable"))
    if spec.kubernetes.kserve:
        from specops.k8s.kserve import llm_inference_service

        objs.append(llm_inference_service(spec, labels=labels(app, app, "stable")))
    return objs
