"""The canary's share of live traffic, set in the spec (``canary.share``), on a real kube-apiserver: the
canary Deployment behind the stable's Service gets the replica count whose share of ready endpoints is
closest to it, read against the stable's replicas in the cluster.

Faked: kubelet (FakeKubelet writes Deployment status; no pods run)."""

from __future__ import annotations

import pytest

from specops.engines.spec import CanaryBlock
from tests.k8s.test_real_apiserver import CANARY, STABLE, deploy, deployment, in_ns

pytestmark = pytest.mark.kube_apiserver


def test_the_canary_replicas_follow_the_share_in_the_spec(spec, llm_ns, fake_kubelet, real_cluster, tmp_path):
    deploy(in_ns(spec, llm_ns), tmp_path)  # the stable: 1 replica
    canary = in_ns(spec, llm_ns, name=CANARY, gamma=5)
    canary = canary.model_copy(update={"kubernetes": canary.kubernetes.model_copy(update={"replicas": 2}),
                                       "canary": CanaryBlock(share=0.5, budget=24)})
    result = deploy(canary, tmp_path, canary_of=STABLE)
    assert deployment(real_cluster, llm_ns, CANARY)["spec"]["replicas"] == 1  # not the spec's 2: half the traffic
    assert "canary replicas 1 next to 1 stable: 50% of the Service's traffic (canary.share 0.5)" in result.notes
