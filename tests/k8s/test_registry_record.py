"""A Kubernetes deploy and promotion recorded in the real registry (a SQLite file in SPECOPS_HOME).

API emulated: kmock stands in for the Kubernetes API server (no kube-apiserver can run here).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.api_emulated


def test_deploy_canary_and_promote_are_rows_and_events_in_the_registry(spec, kube, tmp_path):
    from specops.k8s import deploy_kubernetes, promote
    from specops.registry import open_registry

    kw = {"api_client": kube.api_client(), "out_dir": tmp_path, "poll_s": 0.05, "timeout_s": 10}
    result = deploy_kubernetes(spec, **kw)
    assert result.recorded
    canary = spec.model_copy(update={"name": "llama70b-eagle31-k5", "speculative": spec.speculative.model_copy(
        update={"num_speculative_tokens": 5})})
    deploy_kubernetes(canary, canary_of="llama70b-eagle31", **kw)
    promote("llama70b-eagle31-k5", api_client=kube.api_client(), poll_s=0.05, timeout_s=10)
    reg = open_registry()
    stable = reg.get_deployment("llama70b-eagle31")
    assert stable.platform == "kubernetes" and stable.status == "running"
    assert stable.num_speculative_tokens == 5  # the canary's configuration now
    assert stable.labels["namespace"] == "llm"
    assert reg.get_deployment("llama70b-eagle31-k5").status == "stopped"
    kinds = [e.kind for e in reg.events(subject="llama70b-eagle31")]
    assert "promote" in kinds and "deploy" in kinds
