"""The in-cluster monitor's Lease and Role against a real kube-apiserver v1.20.2 (`make test-kube`).

Real: the API server's RBAC authorizer (SubjectAccessReview and every request below), its Lease
storage with optimistic concurrency (409 on a stale resourceVersion), server-side apply of the
monitor's manifests. The monitors act as the service account
``system:serviceaccount:specops-rbac:specops-monitor``, authenticated by a static token (no token
controller runs). Faked: the clock the two electors share (expiry is judged on the Lease's
renewTime, which the clock writes), and kubelet (the Deployment status of the engine the fallback
changes is written by the test, conftest.FakeKubelet).
"""

from __future__ import annotations

import pytest

from specops.drift.tracegen import FakeClock
from specops.k8s.leader import LeaseElector
from specops.retrain.incluster import NEEDED, MonitorManifestOptions, render_monitor_manifests
from tests.k8s.conftest import MONITOR_NS, MONITOR_SA, PLANTED_SECRET, FakeKubelet

pytestmark = pytest.mark.kube_apiserver

LEASE = MONITOR_SA  # the Role allows get/update on this Lease name only
SA_USER = f"system:serviceaccount:{MONITOR_NS}:{MONITOR_SA}"
SA_GROUPS = ["system:serviceaccounts", f"system:serviceaccounts:{MONITOR_NS}", "system:authenticated"]


@pytest.fixture(scope="module")
def monitor_ns(real_cluster):
    """Namespace specops-rbac with the monitor's manifests applied server-side (what 1.20 serves)
    and the Secrets the example engine spec references."""
    from kubernetes import client

    from specops.k8s.cluster import Cluster

    api = real_cluster.api_client()
    client.CoreV1Api(api).create_namespace({"metadata": {"name": MONITOR_NS}})
    for name, key in (("hf-token", "token"), ("llama70b-api-key", "api-key")):
        client.CoreV1Api(api).create_namespaced_secret(MONITOR_NS, {
            "metadata": {"name": name}, "stringData": {key: PLANTED_SECRET}})
    cluster = Cluster(api)
    applied, unserved = [], []
    for obj in render_monitor_manifests(MonitorManifestOptions(namespace=MONITOR_NS, name=MONITOR_SA)):
        if cluster.resource(obj["apiVersion"], obj["kind"]) is None:
            unserved.append(f"{obj['apiVersion']}/{obj['kind']}")
            continue
        cluster.apply(obj)
        applied.append(obj["kind"])
    return {"applied": applied, "unserved": unserved}


@pytest.fixture
def fresh_lease(real_cluster, monitor_ns):
    """No Lease yet (the admin deletes what an earlier test left: the Role allows one Lease name)."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    try:
        client.CoordinationV1Api(real_cluster.api_client()).delete_namespaced_lease(LEASE, MONITOR_NS)
    except ApiException as exc:
        if exc.status != 404:
            raise
    return LEASE


def sa_client(real_cluster):
    return real_cluster.api_client(real_cluster.identities["monitor"])


def allowed(real_cluster, verb: str, group: str, resource: str, *, name: str | None = None,
            namespace: str = MONITOR_NS) -> bool:
    from kubernetes import client

    attrs = {"namespace": namespace, "verb": verb, "group": group, "resource": resource}
    if name:
        attrs["name"] = name
    review = client.AuthorizationV1Api(real_cluster.api_client()).create_subject_access_review({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": SA_USER, "groups": SA_GROUPS, "resourceAttributes": attrs}})
    return bool(review.status.allowed)


def test_the_monitor_manifests_apply_server_side_except_the_cronjob_1_20_does_not_serve(monitor_ns):
    assert monitor_ns["applied"] == ["ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Deployment"]
    assert monitor_ns["unserved"] == ["batch/v1/CronJob"]  # batch/v1 CronJob is served from 1.21


def test_the_role_allows_what_its_table_names(real_cluster, monitor_ns):
    """The Role against the table it is rendered from (NEEDED); whether the table is what the monitor
    really calls is test_the_monitor_calls_exactly_what_the_role_grants below."""
    for (group, resource), verbs in NEEDED.items():
        for verb in verbs:
            name = LEASE if resource == "leases" and verb != "create" else None
            assert allowed(real_cluster, verb, group, resource, name=name), (verb, group, resource)


@pytest.mark.parametrize("verb,group,resource,name,namespace", [
    ("create", "apps", "deployments", None, MONITOR_NS),    # the monitor changes engines, never makes them
    ("list", "apps", "deployments", None, MONITOR_NS),      # engines are named in the registry
    ("create", "batch", "jobs", None, MONITOR_NS),          # retraining runs as a worker in the monitor's pod
    ("create", "", "configmaps", None, MONITOR_NS),
    ("update", "apps", "deployments", None, MONITOR_NS),    # apply is a patch
    ("delete", "apps", "deployments", None, MONITOR_NS),
    ("patch", "apps", "deployments", None, "default"),     # only its own namespace
    ("get", "", "secrets", None, MONITOR_NS),               # secrets come by reference, never read
    ("list", "", "secrets", None, MONITOR_NS),
    ("get", "", "pods", None, MONITOR_NS),
    ("patch", "", "services", None, MONITOR_NS),
    ("patch", "", "persistentvolumeclaims", None, MONITOR_NS),
    ("delete", "coordination.k8s.io", "leases", LEASE, MONITOR_NS),   # release is an update
    ("get", "coordination.k8s.io", "leases", "someone-elses-lease", MONITOR_NS),
    ("update", "coordination.k8s.io", "leases", "someone-elses-lease", MONITOR_NS),
    ("delete", "batch", "jobs", None, MONITOR_NS),
    ("update", "", "configmaps", None, MONITOR_NS),
    ("create", "rbac.authorization.k8s.io", "roles", None, MONITOR_NS),
])
def test_the_role_denies_what_the_monitor_does_not_need(real_cluster, monitor_ns, verb, group, resource, name,
                                                         namespace):
    assert not allowed(real_cluster, verb, group, resource, name=name, namespace=namespace)


def test_two_monitors_elect_one_leader_over_a_real_lease(real_cluster, fresh_lease):
    from kubernetes import client

    def lease() -> dict:
        return client.CoordinationV1Api(real_cluster.api_client()).read_namespaced_lease(LEASE, MONITOR_NS).spec

    clock = FakeClock()
    a, b = (LeaseElector(sa_client(real_cluster), MONITOR_NS, LEASE, who, clock=clock) for who in ("pod-a", "pod-b"))
    assert a.try_acquire_or_renew() and a.is_leader()          # create: the first one wins
    assert not b.try_acquire_or_renew() and b.holder == "pod-a"
    assert lease().holder_identity == "pod-a" and lease().lease_transitions == 0
    clock.sleep(5)
    assert a.try_acquire_or_renew()                              # renew by update
    assert not b.try_acquire_or_renew()
    clock.sleep(16)                                              # pod-a stops renewing: its lease expires
    assert b.try_acquire_or_renew() and b.is_leader() and not a.is_leader()
    assert lease().holder_identity == "pod-b" and lease().lease_transitions == 1
    assert not a.try_acquire_or_renew() and a.holder == "pod-b"
    assert b.release() and lease().holder_identity is None      # release: an update, no delete needed
    assert a.try_acquire_or_renew()                              # at once, no expiry wait
    assert lease().lease_transitions == 2
    a.release()


def test_a_lease_write_with_a_stale_resource_version_gets_409_and_does_not_lead(real_cluster, fresh_lease):
    clock = FakeClock()
    a, b = (LeaseElector(sa_client(real_cluster), MONITOR_NS, LEASE, who, clock=clock) for who in ("pod-a", "pod-b"))
    assert a.try_acquire_or_renew()
    stale = a.observed.raw                                       # pod-b read this ...
    clock.sleep(1)
    assert a.try_acquire_or_renew()                              # ... then pod-a renewed: a new resourceVersion
    assert b._replace(stale, {**stale["spec"], "holderIdentity": "pod-b"}) is None   # 409 from the real server
    assert a.release()


def test_the_monitors_fallback_on_kubernetes_needs_no_more_than_the_role(spec, real_cluster, monitor_ns, tmp_path):
    """Faked: kubelet; the test writes Deployment status (FakeKubelet) so the admin's deploy finishes."""
    import json

    from specops.drift.actions import EngineExecutor
    from specops.errors import InputError
    from specops.k8s import deploy_kubernetes
    from specops.registry import open_registry

    engine = spec.model_copy(update={"kubernetes": spec.kubernetes.model_copy(update={"namespace": MONITOR_NS})})
    with FakeKubelet(real_cluster, MONITOR_NS):
        deploy_kubernetes(engine, api_client=real_cluster.api_client(), out_dir=tmp_path, monitoring=False,
                          poll_s=0.05, timeout_s=30)
    reg = open_registry()
    EngineExecutor(reg, api_client=sa_client(real_cluster)).retune_gamma(engine.name, {"proposed": [[1, 1, 2]]})
    from kubernetes import client

    dep = client.AppsV1Api(real_cluster.api_client()).read_namespaced_deployment(engine.name, MONITOR_NS)
    args = dep.spec.template.spec.containers[0].args
    assert json.loads(args[args.index("--speculative-config") + 1])["num_speculative_tokens"] == 2
    assert reg.get_deployment(engine.name).num_speculative_tokens == 2
    # and the monitor's identity cannot deploy (create) anything
    with pytest.raises(InputError, match=r"refused to .*\(HTTP 403\)"):
        deploy_kubernetes(engine.model_copy(update={"name": "not-allowed"}), api_client=sa_client(real_cluster),
                          out_dir=tmp_path, monitoring=False, poll_s=0.05, timeout_s=5)


def _requests_of(api_client) -> list[tuple[str, str]]:
    """Spy on every HTTP request the client sends (method, path); they still go to the real server."""
    from urllib.parse import urlparse

    calls: list[tuple[str, str]] = []
    rest = api_client.rest_client
    send = rest.request

    def spy(method, url, *args, **kwargs):
        calls.append((method, urlparse(url).path))
        return send(method, url, *args, **kwargs)

    rest.request = spy
    return calls


def _rbac_verb(method: str, path: str) -> tuple[tuple[str, str], str] | None:
    """((group, resource), verb) of a namespaced resource request, as the RBAC authorizer names it; None
    for discovery (/api, /apis/<group>/<version> without a namespace)."""
    parts = path.strip("/").split("/")
    if "namespaces" not in parts or len(parts) <= parts.index("namespaces") + 2:
        return None
    group = "" if parts[0] == "api" else parts[1]
    rest = parts[parts.index("namespaces") + 2:]
    named = len(rest) > 1
    verb = {"GET": "get" if named else "list", "POST": "create", "PUT": "update", "PATCH": "patch",
            "DELETE": "delete" if named else "deletecollection"}[method.upper()]
    return (group, rest[0]), verb


def test_the_monitor_calls_exactly_what_the_role_grants(spec, real_cluster, monitor_ns, fresh_lease, tmp_path):
    """What the monitor's code really sends as the service account, recorded at the HTTP layer, against
    NEEDED (the table the Role is rendered from): the leader election's full cycle (create, renew,
    expiry takeover, release) and the fallback's γ retune. A verb the Role grants that no code path
    sends, or one sent that the table lacks, fails here. Faked: the electors' shared clock, and kubelet
    (FakeKubelet writes the admin's Deployment status)."""
    from specops.drift.actions import EngineExecutor
    from specops.k8s import deploy_kubernetes
    from specops.registry import open_registry

    engine = spec.model_copy(update={"name": "rbac-calls",
                                     "kubernetes": spec.kubernetes.model_copy(update={"namespace": MONITOR_NS})})
    with FakeKubelet(real_cluster, MONITOR_NS):
        deploy_kubernetes(engine, api_client=real_cluster.api_client(), out_dir=tmp_path, monitoring=False,
                          poll_s=0.05, timeout_s=30)
    api = sa_client(real_cluster)
    calls = _requests_of(api)
    clock = FakeClock()
    a, b = (LeaseElector(api, MONITOR_NS, LEASE, who, clock=clock) for who in ("pod-a", "pod-b"))
    assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    clock.sleep(5)
    assert a.try_acquire_or_renew()
    clock.sleep(16)
    assert b.try_acquire_or_renew() and b.release()
    EngineExecutor(open_registry(), api_client=api).retune_gamma(engine.name, {"proposed": [[1, 1, 2]]})
    used: dict[tuple[str, str], set[str]] = {}
    for method, path in calls:
        hit = _rbac_verb(method, path)
        if hit:
            assert f"/namespaces/{MONITOR_NS}/" in path, path  # only its own namespace
            used.setdefault(hit[0], set()).add(hit[1])
    assert used == {k: set(v) for k, v in NEEDED.items()}, used
