"""What only an emulated API can show: kept here, everything else runs against a real kube-apiserver
1.20 (test_real_apiserver*.py, `make test-kube`).

- an API that answers 404 to the server-side apply of a new object (kmock; some proxies' apply
  paths): specops then creates it. A real server creates on the first apply, so this path is never
  taken there;
- the request log: "nothing is applied before every check passed" counted as zero write requests
  (the real-server tests can only see that no object exists or changed).

API emulated: kmock's KubernetesEmulator, served over HTTP on 127.0.0.1 (tests/k8s/emulator.py lists
what it adds: generation bookkeeping, list kinds, namespace GETs, and a stand-in Deployment
controller that sets status). The client side is real: the official client, its dynamic client,
HTTP, JSON.
"""

from __future__ import annotations

import pytest

from specops.errors import InputError
from specops.k8s import deploy_kubernetes
from tests.k8s.conftest import BREAKAGES, broken

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


def test_a_canary_without_its_stable_is_refused_before_anything_is_applied(spec, kube, tmp_path):
    with pytest.raises(InputError, match="no specops-managed stable Deployment"):
        deploy(canary_spec(spec), kube, tmp_path, canary_of=STABLE)
    assert writes(kube) == []


@pytest.mark.parametrize("breakage, message", BREAKAGES)
def test_invalid_cluster_input_is_one_line_with_a_fix_and_nothing_is_applied(spec, kube, tmp_path, breakage,
                                                                              message):
    spec = broken(spec, breakage)
    if breakage == "collision":
        kube.add_object("v1/services", "llm", {"apiVersion": "v1", "kind": "Service", "metadata": {
            "name": STABLE, "namespace": "llm", "labels": {"app": "someone-else"}}, "spec": {"ports": []}})
    with pytest.raises(InputError, match=message) as err:
        deploy(spec, kube, tmp_path)
    line = err.value.one_line()
    assert "\n" not in line and "To fix:" in line and err.value.exit_code == 2
    assert writes(kube) == []
    assert not (tmp_path / STABLE).exists()


