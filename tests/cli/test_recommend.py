"""`specops recommend` through the real CLI (subprocess): contract, errors, settings, deployment output."""

import json

import pytest
import yaml


def test_json_output_has_the_contract_keys_and_the_exact_argv(cli):
    r = cli("recommend", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100", "--output", "json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["method"] == "eagle3"
    assert data["vllm"]["argv"][:2] == ["vllm", "serve"]
    assert data["predicted"]["speedup"] > 1
    assert [s["rule"] for s in data["decision_path"]][-2:] == ["cost_model", "evidence"]
    p = data["predicted"]
    assert p["speedup_low"] < p["speedup"] < p["speedup_high"] and p["evidence_near"] is True
    assert "published rows" in p["evidence"]


def test_all_contract_flags_are_accepted(cli):
    r = cli("recommend", "--model", "llama-3.3-70b", "--gpu", "A100-80GB", "--gpus", "4", "--tpot-ms", "30",
            "--task", "code", "--context-len", "2048", "--output-len", "512", "--temperature", "0.2",
            "--batch-size", "2", "--vllm-version", "0.30.0", "--objective", "throughput", "--method", "eagle3",
            "--num-speculative-tokens", "6", "--draft", "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B", "--quantization",
            "fp8", "--output", "yaml")
    assert r.returncode == 0, r.stderr
    data = yaml.safe_load(r.stdout)
    assert data["num_speculative_tokens"] == 6
    assert data["vllm"]["speculative_config"]["model"] == "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B"


def test_table_output_shows_the_decision_path_and_launch(cli):
    r = cli("recommend", "--model", "qwen3-8b", "--gpu", "L40S")
    assert r.returncode == 0, r.stderr
    assert "decision path" in r.stdout and "vllm serve" in r.stdout


def test_bad_input_is_one_line_with_a_fix_and_exit_2(cli):
    for args in (["--gpu", "H10"], ["--gpu", "H100", "--task", "cod"], ["--gpu", "H100", "--temperature", "nan"],
                 ["--gpu", "H100", "--num-speculative-tokens", "17"], ["--gpu", "H100", "--batch-size", "0"],
                 ["--gpu", "H100", "--method", "medusa"], ["--gpu", "H100", "--min-p-gain", "1.5"]):
        r = cli("recommend", "--model", "llama-3.1-8b-instruct", *args)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stderr.startswith("error: ") and "To fix:" in r.stderr, args
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_weights_that_cannot_fit_exit_2(cli):
    r = cli("recommend", "--model", "llama-3.1-405b-instruct", "--gpu", "L4")
    assert r.returncode == 2 and "cannot fit" in r.stderr


def test_gpu_and_vllm_version_come_from_env_then_config_file(cli, specops_home):
    (specops_home / "config.yaml").write_text("gpu: A100-80GB\nvllm_version: 0.32.0\n")
    r = cli("recommend", "--model", "llama-3.1-8b-instruct", "--output", "json")
    data = json.loads(r.stdout)
    assert data["gpu"] == "A100-80GB" and data["vllm"]["version"] == "0.32.0"
    r = cli("recommend", "--model", "llama-3.1-8b-instruct", "--output", "json", env={"SPECOPS_GPU": "H200"})
    assert json.loads(r.stdout)["gpu"] == "H200"
    r = cli("recommend", "--model", "llama-3.1-8b-instruct", "--gpu", "L40S", "--output", "json", env={"SPECOPS_GPU": "H200"})
    assert json.loads(r.stdout)["gpu"] == "L40S"


@pytest.mark.costly  # a CLI subprocess: HF_ variables are read at import
def test_deployment_output_is_a_loadable_spec(cli, tmp_path):
    from tests.helpers.hf_cache import commit_of, hf_cache

    env = hf_cache(tmp_path / "hf", "meta-llama/Llama-3.1-8B-Instruct", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
    r = cli("recommend", "--model", "llama-3.1-8b-instruct", "--gpu", "H100", "--output", "deployment", "--name", "chat-8b",
            env=env)  # revisions come from the user's Hugging Face cache
    assert r.returncode == 0, r.stderr
    path = tmp_path / "spec.yaml"
    path.write_text(r.stdout)
    from specops.engines.spec import load_spec

    spec = load_spec(path)
    assert spec.name == "chat-8b" and spec.target.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert spec.draft is not None and spec.speculative.method == "eagle3"
    assert spec.target.revision == commit_of(spec.target.model) and spec.draft.revision == commit_of(spec.draft.model)


def test_bad_deployment_name_is_an_input_error(cli):
    r = cli("recommend", "--model", "llama-3.1-8b-instruct", "--gpu", "H100", "--output", "deployment", "--name", "Bad_Name")
    assert r.returncode == 2 and "DNS-1123" in r.stderr and "Traceback" not in r.stderr


def test_recommend_help_lists_every_contract_flag(cli):
    r = cli("recommend", "--help")
    for flag in ("--model", "--params-b", "--quantization", "--gpu", "--gpus", "--tpot-ms", "--task", "--context-len",
                 "--output-len", "--temperature", "--batch-size", "--vllm-version", "--objective", "--method",
                 "--num-speculative-tokens", "--draft", "--output"):
        assert flag in r.stdout, flag


def test_unmodelled_methods_refused_and_p_eagle_rendered(cli):
    for method in ("dspark", "step5_mtp"):
        r = cli("recommend", "--model", "llama-3.1-8b-instruct", "--gpu", "H100", "--method", method)
        assert r.returncode == 2 and "served by vLLM but not modelled" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "To fix:" in r.stderr
    r = cli("recommend", "--model", "llama-3.1-8b-instruct", "--gpu", "H100", "--parallel-drafting", "-o", "json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["vllm"]["speculative_config"]["parallel_drafting"] is True and data["method"] == "eagle3"
    r = cli("recommend", "--model", "llama-3.1-8b-instruct", "--gpu", "H100", "--parallel-drafting", "-o", "deployment")
    assert r.returncode == 0 and "parallel_drafting: true" in r.stdout and "# warning: --parallel-drafting" in r.stdout
