"""Predicted, not launched: the prediction is about the configuration, the launch about artifacts. Where an artifact
is missing (a draft for an unknown model's pinned head, a checkpoint for --quantization) `recommend` predicts, renders
no launch and says what is missing; `-o deployment` exits 2 with the fix, and the fix, followed, renders both."""

import json
import re

import pytest
import yaml

UNKNOWN = ["--model", "acme/Foo-7B", "--params-b", "7", "--gpu", "H100"]


def _plan(cli, *args) -> dict:
    r = cli("recommend", *args, "-o", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _refused(r) -> str:
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "To fix:" in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""
    return r.stderr.split("To fix: ", 1)[1].strip().rstrip(".")


@pytest.mark.parametrize("method", ["eagle", "dflash"])
def test_an_unknown_models_pinned_head_is_predicted_with_the_launch_withheld_until_draft_names_one(cli, method):
    plan = _plan(cli, *UNKNOWN, "--method", method)
    p = plan["predicted"]
    assert plan["method"] == method and p["speedup"] > 1 and p["speedup_low"] < p["speedup"] < p["speedup_high"]
    assert plan["draft"] is None and f"<{method} draft" not in json.dumps(plan)  # no made-up draft name anywhere
    assert plan["vllm"]["argv"] == [] and plan["vllm"]["speculative_config"] is None
    (w,) = plan["vllm"]["withheld"]
    assert w["artifact"] == "draft" and w["fix"].startswith("pass --draft HUB_ID_OR_FOLDER")
    warned = [x for x in plan["warnings"] if "To fix: pass --draft HUB_ID_OR_FOLDER" in x]
    assert len(warned) == 1 and f"typical {method} draft" in warned[0]
    drafts = next(s for s in plan["decision_path"] if s["rule"] == "drafts")["outcome"]
    assert f"{method}: a typical" in drafts and "launch is withheld" in drafts
    assert "no draft-specific effect" in p["acceptance_prior_source"]

    table = cli("recommend", *UNKNOWN, "--method", method)
    assert table.returncode == 0 and re.search(r"(?m)^launch: withheld: no " + method, table.stdout)
    assert "vllm serve" not in table.stdout
    fix = _refused(cli("recommend", *UNKNOWN, "--method", method, "-o", "deployment"))
    assert fix == w["fix"].rstrip(".")

    draft = {"eagle": "acme/Foo-7B-eagle", "dflash": "acme/Foo-7B-DFlash"}[method]  # the fix, followed
    followed = fix.replace("HUB_ID_OR_FOLDER", draft).split(" (", 1)[0].removeprefix("pass ").split()
    assert followed == ["--draft", draft]
    fixed = _plan(cli, *UNKNOWN, "--method", method, *followed)
    assert fixed["vllm"]["withheld"] == [] and fixed["draft"] == draft
    assert fixed["vllm"]["speculative_config"]["model"] == draft
    spec = cli("recommend", *UNKNOWN, "--method", method, *followed, "-o", "deployment")
    assert spec.returncode == 0, spec.stderr
    assert yaml.safe_load(spec.stdout)["draft"]["model"] == draft


def test_what_the_catalog_shows_and_a_draft_model_stay_refused(cli):
    # a catalog model whose entry lists no eagle draft: the catalog shows none exists (issue 41)
    assert "--method eagle3" in _refused(cli("recommend", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100",
                                             "--method", "eagle"))
    # a draft model's acceptance depends on its size, which nothing gives
    assert "pass --draft" in _refused(cli("recommend", *UNKNOWN, "--method", "draft_model"))
    plan = _plan(cli, *UNKNOWN, "--method", "eagle3")  # while a head of the same unknown model is predicted
    assert plan["vllm"]["withheld"][0]["artifact"] == "draft"


def test_a_quantization_without_a_checkpoint_is_predicted_at_its_precision_and_the_fix_launches(cli):
    args = ["--gpu", "B200", "--gpus", "8", "--method", "mtp", "--num-speculative-tokens", "3"]
    v3 = ["--model", "deepseek-ai/DeepSeek-V3"]
    plan = _plan(cli, *v3, "--quantization", "nvfp4", *args)
    shipped = _plan(cli, *v3, *args)  # DeepSeek-V3 ships FP8 weights
    assert 0.5 < plan["memory"]["weights_gib"] / shipped["memory"]["weights_gib"] < 0.6  # 4.5 bits of 8
    assert plan["predicted"]["speedup_low"] is not None and plan["vllm"]["argv"] == []
    (w,) = plan["vllm"]["withheld"]
    assert w["artifact"] == "checkpoint" and "no nvfp4 checkpoint of deepseek-ai/DeepSeek-V3" in w["missing"]
    assert sum("To fix: point --model at a nvfp4 checkpoint" in x for x in plan["warnings"]) == 1
    fix = _refused(cli("recommend", *v3, "--quantization", "nvfp4", *args, "-o", "deployment"))
    sizes = re.search(r"a hub id naming it with (--params-b \S+ --active-params-b \S+)\)", fix).group(1).split()
    assert "drop --quantization (deepseek-ai/DeepSeek-V3 ships 8-bit weights)" in fix

    ckpt = ["--model", "nvidia/DeepSeek-V3-0324-FP4", *sizes, "--quantization", "nvfp4"]  # the fix, followed
    spec = cli("recommend", *ckpt, *args, "-o", "deployment")
    assert spec.returncode == 0, spec.stderr
    assert yaml.safe_load(spec.stdout)["target"]["model"] == "nvidia/DeepSeek-V3-0324-FP4"
    dropped = cli("recommend", *v3, *args, "-o", "deployment")  # the other fix: drop --quantization
    assert dropped.returncode == 0 and yaml.safe_load(dropped.stdout)["target"]["model"] == "deepseek-ai/DeepSeek-V3"


def test_a_catalog_nvfp4_checkpoint_is_launched(cli):
    plan = _plan(cli, "--model", "meta-llama/Llama-3.3-70B-Instruct", "--quantization", "nvfp4", "--gpu", "B200")
    assert plan["vllm"]["argv"][:3] == ["vllm", "serve", "nvidia/Llama-3.3-70B-Instruct-FP4"]
    assert "--quantization" not in plan["vllm"]["argv"] and plan["vllm"]["withheld"] == []
