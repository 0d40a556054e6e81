"""Apply, update, canary, promote and roll back through the official `kubernetes` client.

API emulated: no kube-apiserver can run on this machine, so kmock's KubernetesEmulator, served over
HTTP on 127.0.0.1, stands in for it (tests/k8s/emulator.py lists what it adds: generation
bookkeeping, list kinds, namespace GETs, and a stand-in Deployment controller that sets status).
Everything on the client side is real: the official client, its dynamic client, HTTP, JSON.
"""

from __future__ import annotations

import pytest

from specops.errors import EngineError, InputError
from specops.k8s import deploy_kubernetes, promote, rollback
from tests.k8s.conftest import PLANTED_SECRET

pytestmark = pytest.mark.api_emulated

STABLE = "llama70b-eagle31"
CANARY = "llama70b-eagle31-k5"
WRITES = ("POST", "PATCH", "PUT", "DELETE")


class RecordingRegistry:
    """Records what specops hands the registry (the registry itself is tested in tests/registry)."""

    def __init__(self) -> None:
        self.rows: dict[str, dict] = {}
        self.events: list[tuple[str, str, str]] = []

    def upsert_deployment(self, name, *, platform, status, actor=None, **fields):
        row = self.rows.setdefault(name, {})
        row.update({"platform": platform, "status": status, **{k: v for k, v in fields.items() if v is not None}})

    def set_deployment_status(self, name, status, *, actor=None, reason=None, **fields):
        self.rows[name]["status"] = status

    def get_deployment(self, name):
        from types import SimpleNamespace

        from specops.errors import NotFoundError

        if name not in self.rows:
            raise NotFoundError(f"unknown deployment {name}", "deploy it")
        return SimpleNamespace(**self.rows[name])

    def record_event(self, kind, subject, message, *, actor=None, reason=None, data=None):
        self.events.append((kind, subject, message))


def deploy(spec, kube, out, **kw):
    return deploy_kubernetes(spec, api_client=kube.api_client(), out_dir=out, poll_s=0.05, timeout_s=10, **kw)


def writes(kube) -> list[tuple[str, str, str]]:
    return [r for r in kube.requests() if str(r[0].value if hasattr(r[0], "value") else r[0]) in WRITES]


def canary_spec(spec, gamma=5):
    return spec.model_copy(update={"name": CANARY, "speculative": spec.speculative.model_copy(
        update={"num_speculative_tokens": gamma})})


def gamma_of(dep: dict) -> int:
    import json

    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    return json.loads(args[args.index("--speculative-config") + 1])["num_speculative_tokens"]


def test_deploy_applies_server_side_creates_new_objects_and_waits_for_the_rollout(spec, kube, tmp_path):
    reg = RecordingRegistry()
    seen: list[str] = []
    result = deploy(spec, kube, tmp_path, registry=reg, progress=seen.append)
    assert result.rollout == "1/1 replicas available"
    assert [a.split()[-1] for a in result.applied] == ["created"] * 5
    dep = kube.get("apps/v1/deployments", "llm", STABLE)
    assert dep["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "specops"
    assert kube.get("monitoring.coreos.com/v1/podmonitors", "llm", STABLE) is not None
    # the apply path: server-side apply first (kmock answers 404 for a new object), then create
    reqs = [(str(getattr(m, "value", m)), p, ct) for m, p, ct in kube.requests()]
    applies = [r for r in reqs if r[0] == "PATCH"]
    assert applies and all(ct == "application/apply-patch+yaml" for _, _, ct in applies)
    assert ("POST", "/apis/apps/v1/namespaces/llm/deployments", "application/json") in reqs
    assert any("rollout llama70b-eagle31" in s for s in seen)
    assert len(writes(kube)) >= 5  # the helper the "nothing applied" tests rely on does see writes
    assert (tmp_path / STABLE / "deployment.yaml").is_file()
    assert reg.rows[STABLE]["status"] == "running" and reg.rows[STABLE]["method"] == "eagle3"
    assert reg.rows[STABLE]["endpoint"] == "http://llama70b-eagle31.llm.svc.cluster.local:8000/v1"
    assert any(line.startswith("rollout: 1/1") for line in result.summary_lines())


def test_a_second_deploy_updates_the_objects_and_waits_for_the_new_generation(spec, kube, tmp_path):
    deploy(spec, kube, tmp_path)
    result = deploy(canary_spec(spec, gamma=4).model_copy(update={"name": STABLE}), kube, tmp_path)
    assert [a.split()[-1] for a in result.applied] == ["configured"] * 5
    dep = kube.get("apps/v1/deployments", "llm", STABLE)
    assert gamma_of(dep) == 4
    assert dep["metadata"]["generation"] == 2 and dep["status"]["observedGeneration"] == 2


def test_canary_then_promote_moves_the_canary_config_into_the_stable(spec, kube, tmp_path):
    reg = RecordingRegistry()
    deploy(spec, kube, tmp_path, registry=reg)
    result = deploy(canary_spec(spec), kube, tmp_path, canary_of=STABLE, replicas=1, registry=reg)
    assert result.role == "canary" and [o["kind"] for o in result.objects] == ["PersistentVolumeClaim",
                                                                                "Deployment"]
    canary = kube.get("apps/v1/deployments", "llm", CANARY)
    assert canary["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] == STABLE
    assert canary["spec"]["template"]["metadata"]["labels"]["specops.io/role"] == "canary"

    lines = promote(CANARY, api_client=kube.api_client(), registry=reg, poll_s=0.05, timeout_s=10)
    assert lines[0].startswith(f"promoted {CANARY} into {STABLE} (namespace llm)")
    stable = kube.get("apps/v1/deployments", "llm", STABLE)
    assert gamma_of(stable) == 5
    labels = stable["spec"]["template"]["metadata"]["labels"]
    assert labels["specops.io/deployment"] == STABLE and labels["specops.io/role"] == "stable"
    claim = stable["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"]
    assert claim == f"{STABLE}-model-cache"
    assert kube.get("apps/v1/deployments", "llm", CANARY) is None
    assert kube.get("v1/persistentvolumeclaims", "llm", f"{CANARY}-model-cache") is None
    assert ("promote", STABLE, f"promoted canary {CANARY} into {STABLE} in namespace llm") in reg.events
    assert reg.rows[CANARY]["status"] == "stopped" and reg.rows[STABLE]["status"] == "running"


def test_rollback_deletes_the_canary_and_leaves_the_stable(spec, kube, tmp_path):
    reg = RecordingRegistry()
    deploy(spec, kube, tmp_path, registry=reg)
    deploy(canary_spec(spec), kube, tmp_path, canary_of=STABLE, registry=reg)
    lines = rollback(CANARY, api_client=kube.api_client(), registry=reg)
    assert lines[0] == f"rolled back canary {CANARY} (namespace llm); {STABLE} serves all traffic"
    assert kube.get("apps/v1/deployments", "llm", CANARY) is None
    assert gamma_of(kube.get("apps/v1/deployments", "llm", STABLE)) == 3
    assert reg.events[-1][0] == "rollback" and reg.rows[CANARY]["status"] == "stopped"


def test_promoting_a_stable_deployment_is_refused(spec, kube, tmp_path):
    deploy(spec, kube, tmp_path)
    with pytest.raises(InputError, match="is a stable deployment, not a canary"):
        promote(STABLE, api_client=kube.api_client(), namespace="llm", registry=RecordingRegistry())


def test_a_canary_without_its_stable_is_refused_before_anything_is_applied(spec, kube, tmp_path):
    with pytest.raises(InputError, match="no specops-managed stable Deployment"):
        deploy(canary_spec(spec), kube, tmp_path, canary_of=STABLE)
    assert writes(kube) == []


@pytest.mark.parametrize("breakage, message", [
    ("namespace", 'namespace "prod" does not exist in the cluster'),
    ("gpu", 'no node advertises the GPU resource "amd.com/gpu"'),
    ("collision", "already exists and is not managed by specops"),
    ("secret", 'Secret "missing-token" does not exist'),
])
def test_invalid_cluster_input_is_one_line_with_a_fix_and_nothing_is_applied(spec, kube, tmp_path, breakage,
                                                                              message):
    k = spec.kubernetes
    if breakage == "namespace":
        spec = spec.model_copy(update={"kubernetes": k.model_copy(update={"namespace": "prod"})})
    elif breakage == "gpu":
        spec = spec.model_copy(update={"kubernetes": k.model_copy(update={"gpu_resource": "amd.com/gpu"})})
    elif breakage == "secret":
        spec = spec.model_copy(update={"kubernetes": k.model_copy(update={"hf_token_secret": "missing-token"})})
    else:
        kube.add_object("v1/services", "llm", {"apiVersion": "v1", "kind": "Service", "metadata": {
            "name": STABLE, "namespace": "llm", "labels": {"app": "someone-else"}}, "spec": {"ports": []}})
    with pytest.raises(InputError, match=message) as err:
        deploy(spec, kube, tmp_path)
    line = err.value.one_line()
    assert "\n" not in line and "To fix:" in line and err.value.exit_code == 2
    assert writes(kube) == []
    assert not (tmp_path / STABLE).exists()


def test_a_gpu_resource_name_close_to_an_advertised_one_gets_a_suggestion(spec, kube, tmp_path):
    typo = spec.model_copy(update={"kubernetes": spec.kubernetes.model_copy(update={"gpu_resource": "nvidia.com/gpus"})})
    with pytest.raises(InputError, match='Did you mean "nvidia.com/gpu"'):
        deploy(typo, kube, tmp_path)


def test_a_rollout_that_does_not_finish_times_out_with_a_fix(spec, kube, tmp_path):
    kube.controller_enabled = False
    with pytest.raises(EngineError, match="did not finish in 0.3 s") as err:
        deploy_kubernetes(spec, api_client=kube.api_client(), out_dir=tmp_path, poll_s=0.05, timeout_s=0.3)
    assert "kubectl -n llm describe deployment" in err.value.one_line()


def test_secret_values_never_reach_manifests_output_or_the_registry(spec, kube, tmp_path, monkeypatch,
                                                                   specops_home):
    """The registry is the real one (a SQLite file in SPECOPS_HOME): every byte specops left there is
    searched, after checking that the deploys and the promotion were recorded in it."""
    monkeypatch.setenv("VLLM_API_KEY", PLANTED_SECRET)
    monkeypatch.setenv("HF_TOKEN", PLANTED_SECRET)
    seen: list[str] = []
    out = tmp_path / "manifests"
    result = deploy(spec, kube, out, progress=seen.append)
    deploy(canary_spec(spec), kube, out, canary_of=STABLE, progress=seen.append)
    seen += promote(CANARY, api_client=kube.api_client(), progress=seen.append, poll_s=0.05)
    from specops.registry import open_registry

    with open_registry() as reg:
        assert reg.get_deployment(STABLE).num_speculative_tokens == 5  # the promotion is in the file
        assert {"deploy", "promote"} <= {e.kind for e in reg.events(subject=STABLE)}
    stored = [p for p in specops_home.rglob("*") if p.is_file()]
    assert any(p.name == "specops.db" for p in stored)
    assert [p for p in stored if PLANTED_SECRET.encode() in p.read_bytes()] == []
    texts = [p.read_text() for p in out.rglob("*.yaml")]
    texts += seen + result.summary_lines() + [repr(result.objects)]
    assert texts and not [t for t in texts if PLANTED_SECRET in t]
    # the applied objects hold references only
    dep = kube.get("apps/v1/deployments", "llm", STABLE)
    assert PLANTED_SECRET not in repr(dep)


def test_promote_and_rollback_commands_exit_2_with_a_fix_for_a_stable(spec, kube, tmp_path, cli):
    deploy(spec, kube, tmp_path)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: emu\n"
        f"clusters: [{{name: emu, cluster: {{server: '{kube.url}'}}}}]\n"
        "users: [{name: emu, user: {}}]\n"
        "contexts: [{name: emu, context: {cluster: emu, user: emu, namespace: llm}}]\n")
    env = {"KUBECONFIG": str(kubeconfig)}
    for command in ("promote", "rollback"):
        proc = cli(command, STABLE, "--namespace", "llm", env=env)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert lines[-1].startswith("error: ") and "is a stable deployment, not a canary" in lines[-1]
        assert "To fix:" in lines[-1] and "Traceback" not in proc.stderr


def test_rollback_command_removes_a_canary_through_kubeconfig(spec, kube, tmp_path, cli):
    deploy(spec, kube, tmp_path)
    deploy(canary_spec(spec), kube, tmp_path, canary_of=STABLE)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: emu\n"
        f"clusters: [{{name: emu, cluster: {{server: '{kube.url}'}}}}]\n"
        "users: [{name: emu, user: {}}]\n"
        "contexts: [{name: emu, context: {cluster: emu, user: emu}}]\n")
    proc = cli("rollback", CANARY, "-n", "llm", env={"KUBECONFIG": str(kubeconfig)})
    assert proc.returncode == 0, proc.stderr
    assert f"rolled back canary {CANARY}" in proc.stdout
    assert kube.get("apps/v1/deployments", "llm", CANARY) is None


def test_scaling_past_one_replica_on_a_read_write_once_cache_claim_is_refused(spec, kube, tmp_path):
    deploy(spec, kube, tmp_path)
    before = len(writes(kube))
    with pytest.raises(InputError, match="access mode cannot change"):
        deploy(spec, kube, tmp_path, replicas=3)
    assert len(writes(kube)) == before
