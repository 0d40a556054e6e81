"""In-cluster monitor manifests: committed = rendered, valid against Kubernetes 1.33, least privilege."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import yaml

from specops.retrain.incluster import NEEDED, render_files, render_monitor_manifests

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests" / "monitor"


def test_committed_manifests_are_exactly_what_the_renderer_produces():
    for name, text in render_files().items():
        assert (MANIFESTS / name).read_text() == text, f"regenerate: python -m specops.retrain.incluster {MANIFESTS}"


def test_every_committed_object_validates_against_kubernetes_1_33_strictly():
    objs = [o for f in sorted(MANIFESTS.glob("*.yaml")) for o in yaml.safe_load_all(f.read_text()) if o]
    assert {o["kind"] for o in objs} == {"ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Deployment", "CronJob"}
    for o in objs:
        kubernetes_validate.validate(o, "1.33", strict=True)


def _role():
    return next(o for o in render_monitor_manifests() if o["kind"] == "Role")


def test_role_grants_exactly_the_listed_permissions_and_nothing_else():
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in _role()["rules"]:
        assert set(rule) <= {"apiGroups", "resources", "verbs", "resourceNames"}  # no nonResourceURLs
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                assert "*" not in (group, resource) and "*" not in rule["verbs"]
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    assert granted == {k: set(v) for k, v in NEEDED.items()}
    assert ("", "secrets") not in granted and ("", "pods/exec") not in granted


def test_lease_reads_and_updates_are_limited_to_the_monitors_own_lease():
    lease_rules = [r for r in _role()["rules"] if r["resources"] == ["leases"]]
    for r in lease_rules:
        if set(r["verbs"]) & {"get", "update"}:
            assert r["resourceNames"] == ["specops-monitor"]
        else:
            assert r["verbs"] == ["create"]  # create cannot be limited by name


def test_the_role_is_namespaced_and_bound_only_to_the_monitors_service_account():
    objs = {o["kind"]: o for o in render_monitor_manifests()}
    assert "ClusterRole" not in objs and "ClusterRoleBinding" not in objs
    binding = objs["RoleBinding"]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "specops-monitor"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "specops-monitor", "namespace": "specops"}]


def test_prometheus_credentials_come_from_a_secret_and_the_registry_url_from_the_configmap():
    objs = {o["kind"]: o for o in render_monitor_manifests()}
    for pod in (objs["Deployment"]["spec"]["template"]["spec"],
                objs["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]):
        (c,) = pod["containers"]
        env = {e["name"]: e for e in c["env"]}
        for var, key in (("SPECOPS_PROMETHEUS_URL", "url"), ("SPECOPS_PROMETHEUS_TOKEN", "token")):
            assert env[var]["valueFrom"]["secretKeyRef"] == {"name": "specops-prometheus", "key": key}
        assert c["envFrom"] == [{"configMapRef": {"name": "specops-monitor"}}]
        assert pod["serviceAccountName"] == "specops-monitor"
    assert objs["ConfigMap"]["data"]["SPECOPS_DB"].startswith("postgresql")
    assert ":" not in objs["ConfigMap"]["data"]["SPECOPS_DB"].split("//")[1].split("@")[0]  # no password
    assert objs["Deployment"]["spec"]["template"]["spec"]["containers"][0]["args"] == ["monitor"]
    assert objs["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "monitor", "--once"]
    assert objs["CronJob"]["spec"]["concurrencyPolicy"] == "Forbid"
