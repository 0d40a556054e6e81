"""Fixtures for the Kubernetes tests: the example spec and a kmock-emulated API (see emulator.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent
SPEC = HERE / "llama70b-eagle31.yaml"
PLANTED_SECRET = "sk-planted-5ecret-value-7f3a9c"


@pytest.fixture
def spec():
    from specops.engines.spec import load_spec

    return load_spec(SPEC)


@pytest.fixture
def kube():
    """An emulated cluster with namespace `llm`, one 8×H100 node, and the spec's Secrets."""
    from tests.k8s.emulator import EmulatedCluster

    cluster = EmulatedCluster().start()
    try:
        cluster.add_namespace("llm")
        cluster.add_node("gpu-node-1", {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8"})
        for name, key in (("hf-token", "token"), ("llama70b-api-key", "api-key")):
            cluster.add_object("v1/secrets", "llm", {
                "apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "llm"},
                "type": "Opaque", "stringData": {key: PLANTED_SECRET}})
        yield cluster
    finally:
        cluster.stop()


# --- a real kube-apiserver (marker kube_apiserver; `make test-kube`) ----------------------------------

MONITOR_NS, MONITOR_SA = "specops-rbac", "specops-monitor"
"""The in-cluster monitor's service account, as the static token file names it (no token controller runs)."""


@pytest.fixture(scope="session")
def apiserver(tmp_path_factory):
    """One real etcd + kube-apiserver v1.20.2 for the session (≈ 6 s to start), stopped at teardown.

    Missing binaries skip the tests, except under `make test-kube` (SPECOPS_KUBE_REQUIRED=1), where
    they fail: CI must not pass by skipping."""
    import os

    from tests.k8s.apiserver import Identity, KubeAPIServer, missing

    why = missing()
    if why:
        if os.environ.get("SPECOPS_KUBE_REQUIRED") == "1":
            pytest.fail(why)
        pytest.skip(why)
    monitor = Identity(f"system:serviceaccount:{MONITOR_NS}:{MONITOR_SA}",
                       ("system:serviceaccounts", f"system:serviceaccounts:{MONITOR_NS}"))
    server = KubeAPIServer(tmp_path_factory.mktemp("kube-apiserver"), identities={"monitor": monitor}).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def real_ns(apiserver, request, tmp_path, monkeypatch):
    """A fresh namespace per test (nothing finishes deleting without kube-controller-manager), with
    KUBECONFIG pointing at the admin user, so `Cluster()` and the CLI find the real server."""
    import re
    import uuid

    from kubernetes import client

    name = (re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-") + "-" + uuid.uuid4().hex[:6])
    api = apiserver.api_client()
    client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    monkeypatch.setenv("KUBECONFIG", str(apiserver.kubeconfig(tmp_path / "kubeconfig")))
    return name


_CRDS = (("monitoring.coreos.com", "PodMonitor", "podmonitors"),
         ("monitoring.coreos.com", "PrometheusRule", "prometheusrules"))


@pytest.fixture(scope="session")
def real_cluster(apiserver):
    """The real apiserver made to look like a GPU cluster with the Prometheus Operator: one Node
    advertising 8 nvidia.com/gpu (its status written by the test: no kubelet runs) and minimal
    PodMonitor / PrometheusRule CRDs (spec kept as given: the operator's full schemas are not needed
    to test that specops applies them), waited on until Established."""
    import time

    from kubernetes import client

    api = apiserver.api_client()
    core = client.CoreV1Api(api)
    core.create_node({"metadata": {"name": "gpu-node-1"}})
    gpus = {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"}
    core.patch_node_status("gpu-node-1", {"status": {"capacity": gpus, "allocatable": gpus}})
    ext = client.ApiextensionsV1Api(api)
    for group, kind, plural in _CRDS:
        ext.create_custom_resource_definition({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "properties": {"spec": {
                             "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]}})
    deadline = time.monotonic() + 60
    for _, _, plural in _CRDS:
        while True:
            crd = ext.read_custom_resource_definition(f"{plural}.monitoring.coreos.com")
            if any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or []):
                break
            assert time.monotonic() < deadline, f"CRD {plural} not Established in 60 s"
            time.sleep(0.1)
    return apiserver


@pytest.fixture
def llm_ns(real_cluster, real_ns):
    """A fresh namespace on the real apiserver with the Secrets the example spec references."""
    from kubernetes import client

    core = client.CoreV1Api(real_cluster.api_client())
    for name, key in (("hf-token", "token"), ("llama70b-api-key", "api-key")):
        core.create_namespaced_secret(real_ns, {"metadata": {"name": name}, "type": "Opaque",
                                                "stringData": {key: PLANTED_SECRET}})
    return real_ns


class FakeKubelet:
    """Faked: kubelet and the Deployment controller. A thread writes each Deployment's status
    subresource in one namespace as if its pods became ready (observedGeneration = generation, all
    replicas updated and available) — no kubelet or kube-controller-manager runs. ``paused``
    stops it (a rollout that never finishes)."""

    def __init__(self, apiserver, namespace: str) -> None:
        import threading

        from kubernetes import client

        self.apps = client.AppsV1Api(apiserver.api_client())
        self.namespace = namespace
        self.paused = False
        self.written = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="fake-kubelet")

    def _run(self) -> None:
        from kubernetes.client.rest import ApiException

        while not self._stop.wait(0.05):
            if self.paused:
                continue
            try:
                deps = self.apps.list_namespaced_deployment(self.namespace).items
                for d in deps:
                    st, gen, n = d.status, d.metadata.generation, d.spec.replicas or 0
                    if st is not None and st.observed_generation == gen and (st.available_replicas or 0) == n:
                        continue
                    self.apps.patch_namespaced_deployment_status(d.metadata.name, self.namespace, {"status": {
                        "observedGeneration": gen, "replicas": n, "updatedReplicas": n, "readyReplicas": n,
                        "availableReplicas": n,
                        "conditions": [{"type": "Available", "status": "True", "reason": "FakedByTest"}]}},
                        field_manager="fake-kubelet")
                    self.written += 1
            except ApiException:
                continue  # deleted under us, or a conflict: next round

    def __enter__(self) -> FakeKubelet:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)


@pytest.fixture
def fake_kubelet(real_cluster, llm_ns):
    with FakeKubelet(real_cluster, llm_ns) as k:
        yield k


BREAKAGES = [
    ("namespace", 'namespace "prod" does not exist in the cluster'),
    ("gpu", 'no node advertises the GPU resource "amd.com/gpu"'),
    ("collision", "already exists and is not managed by specops"),
    ("secret", 'Secret "missing-token" does not exist'),
]
"""Cluster inputs a deploy must refuse before applying anything, and the message it names."""


def broken(spec, breakage: str):
    """``spec`` with the spec-side breakage applied ("collision" is made in the cluster by the test)."""
    k = spec.kubernetes
    change = {"namespace": {"namespace": "prod"}, "gpu": {"gpu_resource": "amd.com/gpu"},
              "secret": {"hf_token_secret": "missing-token"}}.get(breakage)
    return spec.model_copy(update={"kubernetes": k.model_copy(update=change)}) if change else spec
