"""specops against a real etcd + kube-apiserver v1.20.2 (tests/k8s/apiserver.py; `make test-kube`).

Real: the API server (validation, defaulting, admission, RBAC, server-side apply, field managers,
optimistic concurrency), etcd, the official client, the specops CLI in a subprocess, the SQLite
registry. Faked: kubelet and the Deployment controller — nothing runs pods here, so the tests that
need readiness write the Deployment's status subresource themselves (conftest.FakeKubelet); the GPU
Node's status and the Prometheus Operator's CRDs are written by the test too (conftest.real_cluster).
"""

from __future__ import annotations

import json

import pytest

from specops.errors import ConflictError, InputError
from tests.k8s.conftest import PLANTED_SECRET

pytestmark = pytest.mark.kube_apiserver

STABLE = "llama70b-eagle31"
CANARY = "llama70b-eagle31-k5"


def in_ns(spec, ns, *, name=None, gamma=None):
    update = {"kubernetes": spec.kubernetes.model_copy(update={"namespace": ns})}
    if name:
        update["name"] = name
    if gamma:
        update["speculative"] = spec.speculative.model_copy(update={"num_speculative_tokens": gamma})
    return spec.model_copy(update=update)


def deploy(spec, tmp_path, **kw):
    from specops.k8s import deploy_kubernetes

    return deploy_kubernetes(spec, out_dir=tmp_path / "manifests", poll_s=0.05, timeout_s=30, **kw)


def get(apiserver, kind_api, ns, name):
    from kubernetes.dynamic import DynamicClient

    api_version, kind = kind_api
    dyn = DynamicClient(apiserver.api_client())
    res = dyn.resources.get(api_version=api_version, kind=kind)
    from kubernetes.client.rest import ApiException

    try:
        return dyn.get(res, name=name, namespace=ns).to_dict()
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def deployment(apiserver, ns, name):
    return get(apiserver, ("apps/v1", "Deployment"), ns, name)


def vllm_args(dep: dict) -> list[str]:
    return dep["spec"]["template"]["spec"]["containers"][0]["args"]


def gamma_of(dep: dict) -> int | None:
    args = vllm_args(dep)
    if "--speculative-config" not in args:
        return None
    return json.loads(args[args.index("--speculative-config") + 1])["num_speculative_tokens"]


def cli_in(folder):
    """The real `specops` CLI in a subprocess, run in ``folder`` (it writes manifests/ there)."""
    import os
    import subprocess
    import sys

    def run(*args, timeout=180):
        return subprocess.run([sys.executable, "-m", "specops", *args], capture_output=True, text=True,
                              env=dict(os.environ), timeout=timeout, cwd=str(folder))
    return run


def managers(obj: dict) -> dict[str, str]:
    return {f["manager"]: f["operation"] for f in obj["metadata"].get("managedFields") or []}


# --- server-side apply, dry run, conflicts ---------------------------------------------------------

def test_deploy_applies_every_object_server_side_as_field_manager_specops(spec, llm_ns, fake_kubelet, real_cluster,
                                                                           tmp_path):
    from specops.registry import open_registry

    result = deploy(in_ns(spec, llm_ns), tmp_path)
    assert [a.split()[-1] for a in result.applied] == ["created"] * 5
    assert result.rollout == "1/1 replicas available"
    kinds = [("v1", "PersistentVolumeClaim", f"{STABLE}-model-cache"), ("apps/v1", "Deployment", STABLE),
             ("v1", "Service", STABLE), ("monitoring.coreos.com/v1", "PodMonitor", STABLE),
             ("monitoring.coreos.com/v1", "PrometheusRule", STABLE)]
    for api_version, kind, name in kinds:
        obj = get(real_cluster, (api_version, kind), llm_ns, name)
        assert managers(obj).get("specops") == "Apply", kind
    svc = get(real_cluster, ("v1", "Service"), llm_ns, STABLE)
    assert svc["spec"]["clusterIP"].startswith("10.96.0.")  # the real server allocated it
    assert svc["spec"]["ports"][0]["protocol"] == "TCP"
    dep = deployment(real_cluster, llm_ns, STABLE)
    assert PLANTED_SECRET not in json.dumps(dep)
    row = open_registry().get_deployment(STABLE)
    assert row.platform == "kubernetes" and row.num_speculative_tokens == 3

    again = deploy(in_ns(spec, llm_ns), tmp_path)  # the same spec again: configured, nothing changes
    assert [a.split()[-1] for a in again.applied] == ["configured"] * 5
    assert deployment(real_cluster, llm_ns, STABLE)["metadata"]["generation"] == dep["metadata"]["generation"]


def test_server_dry_run_has_the_api_server_check_every_object_and_stores_nothing(spec, llm_ns, real_cluster,
                                                                                  tmp_path):
    result = deploy(in_ns(spec, llm_ns), tmp_path, server_dry_run=True)
    assert result.server_dry_run and result.rollout is None and not result.recorded
    assert [a.split(" ", 1)[1] for a in result.applied] == ["created (server dry run)"] * 5
    assert "server dry run: the API server accepted every object; nothing was stored" in result.summary_lines()
    assert deployment(real_cluster, llm_ns, STABLE) is None
    assert get(real_cluster, ("v1", "Service"), llm_ns, STABLE) is None
    assert not (tmp_path / "manifests").exists()


def test_kubernetes_1_20_refuses_a_service_port_without_protocol_which_specops_never_renders(spec, llm_ns,
                                                                                            real_cluster):
    """Why the renderer writes `protocol: TCP`: 1.20's server-side apply answers 500 without it."""
    from specops.k8s.cluster import Cluster
    from specops.k8s.manifests import render_manifests

    svc = next(o for o in render_manifests(in_ns(spec, llm_ns)) if o["kind"] == "Service")
    cluster = Cluster(real_cluster.api_client())
    cluster.apply(svc, dry_run=True)
    del svc["spec"]["ports"][0]["protocol"]
    with pytest.raises(InputError, match=r"could not apply Service .* \(HTTP 500"):
        cluster.apply(svc, dry_run=True)


def test_a_field_another_manager_changed_is_a_one_line_conflict_and_force_conflicts_takes_it_over(
        spec, llm_ns, fake_kubelet, real_cluster, tmp_path):
    from kubernetes.dynamic import DynamicClient

    from specops.engines.spec import dump_spec

    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(dump_spec(in_ns(spec, llm_ns)))
    cli = cli_in(tmp_path)
    first = cli("deploy", str(spec_file), "--platform", "kubernetes")
    assert first.returncode == 0, first.stderr
    # an on-call engineer scales it by server-side apply under their own manager name
    dyn = DynamicClient(real_cluster.api_client())
    res = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    dyn.server_side_apply(res, body={"apiVersion": "apps/v1", "kind": "Deployment",
                                     "metadata": {"name": STABLE, "namespace": llm_ns}, "spec": {"replicas": 3}},
                          name=STABLE, namespace=llm_ns, field_manager="oncall", force_conflicts=True)

    refused = cli("deploy", str(spec_file), "--platform", "kubernetes")
    assert refused.returncode == 2
    err = refused.stderr.strip().splitlines()[-1]
    assert err.startswith("error: applying Deployment") and '"oncall"' in err and ".spec.replicas" in err
    assert "To fix: rerun `specops deploy` with --force-conflicts" in err
    assert deployment(real_cluster, llm_ns, STABLE)["spec"]["replicas"] == 3  # nothing overwritten

    forced = cli("deploy", str(spec_file), "--platform", "kubernetes", "--force-conflicts")
    assert forced.returncode == 0, forced.stderr
    assert (tmp_path / "manifests" / STABLE / "deployment.yaml").is_file()
    dep = deployment(real_cluster, llm_ns, STABLE)
    assert dep["spec"]["replicas"] == 1
    owners = [f["manager"] for f in dep["metadata"]["managedFields"]
              if "f:replicas" in (f["fieldsV1"].get("f:spec") or {})]
    assert owners == ["specops"]


def test_the_conflict_error_names_managers_and_fields_for_callers_of_the_library(spec, llm_ns, fake_kubelet,
                                                                                  real_cluster, tmp_path):
    from kubernetes.dynamic import DynamicClient

    deploy(in_ns(spec, llm_ns), tmp_path)
    dyn = DynamicClient(real_cluster.api_client())
    res = dyn.resources.get(api_version="v1", kind="Service")
    dyn.server_side_apply(res, body={"apiVersion": "v1", "kind": "Service",
                                     "metadata": {"name": STABLE, "namespace": llm_ns},
                                     "spec": {"type": "NodePort", "ports": [
                                         {"port": 8000, "protocol": "TCP", "targetPort": "http"}]}},
                          name=STABLE, namespace=llm_ns, field_manager="platform-team", force_conflicts=True)
    with pytest.raises(ConflictError) as info:
        deploy(in_ns(spec, llm_ns), tmp_path)
    assert info.value.managers == ["platform-team"] and ".spec.type" in info.value.fields


# --- canary, promote, rollback ---------------------------------------------------------------------

def test_canary_promote_moves_the_canary_config_into_the_stable(spec, llm_ns, fake_kubelet, real_cluster,
                                                                 tmp_path):
    """Faked: kubelet; the test writes Deployment status (FakeKubelet)."""
    from specops.k8s import promote
    from specops.registry import open_registry

    deploy(in_ns(spec, llm_ns), tmp_path)
    result = deploy(in_ns(spec, llm_ns, name=CANARY, gamma=5), tmp_path, canary_of=STABLE, replicas=1)
    assert result.role == "canary" and result.rollout == "1/1 replicas available"
    canary = deployment(real_cluster, llm_ns, CANARY)
    assert canary["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] == STABLE

    lines = promote(CANARY, namespace=llm_ns, poll_s=0.05, timeout_s=30)
    assert lines[0].startswith(f"promoted {CANARY} into {STABLE} (namespace {llm_ns}): 1/1 replicas available")
    stable = deployment(real_cluster, llm_ns, STABLE)
    assert gamma_of(stable) == 5 and stable["metadata"]["generation"] == 2
    assert stable["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == \
        f"{STABLE}-model-cache"
    assert deployment(real_cluster, llm_ns, CANARY) is None
    claim = get(real_cluster, ("v1", "PersistentVolumeClaim"), llm_ns, f"{CANARY}-model-cache")
    # deleted; the pvc-protection finalizer is removed by kube-controller-manager, which does not run here
    assert claim is None or claim["metadata"].get("deletionTimestamp")
    reg = open_registry()
    assert reg.get_deployment(CANARY).status == "stopped"
    row = reg.get_deployment(STABLE)
    assert row.platform == "kubernetes" and row.status == "running" and row.labels["namespace"] == llm_ns
    assert row.num_speculative_tokens == 5  # the canary's configuration now
    assert {"deploy", "promote"} <= {e.kind for e in reg.events(subject=STABLE)}


def test_canary_rollback_deletes_the_canary_and_the_stable_keeps_its_config(spec, llm_ns, fake_kubelet,
                                                                             real_cluster, tmp_path):
    """Faked: kubelet; the test writes Deployment status (FakeKubelet)."""
    from specops.k8s import rollback
    from specops.registry import open_registry

    deploy(in_ns(spec, llm_ns), tmp_path)
    deploy(in_ns(spec, llm_ns, name=CANARY, gamma=5), tmp_path, canary_of=STABLE)
    lines = rollback(CANARY, namespace=llm_ns)
    assert lines[0] == f"rolled back canary {CANARY} (namespace {llm_ns}); {STABLE} serves all traffic"
    assert deployment(real_cluster, llm_ns, CANARY) is None
    assert gamma_of(deployment(real_cluster, llm_ns, STABLE)) == 3
    assert open_registry().get_deployment(CANARY).status == "stopped"


def test_a_rollout_that_never_becomes_ready_times_out_with_a_fix(spec, llm_ns, fake_kubelet, tmp_path):
    """Faked: kubelet — paused here, so the Deployment never reports available replicas."""
    from specops.errors import EngineError
    from specops.k8s import deploy_kubernetes

    fake_kubelet.paused = True
    with pytest.raises(EngineError, match=r"did not finish in 1 s .*To fix: kubectl -n .* describe deployment"):
        deploy_kubernetes(in_ns(spec, llm_ns), out_dir=tmp_path, poll_s=0.05, timeout_s=1)


# --- fallback on Kubernetes ------------------------------------------------------------------------

def test_disable_speculation_reapplies_the_deployment_without_speculative_config_and_records_it(
        spec, llm_ns, fake_kubelet, real_cluster, tmp_path):
    from specops.drift.actions import EngineExecutor
    from specops.registry import open_registry
    from specops.settings import deployment_dir

    deploy(in_ns(spec, llm_ns), tmp_path)
    before = deployment(real_cluster, llm_ns, STABLE)
    assert "--speculative-config" in vllm_args(before)
    reg = open_registry()
    EngineExecutor(reg).disable_speculation(STABLE, "acceptance collapsed")

    after = deployment(real_cluster, llm_ns, STABLE)
    assert "--speculative-config" not in vllm_args(after)
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1
    assert managers(after) == {"specops": "Apply", "fake-kubelet": "Update"}  # the status is the fake kubelet's
    assert after["spec"]["replicas"] == before["spec"]["replicas"]
    row = reg.get_deployment(STABLE)
    assert row.method is None and row.num_speculative_tokens is None and row.draft_ref is None
    assert "--speculative-config" not in row.argv_redacted
    event = reg.events(subject=STABLE, kind="fallback")[0]
    assert event.message.endswith("speculation off") and event.actor == "specops-monitor"
    assert (deployment_dir(STABLE) / "spec.before-fallback.yaml").is_file()
    EngineExecutor(reg).disable_speculation(STABLE, "again")  # idempotent: already off
    assert deployment(real_cluster, llm_ns, STABLE)["metadata"]["generation"] == after["metadata"]["generation"]


def test_retune_gamma_reapplies_the_deployment_with_the_new_num_speculative_tokens(spec, llm_ns, fake_kubelet,
                                                                                   real_cluster, tmp_path):
    from specops.drift.actions import EngineExecutor
    from specops.registry import open_registry

    deploy(in_ns(spec, llm_ns), tmp_path)
    reg = open_registry()
    EngineExecutor(reg).retune_gamma(STABLE, {"proposed": [[1, 1, 2]]})
    dep = deployment(real_cluster, llm_ns, STABLE)
    assert gamma_of(dep) == 2
    assert reg.get_deployment(STABLE).num_speculative_tokens == 2
    assert "num_speculative_tokens=2" in reg.events(subject=STABLE, kind="fallback")[0].message


def test_the_fallback_uses_the_spec_in_the_registry_when_the_monitor_has_no_saved_spec(spec, llm_ns, fake_kubelet,
                                                                                      real_cluster, tmp_path):
    """An in-cluster monitor's SPECOPS_HOME is an emptyDir: the spec comes from the shared registry."""
    from specops.drift.actions import EngineExecutor
    from specops.registry import open_registry
    from specops.settings import deployment_dir

    deploy(in_ns(spec, llm_ns), tmp_path)
    (deployment_dir(STABLE) / "spec.yaml").unlink()
    EngineExecutor(open_registry()).retune_gamma(STABLE, {"proposed": [[1, 1, 4]]})
    assert gamma_of(deployment(real_cluster, llm_ns, STABLE)) == 4


def test_a_fallback_that_meets_another_managers_field_is_fatal_and_forces_nothing(spec, llm_ns, fake_kubelet,
                                                                                  real_cluster, tmp_path):
    from kubernetes.dynamic import DynamicClient

    from specops.drift.actions import EngineExecutor
    from specops.drift.outcomes import Fatal
    from specops.registry import open_registry

    deploy(in_ns(spec, llm_ns), tmp_path)
    dep = deployment(real_cluster, llm_ns, STABLE)
    edited = [*vllm_args(dep)[:-1], "--max-num-seqs", "64"]
    dyn = DynamicClient(real_cluster.api_client())
    res = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    dyn.server_side_apply(res, body={"apiVersion": "apps/v1", "kind": "Deployment",
                                     "metadata": {"name": STABLE, "namespace": llm_ns},
                                     "spec": {"template": {"spec": {"containers": [
                                         {"name": "vllm", "args": edited}]}}}},
                          name=STABLE, namespace=llm_ns, field_manager="kubectl-edit", force_conflicts=True)
    with pytest.raises(Fatal, match=r'turning speculation off failed: applying Deployment .* "kubectl-edit".*'
                                    r"the monitor never forces"):
        EngineExecutor(open_registry()).disable_speculation(STABLE, "acceptance collapsed")
    assert vllm_args(deployment(real_cluster, llm_ns, STABLE)) == edited


def test_promote_over_a_stable_another_manager_changed_is_a_conflict_with_the_way_out(spec, llm_ns, fake_kubelet,
                                                                                     real_cluster, tmp_path):
    """Faked: kubelet; the test writes Deployment status (FakeKubelet)."""
    from kubernetes.dynamic import DynamicClient

    from specops.k8s import promote

    deploy(in_ns(spec, llm_ns), tmp_path)
    deploy(in_ns(spec, llm_ns, name=CANARY, gamma=5), tmp_path, canary_of=STABLE)
    dyn = DynamicClient(real_cluster.api_client())
    res = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    dyn.server_side_apply(res, body={"apiVersion": "apps/v1", "kind": "Deployment",
                                     "metadata": {"name": STABLE, "namespace": llm_ns},
                                     "spec": {"template": {"spec": {"containers": [
                                         {"name": "vllm", "image": "vllm/vllm-openai:v0.33.1"}]}}}},
                          name=STABLE, namespace=llm_ns, field_manager="kubectl-set", force_conflicts=True)
    with pytest.raises(ConflictError, match=r'promoting .*"kubectl-set".*To fix: undo the other change to '
                                            rf"{STABLE}, or deploy the stable's spec again") as info:
        promote(CANARY, namespace=llm_ns, poll_s=0.05, timeout_s=30)
    assert info.value.managers == ["kubectl-set"]
    assert deployment(real_cluster, llm_ns, CANARY) is not None  # nothing deleted: the canary still serves
