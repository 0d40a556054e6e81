"""deploy.known-bugs: the known-bug rows against a deployment as it was recorded (a real registry file,
the real checklist and evaluator; the launches are rendered by specops.engines.argv, nothing faked)."""

from __future__ import annotations

import json

from specops.checks.evaluate import run_checklist
from specops.checks.playbook import get_profile, load_checklist
from specops.checks.sources import Sources, deployment_facts

QWEN_NEXT = {"model_type": "qwen3_next", "architectures": ["Qwen3NextForCausalLM"], "linear_num_value_heads": 32,
             "full_attention_interval": 4, "hidden_size": 2048, "num_hidden_layers": 48, "vocab_size": 151936}


def _check(reg, name):
    cl = load_checklist("deploy")
    cl = cl.model_copy(update={"checks": [c for c in cl.checks if c.id == "deploy.known-bugs"]})
    src = Sources(deployment=deployment_facts(reg.get_deployment(name)), registry=reg)
    return run_checklist(cl, "cpu-tiny", get_profile("cpu-tiny"), src).results[0]


def _argv(cfg) -> list[str]:
    from specops.engines.argv import render_argv

    return render_argv(cfg, entrypoint="console")


def test_a_recorded_draft_model_launch_passes(registry):
    r = _check(registry, "tiny-matched")
    assert r.status == "pass" and "vLLM 0.32.0" in r.message, r.message


def test_a_launch_without_the_mitigation_fails_and_following_the_fix_passes(registry):
    """An engine started by an older specops (no known-bug rows): TurboQuant KV + ngram under CUDA
    graphs on 0.33.0. The fix says `specops restart`, which deploys again from the saved spec through
    render_argv: recording that argv (what restart records) passes."""
    from specops.capabilities import default_table
    from specops.engines.argv import LaunchConfig, _flags

    cfg = LaunchConfig(vllm_version="0.33.0", model="/m/target", method="ngram", num_speculative_tokens=3,
                       prompt_lookup_max=3, kv_cache_dtype="turboquant_k8v4")
    old = ["vllm", "serve", *[a for a in _flags(cfg, default_table()) if a != "--enforce-eager"]]
    assert "--enforce-eager" not in old
    registry.upsert_deployment("tq", platform="local", status="running", method="ngram", num_speculative_tokens=3,
                               vllm_version="0.33.0", argv_redacted=old)
    r = _check(registry, "tq")
    assert r.status == "fail", r.message
    assert "--enforce-eager" in r.message and "vllm#40831" in r.message
    assert "add --enforce-eager" in r.fix and "specops restart tq" in r.fix
    new = _argv(cfg)
    assert "--enforce-eager" in new
    registry.upsert_deployment("tq", platform="local", status="running", argv_redacted=new)
    r = _check(registry, "tq")
    assert r.status in ("pass", "warn") and "vllm#40831" not in r.message, r.message  # eager: no CUDA graphs
    assert r.evidence["facts"]["cuda_graphs"] == "none"


def test_hybrid_mtp_needs_prefix_caching_off_with_the_architecture_read_from_the_target(registry, tmp_path):
    target = tmp_path / "qwen-next"
    target.mkdir()
    (target / "config.json").write_text(json.dumps(QWEN_NEXT))
    argv = ["vllm", "serve", str(target), "--speculative-config",
            json.dumps({"method": "mtp", "num_speculative_tokens": 2})]
    registry.upsert_deployment("hy", platform="external", status="adopted", method="mtp", vllm_version="0.33.0",
                               argv_redacted=argv)
    r = _check(registry, "hy")
    assert r.status == "fail" and "--no-enable-prefix-caching" in r.message and "vllm#43559" in r.message
    assert r.evidence["facts"]["architecture"] == "hybrid" and r.evidence["facts"]["prefix_caching"] == "on"
    assert r.fix.startswith("add --no-enable-prefix-caching: relaunch the engine")
    registry.upsert_deployment("hy", platform="external", status="adopted",
                               argv_redacted=[*argv, "--no-enable-prefix-caching"])
    r = _check(registry, "hy")  # mitigated; 0.33's warn-only MTP rows (vllm#40756) may still be named
    assert r.status in ("pass", "warn") and "vllm#43559" not in r.message, r.message


def test_unknown_facts_are_could_not_evaluate_naming_what_to_supply(registry):
    registry.upsert_deployment("blind", platform="external", status="adopted", endpoint="http://127.0.0.1:9")
    r = _check(registry, "blind")
    assert r.status == "error" and "records no launch argv and no vLLM version" in r.message, r.message
    assert "specops deploy" in r.fix
    # MTP on 0.33.0 with a hub-id target that is not in the cache: the architecture is unknown
    registry.upsert_deployment("blind", platform="external", status="adopted", vllm_version="0.33.0", method="mtp",
                               argv_redacted=["vllm", "serve", "acme/not-cached", "--speculative-config",
                                              '{"method": "mtp", "num_speculative_tokens": 1}'])
    r = _check(registry, "blind")
    assert r.status == "error" and "architecture unknown" in r.message, r.message
    assert "target.architecture" in r.fix and "register-target" in r.fix


def test_the_draft_kv_mitigation_is_read_from_the_launched_speculative_config(registry):
    sc = {"method": "eagle3", "model": "/m/eagle3", "num_speculative_tokens": 3}
    argv = ["vllm", "serve", "/m/target", "--kv-cache-dtype", "fp8", "--speculative-config"]
    registry.upsert_deployment("fp8", platform="local", status="running", method="eagle3", vllm_version="0.33.0",
                               argv_redacted=[*argv, json.dumps(sc)])
    r = _check(registry, "fp8")
    assert r.status == "fail" and "speculative_config.kv_cache_dtype=auto" in r.message, r.message
    registry.upsert_deployment("fp8", platform="local", status="running",
                               argv_redacted=[*argv, json.dumps({**sc, "kv_cache_dtype": "auto"})])
    r = _check(registry, "fp8")
    assert r.status in ("pass", "warn") and r.evidence["facts"]["draft_kv_dtype"] == "auto", r.message
