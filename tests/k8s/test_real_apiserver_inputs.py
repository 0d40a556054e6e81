"""What specops refuses, and what it never leaks, against a real kube-apiserver v1.20.2 (`make test-kube`).

Real: the API server, etcd, the official client, the specops CLI in a subprocess (KUBECONFIG with a
bearer token over TLS). Faked: kubelet and the Deployment controller (conftest.FakeKubelet writes the
Deployment status subresource), the GPU Node's status (conftest.real_cluster). "Nothing applied" is
read from the server: no object exists, or the existing objects' resourceVersions did not move
(tests/k8s/test_api_emulated.py also counts the write requests, which only the emulator records).
"""

from __future__ import annotations

import pytest

from specops.errors import InputError
from tests.k8s.conftest import BREAKAGES, PLANTED_SECRET, broken
from tests.k8s.test_real_apiserver import CANARY, STABLE, cli_in, deploy, deployment, get, in_ns

pytestmark = pytest.mark.kube_apiserver

KINDS = (("v1", "PersistentVolumeClaim", f"{STABLE}-model-cache"), ("apps/v1", "Deployment", STABLE),
         ("v1", "Service", STABLE), ("monitoring.coreos.com/v1", "PodMonitor", STABLE),
         ("monitoring.coreos.com/v1", "PrometheusRule", STABLE))


def versions(apiserver, ns) -> dict:
    out = {}
    for api_version, kind, name in KINDS:
        obj = get(apiserver, (api_version, kind), ns, name)
        out[kind] = obj["metadata"]["resourceVersion"] if obj else None
    return out


@pytest.mark.parametrize("breakage, message", BREAKAGES)
def test_invalid_cluster_input_is_one_line_with_a_fix_and_nothing_is_applied(spec, llm_ns, real_cluster, tmp_path,
                                                                              breakage, message):
    from kubernetes import client

    spec = in_ns(spec, llm_ns)
    spec = broken(spec, breakage)
    if breakage == "collision":
        client.CoreV1Api(real_cluster.api_client()).create_namespaced_service(llm_ns, {
            "metadata": {"name": STABLE, "labels": {"app": "someone-else"}},
            "spec": {"ports": [{"port": 80, "protocol": "TCP"}]}})
    with pytest.raises(InputError, match=message) as err:
        deploy(spec, tmp_path)
    line = err.value.one_line()
    assert "\n" not in line and "To fix:" in line and err.value.exit_code == 2
    after = versions(real_cluster, llm_ns)
    assert after == {kind: None for _, kind, _ in KINDS} | ({"Service": after["Service"]} if breakage == "collision"
                                                            else {})
    assert not (tmp_path / "manifests").exists()


def test_a_gpu_resource_name_close_to_an_advertised_one_gets_a_suggestion(spec, llm_ns, tmp_path):
    s = in_ns(spec, llm_ns)
    typo = s.model_copy(update={"kubernetes": s.kubernetes.model_copy(update={"gpu_resource": "nvidia.com/gpus"})})
    with pytest.raises(InputError, match='Did you mean "nvidia.com/gpu"'):
        deploy(typo, tmp_path)


def test_a_canary_without_its_stable_is_refused_before_anything_is_applied(spec, llm_ns, real_cluster, tmp_path):
    with pytest.raises(InputError, match="no specops-managed stable Deployment"):
        deploy(in_ns(spec, llm_ns, name=CANARY, gamma=5), tmp_path, canary_of=STABLE)
    assert deployment(real_cluster, llm_ns, CANARY) is None


def test_promoting_a_stable_deployment_is_refused(spec, llm_ns, fake_kubelet, tmp_path):
    from specops.k8s import promote

    deploy(in_ns(spec, llm_ns), tmp_path)
    with pytest.raises(InputError, match="is a stable deployment, not a canary"):
        promote(STABLE, namespace=llm_ns)


def test_scaling_past_one_replica_on_a_read_write_once_cache_claim_is_refused(spec, llm_ns, fake_kubelet,
                                                                               real_cluster, tmp_path):
    deploy(in_ns(spec, llm_ns), tmp_path)
    before = versions(real_cluster, llm_ns)
    with pytest.raises(InputError, match="access mode cannot change"):
        deploy(in_ns(spec, llm_ns), tmp_path, replicas=3)
    assert versions(real_cluster, llm_ns) == before


def test_secret_values_never_reach_manifests_output_the_registry_or_the_cluster(spec, llm_ns, fake_kubelet,
                                                                                real_cluster, tmp_path, monkeypatch):
    import json

    from specops.k8s import promote
    from specops.registry import open_registry

    monkeypatch.setenv("VLLM_API_KEY", PLANTED_SECRET)
    monkeypatch.setenv("HF_TOKEN", PLANTED_SECRET)
    seen: list[str] = []
    result = deploy(in_ns(spec, llm_ns), tmp_path, progress=seen.append)
    deploy(in_ns(spec, llm_ns, name=CANARY, gamma=5), tmp_path, canary_of=STABLE, progress=seen.append)
    seen += promote(CANARY, namespace=llm_ns, progress=seen.append, poll_s=0.05, timeout_s=30)
    reg = open_registry()
    texts = [p.read_text() for p in tmp_path.rglob("*.yaml")]
    texts += seen + result.summary_lines() + [repr(result.objects)]
    texts += [repr(reg.get_deployment(STABLE)), repr(reg.events(limit=1000))]
    assert texts and not [t for t in texts if PLANTED_SECRET in t]
    # every byte specops left in SPECOPS_HOME (the real SQLite registry included), after checking the
    # promotion is recorded there
    from specops.settings import specops_home

    assert reg.get_deployment(STABLE).num_speculative_tokens == 5
    stored = [p for p in specops_home().rglob("*") if p.is_file()]
    assert any(p.suffix == ".db" for p in stored)
    assert [p for p in stored if PLANTED_SECRET.encode() in p.read_bytes()] == []
    dep = deployment(real_cluster, llm_ns, STABLE)
    assert PLANTED_SECRET not in json.dumps(dep)
    env = {e["name"]: e for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["VLLM_API_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "llama70b-api-key", "key": "api-key"}


def test_promote_and_rollback_commands_exit_2_with_a_fix_for_a_stable(spec, llm_ns, fake_kubelet, tmp_path):
    deploy(in_ns(spec, llm_ns), tmp_path)
    cli = cli_in(tmp_path)
    for command in ("promote", "rollback"):
        proc = cli(command, STABLE, "--namespace", llm_ns)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert lines[-1].startswith("error: ") and "is a stable deployment, not a canary" in lines[-1]
        assert "To fix:" in lines[-1] and "Traceback" not in proc.stderr


def test_the_rollback_command_removes_a_canary_through_kubeconfig(spec, llm_ns, fake_kubelet, real_cluster,
                                                                  tmp_path):
    deploy(in_ns(spec, llm_ns), tmp_path)
    deploy(in_ns(spec, llm_ns, name=CANARY, gamma=5), tmp_path, canary_of=STABLE)
    proc = cli_in(tmp_path)("rollback", CANARY, "-n", llm_ns)
    assert proc.returncode == 0, proc.stderr
    assert f"rolled back canary {CANARY}" in proc.stdout
    assert deployment(real_cluster, llm_ns, CANARY) is None
