"""Against a real cluster: runs only when SPECOPS_TEST_REAL_CLUSTER=1 is set as well as KUBECONFIG
(skipped otherwise, with the reason shown) — a developer's KUBECONFIG alone never sends test objects
to whatever cluster it points at.

It deploys a zero-replica, zero-GPU variant of the example (no GPU or Prometheus Operator needed)
into $SPECOPS_TEST_NAMESPACE (default "default") under a unique name, checks that the real API
server recorded specops as the field manager (real server-side apply), and deletes what it made.
"""

from __future__ import annotations

import os
import uuid

import pytest

pytestmark = pytest.mark.skipif(
    os.environ.get("SPECOPS_TEST_REAL_CLUSTER") != "1" or not os.environ.get("KUBECONFIG"),
    reason="against a real cluster only on request: set SPECOPS_TEST_REAL_CLUSTER=1 and KUBECONFIG")


def test_server_side_apply_against_a_real_cluster_records_specops_as_field_manager(spec, tmp_path):
    from specops.k8s import deploy_kubernetes
    from specops.k8s.cluster import Cluster

    ns = os.environ.get("SPECOPS_TEST_NAMESPACE", "default")
    name = f"specops-test-{uuid.uuid4().hex[:8]}"
    small = spec.model_copy(update={
        "name": name,
        "serve": spec.serve.model_copy(update={"api_key": None}),
        "kubernetes": spec.kubernetes.model_copy(update={
            "namespace": ns, "replicas": 0, "gpus_per_replica": 0, "hf_token_secret": None, "prefetch": False,
            "storage_class": None, "node_selector": {}, "tolerations": []})})
    cluster = Cluster()
    try:
        result = deploy_kubernetes(small, out_dir=tmp_path, monitoring=False, timeout_s=120, poll_s=1)
        assert result.rollout == "0/0 replicas available"
        dep = cluster.get("apps/v1", "Deployment", name, ns)
        assert any(f.get("manager") == "specops" for f in dep["metadata"]["managedFields"])
        again = deploy_kubernetes(small, out_dir=tmp_path, monitoring=False, timeout_s=120, poll_s=1)
        assert all(a.endswith("configured") for a in again.applied)
    finally:
        cluster.delete("apps/v1", "Deployment", name, ns)
        cluster.delete("v1", "Service", name, ns)
        cluster.delete("v1", "PersistentVolumeClaim", f"{name}-model-cache", ns)
