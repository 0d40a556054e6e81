"""Autoscaling on the capacity metric (issue 44; docs/capacity.md): a HorizontalPodAutoscaler (External metric)
or a KEDA ScaledObject (Prometheus trigger) for one DeploymentSpec with ``kubernetes.autoscaling``.

The metric is the monitor's ``specops_load_ratio{specops_deployment}``: the deployment's observed requests/s
over one replica's capacity within its SLO at the live acceptance, i.e. the replicas the load needs at 100%.
Both autoscalers divide it by the target a replica should carry (``target_load_ratio``, 0.8 = 20% headroom):
the HPA's External metric with an ``AverageValue`` target and KEDA's Prometheus trigger (its default
``AverageValue`` metric type) both compute desired replicas = ceil(metric / target). When the draft's
acceptance drops, a replica's capacity drops, the ratio rises and replicas are added before the SLO breaks.

The External metric reaches the HPA through an external-metrics adapter (prometheus-adapter's
``externalRules`` serving ``specops_load_ratio`` from the Prometheus scraping the monitor); KEDA queries
Prometheus itself.
"""

from __future__ import annotations

from specops.engines.spec import DeploymentSpec

LOAD_METRIC = "specops_load_ratio"
CAPACITY_METRIC = "specops_capacity_requests_per_second"
DEPLOYMENT_LABEL = "specops_deployment"


def _quantity(x: float) -> str:
    """A Kubernetes quantity for ``x`` (milli-units: 0.8 -> "800m")."""
    milli = round(x * 1000)
    return f"{milli // 1000}" if milli % 1000 == 0 else f"{milli}m"


def load_query(name: str) -> str:
    """The PromQL KEDA evaluates: the deployment's load ratio (max over monitor replicas, which export the same)."""
    return f'max({LOAD_METRIC}{{{DEPLOYMENT_LABEL}="{name}"}})'


def horizontal_pod_autoscaler(spec: DeploymentSpec, labels: dict[str, str]) -> dict:
    a = spec.kubernetes.autoscaling
    assert a is not None
    return {
        "apiVersion": a.hpa_api_version, "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": spec.name, "namespace": spec.kubernetes.namespace, "labels": dict(labels)},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": spec.name},
            "minReplicas": a.min_replicas, "maxReplicas": a.max_replicas,
            "metrics": [{"type": "External", "external": {
                "metric": {"name": LOAD_METRIC, "selector": {"matchLabels": {DEPLOYMENT_LABEL: spec.name}}},
                "target": {"type": "AverageValue", "averageValue": _quantity(a.target_load_ratio)}}}],
            # a replica takes minutes to load its weights: scale up at once, down slowly
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 600,
                                       "policies": [{"type": "Pods", "value": 1, "periodSeconds": 300}]}},
        },
    }


def scaled_object(spec: DeploymentSpec, labels: dict[str, str]) -> dict:
    a = spec.kubernetes.autoscaling
    assert a is not None
    return {
        "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "metadata": {"name": spec.name, "namespace": spec.kubernetes.namespace, "labels": dict(labels)},
        "spec": {
            "scaleTargetRef": {"name": spec.name},
            "minReplicaCount": a.min_replicas, "maxReplicaCount": a.max_replicas,
            "cooldownPeriod": 600,
            "triggers": [{"type": "prometheus", "metadata": {
                "serverAddress": a.prometheus_url, "query": load_query(spec.name),
                "threshold": f"{a.target_load_ratio:g}"}}],
        },
    }


def autoscaler_objects(spec: DeploymentSpec, labels: dict[str, str]) -> list[dict]:
    """The autoscaler ``spec.kubernetes.autoscaling`` asks for (none without the block)."""
    a = spec.kubernetes.autoscaling
    if a is None:
        return []
    return [scaled_object(spec, labels) if a.keda else horizontal_pod_autoscaler(spec, labels)]
