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
