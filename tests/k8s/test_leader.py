"""Leader election over a coordination.k8s.io/v1 Lease (specops.k8s.leader), through the official
client against the kmock-emulated API with Lease semantics added by tests/k8s/lease_emulation.py
(PUT, resourceVersion, 409 Conflict / AlreadyExists). Time is a fake clock shared by the replicas.
The CLI tests run the real `specops monitor --once` in a subprocess with a kubeconfig pointing at the
emulator, over a real SQLite registry and tests/drift/fakeengine.py's /metrics."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specops.drift.tracegen import FakeClock
from specops.errors import InputError
from specops.k8s.leader import LeaderGate, LeaseElector, NoLeaderGate, leader_gate
from tests.conftest import REPO

pytestmark = pytest.mark.api_emulated

NS, LEASE = "specops", "specops-monitor"
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


@pytest.fixture(scope="module")
def cluster():
    from tests.k8s.lease_emulation import LeaseCluster

    c = LeaseCluster().start()
    c.add_namespace(NS)
    yield c
    c.stop()


@pytest.fixture
def lease_name(request):
    """A fresh Lease per test (the emulated cluster is shared by the module)."""
    return re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:60].strip("-")


def _electors(cluster, name, *identities, clock=None):
    clock = clock or FakeClock()
    return clock, [LeaseElector(cluster.api_client(), NS, name, i, clock=clock) for i in identities]


def test_the_first_replica_creates_the_lease_and_the_second_sees_its_holder(cluster, lease_name):
    _, (a, b) = _electors(cluster, lease_name, "pod-a", "pod-b")
    assert a.try_acquire_or_renew() and a.is_leader()
    assert not b.try_acquire_or_renew() and not b.is_leader() and b.holder == "pod-a"
    spec = cluster.lease(NS, lease_name)["spec"]
    assert spec["holderIdentity"] == "pod-a" and spec["leaseDurationSeconds"] == 15 and spec["leaseTransitions"] == 0
    assert MICRO_TIME.match(spec["renewTime"]) and spec["acquireTime"] == spec["renewTime"]


def test_the_holder_renews_while_the_other_replica_waits(cluster, lease_name):
    clock, (a, b) = _electors(cluster, lease_name, "pod-a", "pod-b")
    a.try_acquire_or_renew()
    first = cluster.lease(NS, lease_name)
    for _ in range(6):  # 30 s, twice the lease, renewed every 5 s
        clock.sleep(5)
        assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()
    now = cluster.lease(NS, lease_name)
    assert now["spec"]["holderIdentity"] == "pod-a" and now["spec"]["leaseTransitions"] == 0
    assert now["spec"]["acquireTime"] == first["spec"]["acquireTime"]
    assert now["spec"]["renewTime"] > first["spec"]["renewTime"]
    assert int(now["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])


def test_a_lease_left_unrenewed_is_taken_over_once_it_expires(cluster, lease_name):
    clock, (a, b) = _electors(cluster, lease_name, "pod-a", "pod-b")
    a.try_acquire_or_renew()  # then pod-a stops renewing (hung or partitioned)
    clock.sleep(10)
    assert not a.is_leader()  # its renew deadline passed: it stops acting ...
    clock.sleep(4.9)
    assert not b.try_acquire_or_renew()  # ... before the lease can expire for the others
    clock.sleep(0.1)
    assert b.try_acquire_or_renew() and b.is_leader()
    spec = cluster.lease(NS, lease_name)["spec"]
    assert spec["holderIdentity"] == "pod-b" and spec["leaseTransitions"] == 1 and spec["acquireTime"] == spec["renewTime"]
    assert not a.try_acquire_or_renew() and a.holder == "pod-b"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.one_of(st.tuples(st.just("round"), st.integers(0, 2)),
                                st.tuples(st.just("release"), st.integers(0, 2)),
                                st.tuples(st.just("wait"), st.sampled_from([0.5, 2, 4.9, 5, 9.9, 10, 14.9, 15, 20]))),
                      max_size=30))
def test_at_most_one_replica_leads_at_any_moment(cluster, steps):
    """Any interleaving of rounds, releases and pauses (a replica that never gets a round is hung)."""
    import uuid

    clock, electors = _electors(cluster, f"prop-{uuid.uuid4().hex[:10]}", "pod-a", "pod-b", "pod-c")
    for op, arg in steps:
        if op == "round":
            electors[arg].try_acquire_or_renew()
        elif op == "release":
            electors[arg].release()
        else:
            clock.sleep(arg)
        assert sum(e.is_leader() for e in electors) <= 1
    clock.sleep(16)  # whatever happened, a live replica gets the lease once it expired
    assert electors[0].try_acquire_or_renew()


def test_a_write_that_loses_the_race_gets_409_and_does_not_lead(cluster, lease_name):
    clock, (a, b) = _electors(cluster, lease_name, "pod-a", "pod-b")
    a.try_acquire_or_renew()
    clock.sleep(20)

    def pod_c_first(server):  # pod-c's takeover lands between pod-b's read and its write
        lease = server.leases[(NS, lease_name)]
        spec = {**lease["spec"], "holderIdentity": "pod-c", "renewTime": "2026-01-01T00:00:20.000000Z"}
        server.store(NS, {**lease, "spec": spec}, create=False)

    cluster.before_next_lease_write(pod_c_first)
    assert not b.try_acquire_or_renew() and not b.is_leader()
    assert cluster.lease(NS, lease_name)["spec"]["holderIdentity"] == "pod-c"  # pod-b overwrote nothing
    methods = [m for m, path, _ in cluster.requests() if path.endswith(f"/leases/{lease_name}")]
    assert methods[-2:] == ["GET", "PUT"]


def test_a_create_that_loses_the_race_gets_409_and_does_not_lead(cluster, lease_name):
    _, (b,) = _electors(cluster, lease_name, "pod-b")
    cluster.before_next_lease_write(lambda server: server.store(NS, {
        "metadata": {"name": lease_name},
        "spec": {"holderIdentity": "pod-c", "leaseDurationSeconds": 15,
                 "renewTime": "2026-01-01T00:00:00.000000Z"}}, create=True))
    assert not b.try_acquire_or_renew() and not b.is_leader()
    assert cluster.lease(NS, lease_name)["spec"]["holderIdentity"] == "pod-c"


def test_release_lets_the_other_replica_take_over_at_once(cluster, lease_name):
    _, (a, b) = _electors(cluster, lease_name, "pod-a", "pod-b")
    a.try_acquire_or_renew()
    assert not b.release()  # not the holder: nothing to give up
    assert a.release() and not a.is_leader()
    spec = cluster.lease(NS, lease_name)["spec"]
    assert "holderIdentity" not in spec and spec["leaseDurationSeconds"] == 1
    assert b.try_acquire_or_renew()  # same instant, no expiry wait
    assert cluster.lease(NS, lease_name)["spec"]["leaseTransitions"] == 1


def test_the_elector_uses_only_what_the_monitor_role_grants(cluster, lease_name):
    from specops.retrain.incluster import NEEDED, MonitorManifestOptions, role

    clock, (a, b) = _electors(cluster, lease_name, "pod-a", "pod-b")
    before = len(cluster.requests())
    a.try_acquire_or_renew()
    clock.sleep(5)
    a.try_acquire_or_renew()
    b.try_acquire_or_renew()
    a.release()
    b.try_acquire_or_renew()
    clock.sleep(20)
    a.try_acquire_or_renew()
    lease_requests = [(m, p) for m, p, _ in cluster.requests()[before:] if "/leases" in p]
    verbs = {("GET", True): "get", ("PUT", True): "update", ("POST", False): "create"}
    used = {verbs[(str(getattr(m, "value", m)), p.endswith(f"/leases/{lease_name}"))] for m, p in lease_requests}
    assert used == set(NEEDED[("coordination.k8s.io", "leases")]) == {"create", "get", "update"}
    rules = role(MonitorManifestOptions(namespace=NS, name=lease_name))["rules"]
    named = [r for r in rules if r["resources"] == ["leases"] and r.get("resourceNames") == [lease_name]]
    assert named and set(named[0]["verbs"]) == {"get", "update"}  # the named-lease verbs


def test_a_failing_api_keeps_the_leader_only_until_its_renew_deadline(cluster, lease_name):
    clock, (a,) = _electors(cluster, lease_name, "pod-a")
    gate = LeaderGate(a)
    assert gate.is_leader()
    cluster.fail_lease_requests(500, times=2)
    clock.sleep(5)
    assert gate.is_leader()  # the renew failed, but within the deadline
    clock.sleep(5)
    assert not gate.is_leader()
    assert gate.status() == (f"not the leader: cannot use the lease (GET lease {NS}/{lease_name} answered 500); "
                             "observing only, no actions")
    clock.sleep(2)  # the API is back before the lease expired for the others: the same holder renews
    assert gate.is_leader() and gate.status() == f"leader: lease {NS}/{lease_name} held by this replica (pod-a)"


def test_a_forbidden_lease_says_what_the_role_must_grant(cluster, lease_name):
    _, (a,) = _electors(cluster, lease_name, "pod-a")
    cluster.fail_lease_requests(403)
    gate = LeaderGate(a)
    assert not gate.is_leader()
    assert f"answered 403: the Role must grant get/update on lease {lease_name} and create on leases" in gate.status()


def test_the_gate_asks_the_api_at_most_once_per_retry_period(cluster, lease_name):
    clock, (a, b) = _electors(cluster, lease_name, "pod-a", "pod-b")
    a.try_acquire_or_renew()
    gate = LeaderGate(b, retry_period_s=2)
    before = len(cluster.requests())
    assert [gate.is_leader() for _ in range(5)] == [False] * 5
    assert len(cluster.requests()) - before == 1  # one GET; the holder is alive
    clock.sleep(2)
    gate.is_leader()
    assert len(cluster.requests()) - before == 2
    assert gate.status() == f"not the leader: lease {NS}/{lease_name} is held by pod-a; observing only, no actions"


def test_closing_the_gate_releases_the_lease(cluster, lease_name):
    _, (a,) = _electors(cluster, lease_name, "pod-a")
    gate = LeaderGate(a).start()  # with the background keeper
    assert gate.is_leader()
    gate.close()
    assert not a.is_leader() and "holderIdentity" not in cluster.lease(NS, lease_name)["spec"]


# --- settings ------------------------------------------------------------------------------------

def test_without_a_lease_setting_the_gate_always_leads_and_kubernetes_is_not_imported():
    code = ("import sys; from specops.k8s.leader import leader_gate; g = leader_gate(); "
            "print(type(g).__name__, g.is_leader(), 'kubernetes' in sys.modules)")
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("SPECOPS_LEADER")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(REPO), env=env)
    assert out.stdout.split() == ["NoLeaderGate", "True", "False"], out.stderr
    assert isinstance(leader_gate(), NoLeaderGate)


@pytest.mark.parametrize("env, match", [
    ({"SPECOPS_LEADER_LEASE": "Specops_Monitor", "SPECOPS_NAMESPACE": NS}, "is not a valid Lease name"),
    ({"SPECOPS_LEADER_LEASE": LEASE}, "the namespace of the lease is unknown"),
    ({"SPECOPS_LEADER_LEASE": LEASE, "SPECOPS_NAMESPACE": NS, "SPECOPS_LEADER_LEASE_SECONDS": "1"}, "too short"),
    ({"SPECOPS_LEADER_LEASE": LEASE, "SPECOPS_NAMESPACE": NS, "SPECOPS_LEADER_LEASE_SECONDS": "15.5"}, "whole number"),
])
def test_bad_lease_settings_are_refused_with_a_fix(monkeypatch, env, match):
    monkeypatch.delenv("SPECOPS_NAMESPACE", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(InputError, match=match):
        leader_gate()


def test_the_settings_name_the_lease_namespace_and_identity(cluster, monkeypatch, lease_name):
    for k, v in {"SPECOPS_LEADER_LEASE": lease_name, "SPECOPS_NAMESPACE": NS, "SPECOPS_POD_NAME": "pod-x",
                 "SPECOPS_LEADER_LEASE_SECONDS": "30"}.items():
        monkeypatch.setenv(k, v)
    gate = leader_gate(api_client=cluster.api_client(), clock=FakeClock())
    assert gate.is_leader() and gate.lease == f"{NS}/{lease_name}"
    spec = cluster.lease(NS, lease_name)["spec"]
    assert spec["holderIdentity"] == "pod-x" and spec["leaseDurationSeconds"] == 30
    assert gate.elector.renew_deadline_s == 20 and gate.retry_period_s == 4


# --- the CLI -------------------------------------------------------------------------------------

@pytest.fixture
def engine():
    from tests.drift.fakeengine import FakeEngine

    e = FakeEngine()
    yield e
    e.close()


@pytest.fixture
def fleet(tmp_path, engine):
    from specops.registry import open_registry
    from tests.drift.wiring import make_fleet

    with open_registry() as reg:
        return make_fleet(reg, tmp_path, engine.url)


@pytest.fixture
def swapped(fleet, engine, cli):
    """A deployment with a recorded baseline whose target was then swapped: the policy will act."""
    from tests.drift.wiring import swap_folder

    for _ in range(2):
        engine.advance(500, 0.7)
        assert cli("monitor", "--once", "--record-baseline").returncode == 0
    swap_folder(fleet["v2"], fleet["served"])
    engine.advance(500, 0.1)
    return fleet


@pytest.fixture
def kube_env(cluster, tmp_path, lease_name):
    import yaml

    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "emu",
        "clusters": [{"name": "emu", "cluster": {"server": cluster.url}}],
        "users": [{"name": "monitor", "user": {"token": "test-token"}}],
        "contexts": [{"name": "emu", "context": {"cluster": "emu", "user": "monitor", "namespace": NS}}]}))
    return {"KUBECONFIG": str(path), "SPECOPS_LEADER_LEASE": lease_name, "SPECOPS_NAMESPACE": NS,
            "SPECOPS_POD_NAME": "monitor-7d9f-abcde"}


def test_monitor_once_in_a_replica_that_does_not_lead_observes_and_takes_no_actions(cli, swapped, cluster, kube_env,
                                                                                     lease_name):
    from datetime import datetime, timezone

    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    cluster.write_lease(NS, lease_name, {"holderIdentity": "monitor-7d9f-leader", "leaseDurationSeconds": 3600,
                                         "renewTime": now, "acquireTime": now, "leaseTransitions": 0})
    r = cli("monitor", "--once", "--dry-run", "--output", "json", env=kube_env)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["leader"] is False and report["actions"] == []
    assert any(f["code"] == "CHANGED_MODEL" for f in report["findings"])  # it still observed the swap
    assert f"not the leader: lease {NS}/{lease_name} is held by monitor-7d9f-leader; observing only, no actions" \
        in report["notes"]
    assert cluster.lease(NS, lease_name)["spec"]["holderIdentity"] == "monitor-7d9f-leader"  # untouched


def test_monitor_once_takes_a_free_lease_acts_and_releases_it(cli, swapped, cluster, kube_env, lease_name):
    r = cli("monitor", "--once", "--dry-run", env=kube_env)
    assert r.returncode == 0, r.stderr
    assert "action open_retraining on chat (retrain-stale-draft, CHANGED_MODEL): dry-run" in r.stdout
    assert "not the leader" not in r.stdout
    spec = cluster.lease(NS, lease_name)["spec"]
    assert "holderIdentity" not in spec and spec["leaseTransitions"] == 0  # created by it, released at exit
    auth = cluster._call(lambda: {r.headers.get("Authorization") for r in list(cluster.km)
                                  if r.url.path.endswith(f"/leases/{lease_name}")})
    assert auth == {"Bearer test-token"}  # the kubeconfig's credentials reach the lease requests


def test_monitor_with_a_lease_but_no_cluster_is_one_line_with_a_fix(cli, tmp_path):
    r = cli("monitor", "--once", env={"SPECOPS_LEADER_LEASE": LEASE, "SPECOPS_NAMESPACE": NS,
                                      "KUBECONFIG": str(tmp_path / "missing"), "KUBERNETES_SERVICE_HOST": ""})
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith("error: SPECOPS_LEADER_LEASE is set but no usable Kubernetes credentials")
    assert "To fix: run inside the cluster" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_the_monitor_loop_serves_its_leadership_on_the_metrics_port_and_releases_on_sigterm(
        fleet, cluster, kube_env, lease_name):
    """SPECOPS_METRICS_PORT and the lease settings come from the environment, as in the manifests."""
    import os
    import signal
    import socket
    import time

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, **kube_env, "SPECOPS_METRICS_PORT": str(port), "SPECOPS_INTERVAL": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "specops", "monitor", "--dry-run"], cwd=str(REPO), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    text, deadline = "", time.monotonic() + 60
    try:
        while "specops_monitor_is_leader 1.0" not in text and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
            try:
                text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
            except httpx.HTTPError:
                continue
        assert "specops_monitor_is_leader 1.0" in text, proc.stderr.read() if proc.poll() is not None else text
        assert cluster.lease(NS, lease_name)["spec"]["holderIdentity"] == "monitor-7d9f-abcde"
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert f"leader lease {NS}/{lease_name} as monitor-7d9f-abcde" in err
    assert "holderIdentity" not in cluster.lease(NS, lease_name)["spec"]  # released on the way out


def test_a_replica_that_does_not_lead_stores_no_windows_and_no_baselines(cli, fleet, engine, cluster, kube_env,
                                                                        lease_name):
    from datetime import datetime, timezone

    from specops.drift.store import HistoryStore
    from specops.registry import open_registry

    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    cluster.write_lease(NS, lease_name, {"holderIdentity": "monitor-7d9f-leader", "leaseDurationSeconds": 3600,
                                         "renewTime": now, "acquireTime": now, "leaseTransitions": 0})
    for _ in range(3):
        engine.advance(500, 0.7)
        r = cli("monitor", "--once", "--record-baseline", env=kube_env)
        assert r.returncode == 0 and "baseline recorded" not in r.stdout, (r.stdout, r.stderr)
    with open_registry() as reg:
        store = HistoryStore(reg)
        assert store.history("chat", since=0) == [] and store.baselines(["chat"]) == {}
    cluster.write_lease(NS, lease_name, {"leaseDurationSeconds": 1, "renewTime": now, "leaseTransitions": 0})
    engine.advance(500, 0.7)
    assert cli("monitor", "--once", "--record-baseline", env=kube_env).returncode == 0  # now it leads
    with open_registry() as reg:
        assert len(HistoryStore(reg).history("chat", since=0)) == 1
