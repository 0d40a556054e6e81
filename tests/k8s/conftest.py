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
