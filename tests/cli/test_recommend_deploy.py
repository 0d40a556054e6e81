"""Specs from `recommend -o deployment` that deploy, and methods the model cannot serve (issue 41)."""

import json
import re

import pytest
import yaml

from tests.helpers.hf_cache import commit_of, hf_cache

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
EAGLE3 = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"


def _results(stdout: str) -> dict:
    data = json.loads(stdout)  # one report, or a list of them
    return {x["id"]: x for rep in (data if isinstance(data, list) else [data]) for x in rep["results"]}


def _one_line(r) -> str:
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "To fix:" in r.stderr and "Traceback" not in r.stderr
    return r.stderr


def test_mtp_on_a_model_without_mtp_layers_is_refused_and_the_fix_works(cli):
    err = _one_line(cli("recommend", "--model", LLAMA, "--gpu", "H100", "--method", "mtp", "-o", "deployment"))
    assert "has no MTP layers" in err and "--method eagle3" in err
    from specops.api.recommend import build_request, recommend_with_defaults

    fixed = recommend_with_defaults(build_request(model=LLAMA, gpu="H100", method="eagle3"))  # the fix, followed
    assert fixed.draft == EAGLE3


def test_a_head_method_without_a_draft_writes_no_placeholder(cli):
    r = cli("recommend", "--model", LLAMA, "--gpu", "H100", "--method", "eagle", "-o", "deployment")
    err = _one_line(r)
    assert "no eagle draft is known" in err and "--draft" in err and "<eagle draft" not in r.stdout


@pytest.mark.costly  # a CLI subprocess: HF_ variables are read at import
def test_a_model_specops_does_not_know_is_accepted_with_a_warning(cli, tmp_path):
    r = cli("recommend", "--model", "acme/Foo-9B", "--params-b", "9", "--gpu", "H100", "-o", "json")
    assert r.returncode == 0, r.stderr
    assert any(w.startswith("specops does not know acme/Foo-9B") for w in json.loads(r.stdout)["warnings"])
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
              "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}
    env = hf_cache(tmp_path / "hf", "acme/Bar-8B", config=config)  # no --params-b: read from the cache's config.json
    r = cli("recommend", "--model", "acme/Bar-8B", "--gpu", "H100", "-o", "deployment", env=env)
    assert r.returncode == 0, r.stderr
    assert "# warning: specops does not know acme/Bar-8B" in r.stdout
    spec = yaml.safe_load(r.stdout)
    assert spec["target"] == {"model": "acme/Bar-8B", "revision": commit_of("acme/Bar-8B")}


@pytest.mark.costly  # a CLI subprocess: HF_ variables are read at import
def test_unpinned_specs_name_every_pin_and_registration_in_one_gate_run(cli, tmp_path):
    empty = hf_cache(tmp_path / "hf")  # nothing in the Hugging Face cache
    r = cli("recommend", "--model", LLAMA, "--gpu", "H100", "-o", "deployment", env=empty)
    assert r.returncode == 0, r.stderr
    data = yaml.safe_load(r.stdout)
    assert data["target"]["revision"] == "<pin>" and data["draft"]["revision"] == "<pin>"
    assert re.search(r"^# pin: target.revision and draft.revision are <pin>", r.stdout, flags=re.M)
    src = data["expectations"]["source"]
    from specops.api.recommend import build_request, recommend_with_defaults

    prior = recommend_with_defaults(build_request(model=LLAMA, gpu="H100")).predicted.acceptance_prior_source
    assert src.endswith(prior + ")")  # whole, not cut at 160 characters
    path = tmp_path / "spec.yaml"
    path.write_text(r.stdout)
    gate = cli("gate", "--spec", str(path), "-o", "json")
    assert gate.returncode == 1, gate.stdout + gate.stderr
    results = _results(gate.stdout)
    assert results["gate.schema"]["status"] == "fail"
    assert all(s in results["gate.schema"]["message"] for s in ("target.revision is the placeholder <pin>",
                                                                  "draft.revision is the placeholder <pin>"))
    lineage = results["gate.lineage"]
    assert lineage["status"] == "error" and "register-target" in lineage["fix"] and "register-draft" in lineage["fix"]
    dep = cli("deploy", str(path), "--dry-run")
    assert "target.revision is the placeholder <pin>" in _one_line(dep)


def test_branches_and_placeholder_models_are_refused_by_the_schema(cli, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(f"name: s\ntarget:\n  model: {LLAMA}\n  revision: main\ndraft:\n  model: <eagle draft for {LLAMA}>\n"
                    "speculative:\n  method: eagle\n  num_speculative_tokens: 3\n")
    err = _one_line(cli("deploy", str(path), "--dry-run"))
    assert 'target.revision "main" is a branch' in err and "draft.model is the placeholder <eagle draft" in err
    gate = cli("gate", "--spec", str(path), "-o", "json")
    schema = _results(gate.stdout)["gate.schema"]
    assert gate.returncode != 0 and schema["status"] == "fail" and "placeholder <eagle draft" in schema["message"]
