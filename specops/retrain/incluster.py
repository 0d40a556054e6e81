"""Manifests that run ``specops monitor`` inside the cluster it watches (manifests/monitor/).

- ``Deployment`` running ``specops monitor`` (2 replicas; a coordination.k8s.io Lease elects the one
  that acts, so two replicas never act twice) and a ``CronJob`` running ``specops monitor --once``
  (for clusters that prefer cron; ``concurrencyPolicy: Forbid``, same lease);
- a ``ServiceAccount`` with a namespaced ``Role`` granting only :data:`NEEDED` (below) and its
  ``RoleBinding``;
- a ``ConfigMap`` with the non-secret settings (registry URL, lease name, policy); the Prometheus URL
  and bearer token come from an existing Secret by reference (never rendered: create it with
  ``kubectl create secret generic specops-prometheus --from-literal=url=... --from-literal=token=...``);
  a registry password, if any, from an optional Secret key as ``PGPASSWORD``.

Settings reach the CLI as ``SPECOPS_*`` environment variables (flag > env > config file), so the
manifests pass no flags that a CLI version might lack. Validated against the Kubernetes 1.33 schemas.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import Field

from specops.models import Strict

# (apiGroup, resource) -> verbs, and why. The RBAC test asserts the Role grants exactly these.
NEEDED: dict[tuple[str, str], dict[str, str]] = {
    ("apps", "deployments"): {
        "get": "read the live Deployment before re-applying it (replica count, args, ownership)",
        "patch": "disable speculation / retune γ: server-side apply of the re-rendered Deployment "
                 "(specops.k8s.reapply)",
    },
    ("coordination.k8s.io", "leases"): {
        "create": "create the leader lease the first time",
        "get": "read the leader lease (only the named lease)",
        "update": "renew or take over the leader lease (only the named lease)",
    },
}
"""Only what the monitor calls (checked by SubjectAccessReview on a real apiserver in
tests/k8s/test_real_lease_rbac.py). Not granted, because nothing in the monitor calls it: listing
Deployments (engines are named in the registry), Jobs and ConfigMaps (a retraining job started by the
monitor runs as a worker process in its pod; ``specops.retrain.job`` only renders Jobs for GitOps),
Secrets (referenced by name, never read)."""
LEASE_VERBS_BY_NAME = ("get", "update")  # restricted to resourceNames; create cannot be


class MonitorManifestOptions(Strict):
    """Where and how the in-cluster monitor runs."""


    namespace: str = Field(default="specops", description="Namespace of the monitor and the engines it watches.")
    name: str = Field(default="specops-monitor", description="Name of every object (and the leader Lease).")
    image: str = Field(default="ghcr.io/specops/specops:0.1.0", description="Image with specops installed.")
    replicas: int = Field(default=2, ge=1, le=5, description="Monitor replicas (one leads).")
    schedule: str = Field(default="*/5 * * * *", description="CronJob schedule for `monitor --once`.")
    registry_url: str = Field(default="postgresql+psycopg://specops@specops-postgres:5432/specops",
                              description="Registry SQLAlchemy URL, without password.")
    prometheus_secret: str = Field(default="specops-prometheus", description="Secret with keys url and token.")
    registry_secret: str = Field(default="specops-registry", description="Optional Secret with key password.")
    policy: str = Field(default="default", description="Policy playbook name.")
    metrics_port: int = Field(default=9108, ge=1, le=65535, description="Port of the monitor's own /metrics.")


def _labels(o: MonitorManifestOptions, component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "specops-monitor", "app.kubernetes.io/instance": o.name,
            "app.kubernetes.io/component": component, "app.kubernetes.io/managed-by": "specops"}


def role(o: MonitorManifestOptions) -> dict:
    rules = []
    for (group, resource), verbs in NEEDED.items():
        if resource == "leases":
            rules.append({"apiGroups": [group], "resources": [resource], "verbs": ["create"]})
            rules.append({"apiGroups": [group], "resources": [resource], "resourceNames": [o.name],
                          "verbs": list(LEASE_VERBS_BY_NAME)})
        else:
            rules.append({"apiGroups": [group], "resources": [resource], "verbs": sorted(verbs)})
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": o.name, "namespace": o.namespace, "labels": _labels(o, "rbac")}, "rules": rules}


def _pod_spec(o: MonitorManifestOptions, args: list[str], restart: str) -> dict:
    sec = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": True}
    secret = lambda name, key, optional=False: {"valueFrom": {"secretKeyRef": {  # noqa: E731
        "name": name, "key": key, **({"optional": True} if optional else {})}}}
    env = [
        {"name": "SPECOPS_PROMETHEUS_URL", **secret(o.prometheus_secret, "url")},
        {"name": "SPECOPS_PROMETHEUS_TOKEN", **secret(o.prometheus_secret, "token")},
        {"name": "PGPASSWORD", **secret(o.registry_secret, "password", optional=True)},
        {"name": "SPECOPS_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "SPECOPS_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "SPECOPS_HOME", "value": "/var/lib/specops"},
    ]
    container = {"name": "monitor", "image": o.image, "args": args, "env": env,
                 "envFrom": [{"configMapRef": {"name": o.name}}],
                 "ports": [{"name": "metrics", "containerPort": o.metrics_port, "protocol": "TCP"}],
                 "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
                 "securityContext": sec, "volumeMounts": [{"name": "home", "mountPath": "/var/lib/specops"}]}
    if restart == "Always":
        container["readinessProbe"] = {"httpGet": {"path": "/metrics", "port": "metrics"}, "periodSeconds": 15}
    else:
        del container["ports"]
    return {"serviceAccountName": o.name, "restartPolicy": restart, "containers": [container],
            "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "volumes": [{"name": "home", "emptyDir": {}}]}


def render_monitor_manifests(opts: MonitorManifestOptions | None = None) -> list[dict]:
    """[ServiceAccount, Role, RoleBinding, ConfigMap, Deployment, CronJob], validated."""
    from specops.k8s.validate import validate_objects

    o = opts or MonitorManifestOptions()
    meta = lambda component: {"name": o.name, "namespace": o.namespace, "labels": _labels(o, component)}  # noqa: E731
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta("rbac")}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta("rbac"),
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": o.name},
               "subjects": [{"kind": "ServiceAccount", "name": o.name, "namespace": o.namespace}]}
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("config"),
          "data": {"SPECOPS_DB": o.registry_url, "SPECOPS_LEADER_LEASE": o.name, "SPECOPS_POLICY": o.policy,
                   "SPECOPS_METRICS_PORT": str(o.metrics_port)}}
    sel = {"app.kubernetes.io/instance": o.name, "app.kubernetes.io/component": "monitor"}
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta("monitor"),
           "spec": {"replicas": o.replicas, "selector": {"matchLabels": sel},
                    "template": {"metadata": {"labels": _labels(o, "monitor")},
                                 "spec": _pod_spec(o, ["monitor"], "Always")}}}
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {**meta("monitor-once"), "name": f"{o.name}-once"},
            "spec": {"schedule": o.schedule, "concurrencyPolicy": "Forbid", "suspend": True,
                     "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 3,
                     "jobTemplate": {"spec": {"backoffLimit": 0, "activeDeadlineSeconds": 600, "template": {
                         "metadata": {"labels": _labels(o, "monitor-once")},
                         "spec": _pod_spec(o, ["monitor", "--once"], "Never")}}}}}
    objs = [sa, role(o), binding, cm, dep, cron]
    validate_objects(objs)
    return objs


FILES = {"rbac.yaml": ("ServiceAccount", "Role", "RoleBinding"), "config.yaml": ("ConfigMap",),
         "deployment.yaml": ("Deployment",), "cronjob.yaml": ("CronJob",)}
HEADER = "# Rendered by specops.retrain.incluster.write_monitor_manifests; do not edit by hand.\n"


def render_files(opts: MonitorManifestOptions | None = None) -> dict[str, str]:
    objs = render_monitor_manifests(opts)
    return {fname: HEADER + yaml.safe_dump_all([o for o in objs if o["kind"] in kinds], sort_keys=False)
            for fname, kinds in FILES.items()}


def write_monitor_manifests(folder: str | Path, opts: MonitorManifestOptions | None = None) -> list[Path]:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, text in render_files(opts).items():
        (folder / name).write_text(text)
        out.append(folder / name)
    return out


if __name__ == "__main__":
    import sys

    for p in write_monitor_manifests(sys.argv[1] if len(sys.argv) > 1 else "manifests/monitor"):
        print(p)
