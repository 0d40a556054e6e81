"""Rendering and offline validation of the Kubernetes manifests (no cluster involved)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from specops.errors import InputError
from specops.k8s import AlertThresholds, render_manifests, write_manifests
from specops.k8s.validate import validate_object

REPO = Path(__file__).resolve().parents[2]


def by_kind(objs: list[dict]) -> dict[str, dict]:
    return {o["kind"]: o for o in objs}


def test_eagle31_turboquant_70b_plan_renders_objects_that_pass_the_1_33_schemas(spec):
    objs = render_manifests(spec)
    assert [o["kind"] for o in objs] == ["PersistentVolumeClaim", "Deployment", "Service", "PodMonitor",
                                         "PrometheusRule"]
    for obj in objs:  # re-validate independently of render_manifests
        validate_object(obj)
    import kubernetes_validate

    for obj in objs[:3]:
        kubernetes_validate.validate(obj, "1.33", strict=True)


def test_deployment_runs_vllm_serve_pinned_to_the_version_and_revisions(spec):
    dep = by_kind(render_manifests(spec))["Deployment"]
    pod = dep["spec"]["template"]["spec"]
    main = pod["containers"][0]
    assert main["image"] == "vllm/vllm-openai:v0.33.0"
    assert main["command"] == ["vllm", "serve"]
    args = main["args"]
    assert args[0] == "meta-llama/Llama-3.3-70B-Instruct"
    assert args[args.index("--revision") + 1] == spec.target.revision
    assert args[args.index("--tensor-parallel-size") + 1] == "4"
    assert args[args.index("--max-model-len") + 1] == "8192"
    assert args[args.index("--kv-cache-dtype") + 1] == "turboquant_k8v4"
    assert args[args.index("--host") + 1] == "0.0.0.0"
    sc = json.loads(args[args.index("--speculative-config") + 1])
    assert sc == {"method": "eagle3", "model": spec.draft.model, "revision": spec.draft.revision,
                  "num_speculative_tokens": 3}
    assert main["resources"]["limits"] == {"nvidia.com/gpu": "4"}
    prefetch = {c["name"]: c["command"] for c in pod["initContainers"]}
    assert prefetch["prefetch-target"] == ["hf", "download", spec.target.model, "--revision", spec.target.revision]
    assert prefetch["prefetch-draft"] == ["hf", "download", spec.draft.model, "--revision", spec.draft.revision]


def test_deployment_has_probes_shm_cache_claim_and_runs_as_non_root(spec):
    dep = by_kind(render_manifests(spec))["Deployment"]
    pod = dep["spec"]["template"]["spec"]
    main = pod["containers"][0]
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert main[probe]["httpGet"] == {"path": "/health", "port": "http"}
    startup = main["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 1800  # room for a 70B load
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["dshm"]["emptyDir"]["medium"] == "Memory"
    assert volumes["model-cache"]["persistentVolumeClaim"]["claimName"] == "llama70b-eagle31-model-cache"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert main["securityContext"]["allowPrivilegeEscalation"] is False
    assert dep["spec"]["strategy"]["type"] == "Recreate"  # one replica on a ReadWriteOnce claim


def test_secrets_are_referenced_by_secret_key_ref_only(spec):
    env = {e["name"]: e for e in by_kind(render_manifests(spec))["Deployment"]["spec"]["template"]["spec"]
           ["containers"][0]["env"]}
    assert env["VLLM_API_KEY"] == {"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {
        "name": "llama70b-api-key", "key": "api-key"}}}
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "hf-token", "key": "token"}
    assert "value" not in env["VLLM_API_KEY"] and "value" not in env["HF_TOKEN"]


def test_an_api_key_from_an_environment_variable_is_refused_on_kubernetes(spec):
    local_key = spec.model_copy(update={"serve": spec.serve.model_copy(update={
        "api_key": spec.serve.api_key.model_copy(update={"secret": None, "env": "VLLM_API_KEY"})})})
    with pytest.raises(InputError, match="must come from a Secret") as err:
        render_manifests(local_key)
    assert "To fix:" in err.value.one_line()


def test_service_selects_the_app_label_shared_with_canaries_and_labels_are_set(spec):
    objs = by_kind(render_manifests(spec))
    dep, svc = objs["Deployment"], objs["Service"]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/name"] == "llama70b-eagle31"
    assert labels["specops.io/deployment"] == "llama70b-eagle31"
    assert labels["specops.io/role"] == "stable"
    assert svc["spec"]["selector"] == {"app.kubernetes.io/name": "llama70b-eagle31",
                                       "app.kubernetes.io/managed-by": "specops"}
    canary = by_kind(render_manifests(spec.model_copy(update={"name": "llama70b-eagle31-k5"}),
                                      canary_of="llama70b-eagle31", replicas=2))
    assert set(canary) == {"Deployment", "PersistentVolumeClaim"}  # shares the stable's Service and monitor
    cdep = canary["Deployment"]
    clabels = cdep["spec"]["template"]["metadata"]["labels"]
    assert all(clabels[k] == v for k, v in svc["spec"]["selector"].items())
    assert clabels["specops.io/deployment"] == "llama70b-eagle31-k5"
    assert clabels["specops.io/role"] == "canary"
    assert cdep["spec"]["replicas"] == 2
    assert cdep["spec"]["selector"]["matchLabels"] != dep["spec"]["selector"]["matchLabels"]
    assert canary["PersistentVolumeClaim"]["spec"]["accessModes"] == ["ReadWriteMany"]  # 2 replicas share it


def test_a_canary_serves_the_stables_model_name_by_default(spec):
    plain = spec.model_copy(update={"name": "llama70b-k5", "serve": spec.serve.model_copy(
        update={"served_model_name": None})})
    args = by_kind(render_manifests(plain, canary_of="llama70b-eagle31"))["Deployment"]["spec"]["template"][
        "spec"]["containers"][0]["args"]
    assert args[args.index("--served-model-name") + 1] == "llama70b-eagle31"


def test_pod_monitor_relabels_the_deployment_label_into_specops_deployment(spec):
    pm = by_kind(render_manifests(spec))["PodMonitor"]
    relabels = pm["spec"]["podMetricsEndpoints"][0]["relabelings"]
    assert {"sourceLabels": ["__meta_kubernetes_pod_label_specops_io_deployment"],
            "targetLabel": "specops_deployment", "action": "replace"} in relabels
    assert pm["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] == "llama70b-eagle31"


def test_prometheus_rule_alerts_on_acceptance_rate_and_tpot_per_deployment(spec):
    rule = by_kind(render_manifests(spec, thresholds={"min_acceptance_rate": 0.55, "max_tpot_seconds": 0.05}))[
        "PrometheusRule"]  # an explicit warning threshold overrides the one from the spec's expectations
    rules = {r["alert"]: r for r in rule["spec"]["groups"][0]["rules"]}
    acc = rules["SpecopsLowAcceptanceRate"]["expr"]
    assert "vllm:spec_decode_num_accepted_tokens_total" in acc and "vllm:spec_decode_num_draft_tokens_total" in acc
    assert "by (namespace, specops_deployment)" in acc and acc.rstrip().endswith("< 0.55")
    tpot = rules["SpecopsHighTPOT"]["expr"]
    assert "histogram_quantile(0.9" in tpot and "vllm:request_time_per_output_token_seconds_bucket" in tpot
    assert "specops_deployment" in tpot and tpot.rstrip().endswith("> 0.05")
    assert rules["SpecopsAcceptanceBelowBreakEven"]["expr"].rstrip().endswith(
        f"< {spec.expectations.break_even_acceptance_rate}")
    assert AlertThresholds().min_acceptance_rate is None  # no number for every method and γ


def test_a_bad_gpu_resource_name_is_an_input_error(spec):
    bad = spec.model_copy(update={"kubernetes": spec.kubernetes.model_copy(update={"gpu_resource": "gpu"})})
    with pytest.raises(InputError, match="not an extended resource name"):
        render_manifests(bad)


def test_a_hub_model_without_a_revision_is_refused(spec):
    unpinned = spec.model_copy(update={"draft": spec.draft.model_copy(update={"revision": None})})
    with pytest.raises(InputError, match="draft.revision is not set"):
        render_manifests(unpinned)


def test_a_schema_violation_from_the_spec_names_the_field(spec):
    bad = spec.model_copy(update={"kubernetes": spec.kubernetes.model_copy(update={
        "tolerations": [{"key": "nvidia.com/gpu", "operatorr": "Exists"}]})})
    with pytest.raises(InputError, match=r"tolerations\.0.*operatorr") as err:
        render_manifests(bad)
    assert "To fix:" in err.value.one_line()


def test_kserve_llm_inference_service_carries_the_speculator_block(spec):
    with_kserve = spec.model_copy(update={"kubernetes": spec.kubernetes.model_copy(update={"kserve": True})})
    isvc = by_kind(render_manifests(with_kserve))["LLMInferenceService"]
    assert isvc["apiVersion"] == "serving.kserve.io/v1alpha2"
    assert isvc["spec"]["speculator"] == {"config": {"method": "eagle3", "num_speculative_tokens": 3},
                                         "model": {"uri": "hf://" + spec.draft.model}}


def test_write_manifests_writes_one_file_per_object_and_a_kustomization(spec, tmp_path):
    objs = render_manifests(spec)
    paths = write_manifests(objs, tmp_path)
    folder = tmp_path / "llama70b-eagle31"
    assert all(p.parent == folder for p in paths)
    kust = yaml.safe_load((folder / "kustomization.yaml").read_text())
    assert kust["resources"] == [p.name for p in paths[:-1]]
    assert [yaml.safe_load(p.read_text()) for p in paths[:-1]] == objs
    (folder / "llminferenceservice.yaml").write_text("# Rendered by specops from the deployment spec; edit the "
                                                     "spec, not this file.\nkind: stale\n")
    write_manifests(objs, tmp_path)
    assert not (folder / "llminferenceservice.yaml").exists()


def test_the_committed_example_manifests_are_what_specops_renders(spec, tmp_path):
    write_manifests(render_manifests(spec), tmp_path)
    committed = REPO / "manifests" / "llama70b-eagle31"
    fresh = tmp_path / "llama70b-eagle31"
    assert sorted(p.name for p in committed.glob("*.yaml")) == sorted(p.name for p in fresh.glob("*.yaml"))
    for path in fresh.glob("*.yaml"):
        assert (committed / path.name).read_text() == path.read_text(), (
            f"manifests/llama70b-eagle31/{path.name} is stale: regenerate it (see manifests/README.md)")
