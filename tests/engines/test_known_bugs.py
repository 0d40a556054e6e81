"""Known-bug rows (playbooks/vllm/capabilities.csv) applied to launches: refuse, mitigate, warn, "may
apply"; the same rows in recommend, deploy and the gate. Real CSV, real renderer, real CLI
subprocesses; nothing is faked (hub ids are only rendered, never downloaded)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import yaml

from specops.capabilities import default_table
from specops.engines import local
from specops.engines.argv import LaunchConfig, render_args
from specops.engines.bugs import architecture_of_config, architecture_of_model, audit, known_bugs
from specops.errors import CapabilityError
from tests.conftest import TINY_MODELS

ADDED_ROWS = (
    ("method", "step5_mtp"), ("field", "disable_lookahead_block_hashes"), ("field", "draft_lm_head_quantization"),
    ("field", "xpress_topc"), ("field", "fly_window_size"), ("flag", "--per-request-spec-decode-metrics"),
)


def _eagle3(**kw) -> LaunchConfig:
    return LaunchConfig(model="meta-llama/Llama-3.1-8B-Instruct", method="eagle3", draft_model="org/eagle3",
                        num_speculative_tokens=3, **kw)


def _bug(fragment: str):
    return next(r for r in default_table().rows if r.kind == "bug" and fragment in r.name)


def test_the_new_rows_exist_with_evidence_and_the_turboquant_row_mitigates_with_enforce_eager():
    table = default_table()
    for kind, name in ADDED_ROWS:
        row = table.lookup(kind, name)
        assert row is not None and row.present_in((0, 33, 0)) and "0.33" in row.evidence, name
    tq = _bug("#40831")
    assert tq.effect == "mitigate" and tq.mitigation == ("--enforce-eager",)
    assert "turboquant_attn.py" in tq.evidence and "#53406" in tq.name and tq.last is None
    assert _bug("#47194").effect == "mitigate" and "#57128" in _bug("#47194").evidence


@pytest.mark.parametrize("method", ["eagle3", "ngram", "mtp"])
def test_turboquant_with_any_speculation_is_rendered_eager_with_a_warning_naming_the_issue(method):
    kw = {"draft_model": "org/d"} if method == "eagle3" else {}
    cfg = LaunchConfig(model="m", method=method, num_speculative_tokens=3, kv_cache_dtype="turboquant_k8v4", **kw)
    assert "--enforce-eager" in render_args(cfg)
    report = known_bugs(cfg)
    [w] = [w for w in report.warnings() if "vllm#40831" in w]
    assert "0.20.0 and later" in w and "mitigated with --enforce-eager" in w
    assert "--enforce-eager" not in render_args(cfg.model_copy(update={"kv_cache_dtype": "fp8"}))
    assert "--enforce-eager" not in render_args(cfg.model_copy(update={"method": "none", "draft_model": None,
                                                                       "num_speculative_tokens": None}))
    assert render_args(cfg.model_copy(update={"enforce_eager": True})).count("--enforce-eager") == 1


def test_turboquant_before_it_existed_is_refused_by_the_capability_table_not_mitigated():
    with pytest.raises(CapabilityError, match="not available in vLLM 0.19.0"):
        render_args(_eagle3(kv_cache_dtype="turboquant_k8v4", vllm_version="0.19.0"))


def test_hybrid_mtp_with_prefix_caching_gets_no_enable_prefix_caching_and_unknown_architecture_may_apply():
    hybrid = LaunchConfig(model="m", method="mtp", architecture="hybrid")
    assert render_args(hybrid)[-1] == "--no-enable-prefix-caching"
    on = hybrid.model_copy(update={"extra_args": ["--enable-prefix-caching"]})
    assert "--enable-prefix-caching" not in render_args(on) and "--no-enable-prefix-caching" in render_args(on)
    assert "--no-enable-prefix-caching" not in render_args(hybrid.model_copy(update={"architecture": "dense"}))
    unknown = hybrid.model_copy(update={"architecture": None})
    assert "--no-enable-prefix-caching" not in render_args(unknown)  # never mitigated blindly ...
    may = [w for w in known_bugs(unknown).warnings() if "vllm#43559" in w]
    assert may and "may apply (architecture unknown)" in may[0]  # ... never skipped silently
    # before 0.28.0 prefix caching was opt-in for hybrid models: nothing to mitigate
    assert "--no-enable-prefix-caching" not in render_args(hybrid.model_copy(update={"vllm_version": "0.27.1"}))


def test_a_draft_that_would_inherit_fp8_kv_keeps_auto_from_0_26_and_is_warned_about_before():
    sc = json.loads(render_args(_eagle3(kv_cache_dtype="fp8"))[-1])
    assert sc["kv_cache_dtype"] == "auto"
    explicit = json.loads(render_args(_eagle3(kv_cache_dtype="fp8", draft_kv_cache_dtype="auto"))[-1])
    assert explicit["kv_cache_dtype"] == "auto"
    old = _eagle3(kv_cache_dtype="fp8", vllm_version="0.25.0")
    assert "kv_cache_dtype" not in json.loads(render_args(old)[-1])
    assert any("cannot be set apart before 0.26.0" in w for w in known_bugs(old).warnings())


def test_a_refuse_row_stops_the_render_for_every_caller():
    with pytest.raises(CapabilityError, match=r"vllm#21177.*0\.8\.5–0\.10\.2"):
        render_args(_eagle3(kv_cache_dtype="fp8", vllm_version="0.10.2"))


def test_dropped_schedules_are_warned_about_under_data_parallel_and_for_suffix_on_model_runner_v1():
    sched = _eagle3(num_speculative_tokens_per_batch_size=[(1, 8, 3), (9, 1024, 0)])
    assert not [w for w in known_bugs(sched).warnings() if "data parallel" in w]
    dp = sched.model_copy(update={"extra_args": ["--data-parallel-size", "2"]})
    assert [w for w in known_bugs(dp).warnings() if "data parallel > 1" in w]
    suffix = LaunchConfig(model="m", method="suffix", num_speculative_tokens=8,
                          num_speculative_tokens_per_batch_size=[(1, 8, 8), (9, 64, 0)])
    facts, findings = audit(suffix)
    assert facts["model_runner"] == "v1" and facts["cuda_graphs"] == "piecewise"
    assert any("Model Runner V1" in f.row.name and f.status == "applies" for f in findings)
    assert not any("Model Runner V1 for methods" in f.row.name for f in audit(sched)[1] if f.status == "applies")


def test_per_position_bias_is_warned_for_methods_whose_drafts_are_shorter_than_k():
    ngram = LaunchConfig(model="m", method="ngram", num_speculative_tokens=4)
    assert any("Per-position acceptance is biased" in w for w in known_bugs(ngram).warnings())
    assert not any("Per-position acceptance is biased" in w for w in known_bugs(_eagle3()).warnings())


def test_the_architecture_comes_from_config_json():
    assert architecture_of_config({"model_type": "llama"}) == "dense"
    assert architecture_of_config({"model_type": "mixtral", "num_local_experts": 8}) == "moe"
    assert architecture_of_config({"model_type": "qwen3_next", "num_experts": 512}) == "hybrid"
    assert architecture_of_config({"model_type": "x", "layer_types": ["linear_attention", "full_attention"]}) == "hybrid"
    assert architecture_of_config({"text_config": {"mamba_d_state": 128}}) == "hybrid"
    assert architecture_of_config({"layer_types": ["sliding_attention", "full_attention"],
                                   "sliding_window": 128}) == "sliding_window"
    assert architecture_of_model(str(TINY_MODELS / "target-v1")) in ("dense", "sliding_window")
    assert architecture_of_model("nobody/not-cached-anywhere", env={"HF_HOME": "/nonexistent"}) is None


# --- recommend, deploy and the gate read the same rows ------------------------------------------------

def _results(stdout: str) -> dict[str, dict]:
    data = json.loads(stdout)
    return {r["id"]: r for rep in (data if isinstance(data, list) else [data]) for r in rep["results"]}


def test_following_the_gates_fix_for_a_missing_mitigation_makes_the_known_bug_check_pass(cli, tmp_path, specops_home):
    spec = tmp_path / "tq.yaml"
    doc = {"name": "tq", "target": {"model": "meta-llama/Llama-3.1-8B-Instruct"},
           "draft": {"model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"},
           "speculative": {"method": "eagle3", "num_speculative_tokens": 3},
           "engine": {"kv_cache_dtype": "turboquant_k8v4"}}
    spec.write_text(yaml.safe_dump(doc))
    r = cli("gate", "--spec", str(spec), "-o", "json")
    assert r.returncode == 1, r.stderr
    check = _results(r.stdout)["gate.known-bugs"]
    assert check["status"] == "fail" and "vllm#40831" in check["message"] and "--enforce-eager" in check["message"]
    assert check["fix"] == "set engine.enforce_eager: true"
    doc["engine"]["enforce_eager"] = True  # follow the fix
    spec.write_text(yaml.safe_dump(doc))
    check = _results(cli("gate", "--spec", str(spec), "-o", "json").stdout)["gate.known-bugs"]
    assert check["status"] in ("pass", "warn") and "vllm#40831" not in check["message"]  # eager: no CUDA graphs to corrupt


def test_an_mtp_spec_of_unknown_architecture_cannot_be_judged_until_the_fixes_are_followed(cli, tmp_path, specops_home):
    spec = tmp_path / "mtp.yaml"
    doc = {"name": "mtp", "target": {"model": "org/not-cached-model"}, "speculative": {"method": "mtp"}}
    spec.write_text(yaml.safe_dump(doc))
    fixes = []
    for _ in range(3):
        check = _results(cli("gate", "--spec", str(spec), "-o", "json").stdout)["gate.known-bugs"]
        if check["status"] in ("pass", "warn"):  # warn: 0.33's warn-only MTP rows (vllm#40756) are named
            break
        fixes.append(check["fix"])
        if "target.architecture" in check["fix"]:
            assert check["status"] == "error" and "may apply" in check["message"]  # could not evaluate, not a pass
            doc["target"]["architecture"] = "hybrid"
        else:
            assert check["status"] == "fail" and "vllm#43559" in check["message"]
            doc.setdefault("engine", {})["extra_args"] = ["--no-enable-prefix-caching"]
        spec.write_text(yaml.safe_dump(doc))
    assert check["status"] in ("pass", "warn") and "vllm#43559" not in check["message"], (fixes, check)
    assert fixes == ["set target.architecture: dense|moe|hybrid|sliding_window in the spec",
                     "add --no-enable-prefix-caching to engine.extra_args"]


def test_recommend_ships_the_mitigation_in_argv_warnings_and_the_deployment_spec(cli, tmp_path, specops_home):
    args = ("recommend", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "L4", "--context-len", "32000",
            "--batch-size", "32")
    plan = json.loads(cli(*args, "-o", "json").stdout)
    assert plan["kv_cache_dtype"].startswith("turboquant") and plan["method"] != "none"
    assert "--enforce-eager" in plan["vllm"]["argv"]
    assert any("vllm#40831" in w and "0.20.0 and later" in w for w in plan["warnings"])
    spec = tmp_path / "rec.yaml"
    spec.write_text(cli(*args, "-o", "deployment").stdout)
    assert yaml.safe_load(spec.read_text())["engine"]["enforce_eager"] is True
    check = _results(cli("gate", "--spec", str(spec), "-o", "json").stdout)["gate.known-bugs"]
    assert check["status"] in ("pass", "warn") and "vllm#40831" not in check["message"], check


def test_deploy_dry_run_renders_the_mitigation_and_notes_it(specops_home):
    from specops.engines.deploy import deploy_local
    from specops.engines.spec import DeploymentSpec

    spec = DeploymentSpec.model_validate({
        "name": "tq", "target": {"model": "meta-llama/Llama-3.1-8B-Instruct"},
        "draft": {"model": "org/eagle3"}, "speculative": {"method": "eagle3", "num_speculative_tokens": 3},
        "engine": {"kv_cache_dtype": "turboquant_k8v4", "vllm_version": "0.33.0"}})
    result = deploy_local(spec, dry_run=True)
    assert "--enforce-eager" in result.argv
    assert any(n.startswith("warning: known bug vllm#40831") for n in result.notes)
    assert "HF_HUB_OFFLINE" not in result.env  # a hub id: offline only when the spec asks
    asked = spec.model_copy(update={"local": spec.local.model_copy(update={"hf_offline": True})})
    assert deploy_local(asked, dry_run=True).env["HF_HUB_OFFLINE"] == "1"


# --- the user's Hugging Face cache and token ------------------------------------------------------------

def _hub_cache(root, hub_id: str, folder) -> str:
    """A hub-layout cache (models--org--name/snapshots/<commit>/..., refs/main) of a tiny model."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = root / "hub" / ("models--" + hub_id.replace("/", "--"))
    shutil.copytree(folder, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return commit


def test_the_engine_env_keeps_the_users_hf_cache_and_token_by_reference(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HOME", raising=False)
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-xdg"))
    monkeypatch.setenv("HF_TOKEN", "hf_by_reference")
    env = local.engine_env(tmp_path / "dep", tmp_path / "cache", cpu=True, kv_space_gib=None, extra={},
                           api_key=None, hf_offline=False)
    assert env["HF_HOME"] == str(tmp_path / "user-xdg" / "huggingface")  # not the moved XDG cache
    assert env["XDG_CACHE_HOME"] == str(tmp_path / "cache" / "xdg")
    assert env["HF_TOKEN"] == "hf_by_reference" and "HF_HUB_OFFLINE" not in env
    shown = local.contained_overrides(env)
    assert shown["HF_TOKEN"] == local.REDACTED and "hf_by_reference" not in repr(shown)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "elsewhere"))
    kept = local.engine_env(tmp_path / "dep", tmp_path / "cache", cpu=True, kv_space_gib=None, extra={},
                            api_key=None, hf_offline=True)
    assert kept["HF_HUB_CACHE"] == str(tmp_path / "elsewhere") and "HF_HOME" not in kept
    assert kept["HF_HUB_OFFLINE"] == "1"


def test_a_hub_id_resolves_from_the_users_cache_in_the_engines_environment(tmp_path, monkeypatch):
    """The engine's environment (engine_env) finds a hub-layout cache built from the tiny target: the
    real huggingface_hub/transformers resolve it offline, as vLLM does at start-up."""
    hf = tmp_path / "user-hf"
    _hub_cache(hf, "specops/tiny-target", TINY_MODELS / "target-v1")
    monkeypatch.setenv("HF_HOME", str(hf))
    env = local.engine_env(tmp_path / "dep", tmp_path / "cache", cpu=True, kv_space_gib=None, extra={},
                           api_key=None, hf_offline=True)
    assert architecture_of_model("specops/tiny-target", env=env) is not None
    code = ("from transformers import AutoConfig, AutoTokenizer\n"
            "c = AutoConfig.from_pretrained('specops/tiny-target'); t = AutoTokenizer.from_pretrained('specops/tiny-target')\n"
            "print(c.model_type, len(t('hello world')['input_ids']) > 0)")
    (tmp_path / "dep").mkdir(exist_ok=True)
    local.make_tmpdir(tmp_path / "dep")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-1] == "True"
