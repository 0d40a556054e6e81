"""The capacity autoscalers (issue 44; specops/k8s/autoscale.py): a HorizontalPodAutoscaler on the External metric
``specops_load_ratio`` and a KEDA ScaledObject with a Prometheus trigger, rendered from a spec's
``kubernetes.autoscaling``.

Offline: the rendered objects pass specops' validation (Kubernetes 1.33 schemas; specops' KEDA schema) and target
the metric. Real (marker kube_apiserver): the v1.20.2 apiserver accepts the HPA as autoscaling/v2beta2 (what 1.20
serves; autoscaling/v2 came in 1.23, and the test checks the server does not serve it) and stores the metric
target unchanged. Faked: KEDA is not installed; its ScaledObject is applied against a minimal CRD the test
registers (spec kept as given), so that part proves only that the object is well-formed for a namespaced CRD.
"""

from __future__ import annotations

import pytest

from specops.engines.spec import AutoscalingBlock


def _with_autoscaling(spec, ns: str | None = None, **kw):
    kube = spec.kubernetes.model_copy(update={"autoscaling": AutoscalingBlock(max_replicas=4, **kw),
                                              **({"namespace": ns} if ns else {})})
    return spec.model_copy(update={"kubernetes": kube})


def _one(objs, kind):
    found = [o for o in objs if o["kind"] == kind]
    assert len(found) == 1, [o["kind"] for o in objs]
    return found[0]


def test_the_hpa_scales_the_deployment_on_the_load_ratio(spec):
    from specops.k8s import render_manifests

    objs = render_manifests(_with_autoscaling(spec, target_load_ratio=0.75))  # validated offline
    hpa = _one(objs, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": spec.name}
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "External"
    assert metric["external"]["metric"] == {"name": "specops_load_ratio",
                                            "selector": {"matchLabels": {"specops_deployment": spec.name}}}
    assert metric["external"]["target"] == {"type": "AverageValue", "averageValue": "750m"}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 4)
    assert not [o for o in objs if o["kind"] == "ScaledObject"]


def test_keda_gets_a_scaled_object_with_the_prometheus_query(spec):
    from specops.k8s import render_manifests

    objs = render_manifests(_with_autoscaling(spec, keda=True))
    so = _one(objs, "ScaledObject")
    (trigger,) = so["spec"]["triggers"]
    assert trigger["type"] == "prometheus"
    assert trigger["metadata"]["query"] == f'max(specops_load_ratio{{specops_deployment="{spec.name}"}})'
    assert trigger["metadata"]["threshold"] == "0.8"
    assert not [o for o in objs if o["kind"] == "HorizontalPodAutoscaler"]


def test_min_above_max_replicas_is_refused():
    with pytest.raises(ValueError, match="min_replicas"):
        AutoscalingBlock(min_replicas=5, max_replicas=2)


@pytest.mark.kube_apiserver
def test_the_real_apiserver_accepts_the_hpa_and_it_targets_the_metric(spec, real_cluster, real_ns):
    from kubernetes import client
    from kubernetes.dynamic import DynamicClient

    from specops.k8s import render_manifests

    api = real_cluster.api_client()
    served = {v.version for g in client.ApisApi(api).get_api_versions().groups if g.name == "autoscaling"
              for v in g.versions}
    assert "v2beta2" in served and "v2" not in served  # v1.20.2: autoscaling/v2 is 1.23+
    objs = render_manifests(_with_autoscaling(spec, ns=real_ns, hpa_api_version="autoscaling/v2beta2"))
    hpa = _one(objs, "HorizontalPodAutoscaler")
    dyn = DynamicClient(api)
    res = dyn.resources.get(api_version="autoscaling/v2beta2", kind="HorizontalPodAutoscaler")
    dyn.create(res, body=hpa, namespace=real_ns)
    stored = dyn.get(res, name=spec.name, namespace=real_ns).to_dict()
    (metric,) = stored["spec"]["metrics"]
    assert metric["external"]["metric"]["name"] == "specops_load_ratio"
    assert metric["external"]["metric"]["selector"]["matchLabels"] == {"specops_deployment": spec.name}
    assert metric["external"]["target"] == {"type": "AverageValue", "averageValue": "800m"}
    assert stored["spec"]["scaleTargetRef"]["name"] == spec.name
    bad = {**hpa, "spec": {**hpa["spec"], "maxReplicas": 0}}  # the server validates what it accepts
    bad["metadata"] = {**hpa["metadata"], "name": "bad"}
    from kubernetes.client.rest import ApiException

    with pytest.raises(ApiException) as info:
        dyn.create(res, body=bad, namespace=real_ns)
    assert info.value.status == 422


@pytest.mark.kube_apiserver
def test_a_scaled_object_applies_against_a_keda_shaped_crd(spec, real_cluster, real_ns):
    import time

    from kubernetes import client
    from kubernetes.dynamic import DynamicClient

    from specops.k8s import render_manifests

    api = real_cluster.api_client()
    ext = client.ApiextensionsV1Api(api)
    name = "scaledobjects.keda.sh"
    try:
        ext.create_custom_resource_definition({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name},
            "spec": {"group": "keda.sh", "scope": "Namespaced",
                     "names": {"kind": "ScaledObject", "plural": "scaledobjects", "singular": "scaledobject",
                               "listKind": "ScaledObjectList"},
                     "versions": [{"name": "v1alpha1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "properties": {"spec": {
                             "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]}})
    except client.rest.ApiException as exc:
        if exc.status != 409:  # another test of the session made it
            raise
    deadline = time.monotonic() + 60
    while not any(c.type == "Established" and c.status == "True"
                  for c in ext.read_custom_resource_definition(name).status.conditions or []):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    so = _one(render_manifests(_with_autoscaling(spec, ns=real_ns, keda=True)), "ScaledObject")
    dyn = DynamicClient(api)
    res = dyn.resources.get(api_version="keda.sh/v1alpha1", kind="ScaledObject")
    dyn.create(res, body=so, namespace=real_ns)
    stored = dyn.get(res, name=spec.name, namespace=real_ns).to_dict()
    assert stored["spec"]["triggers"][0]["metadata"]["query"].startswith("max(specops_load_ratio{")


@pytest.mark.kube_apiserver
def test_an_hpa_version_the_cluster_lacks_is_refused_before_any_write_and_the_fix_works(spec, real_cluster, real_ns):
    """Preflight against the real v1.20.2 apiserver: autoscaling/v2 is refused with a fix naming
    hpa_api_version; the spec with that fix passes the same check."""
    from specops.errors import InputError
    from specops.k8s import render_manifests
    from specops.k8s.cluster import Cluster

    cluster = Cluster()
    hpa = _one(render_manifests(_with_autoscaling(spec, ns=real_ns)), "HorizontalPodAutoscaler")
    with pytest.raises(InputError) as info:
        cluster._res(hpa["apiVersion"], hpa["kind"])
    assert "hpa_api_version: autoscaling/v2beta2" in info.value.fix
    fixed = _one(render_manifests(_with_autoscaling(spec, ns=real_ns, hpa_api_version="autoscaling/v2beta2")),
                 "HorizontalPodAutoscaler")
    assert cluster._res(fixed["apiVersion"], fixed["kind"]) is not None
