"""recommend(): capabilities by vLLM version, errors, memory, pinned what-ifs, rendering."""

import json

import pytest

from specops.engines.spec import DeploymentSpec, dump_spec
from specops.errors import CapabilityError, FitError, InputError, NotFoundError
from specops.planner import MeasuredAcceptance, RecommendRequest, recommend, to_deployment
from specops.planner.tree import load_tree

JSON_KEYS = {"method", "num_speculative_tokens", "num_speculative_tokens_per_batch_size", "kv_cache_dtype",
             "predicted", "memory", "decision_path", "warnings", "alternatives", "vllm"}


def run(catalogs, priors, **kw):
    return recommend(RecommendRequest(**kw), catalogs=catalogs, priors=priors)


def test_plan_json_has_the_contract_keys(catalogs, priors):
    data = json.loads(run(catalogs, priors, model="llama-3.1-8b-instruct", gpu="H100").model_dump_json())
    assert JSON_KEYS <= set(data)
    assert {"acceptance_rate", "mean_acceptance_length", "speedup", "tpot_ms", "baseline_tpot_ms",
            "throughput_tok_s", "ttft_ms"} <= set(data["predicted"])
    assert {"weights_gib", "draft_gib", "kv_cache_gib", "total_gib", "available_gib", "fits",
            "max_batch_that_fits"} <= set(data["memory"])
    assert {"argv", "speculative_config"} <= set(data["vllm"])
    assert all(set(s) == {"rule", "input", "outcome"} for s in data["decision_path"])


def test_decision_path_reports_every_rule_of_the_tree_in_order(catalogs, priors):
    plan = run(catalogs, priors, model="llama-3.1-8b-instruct", gpu="H100")
    assert [s.rule for s in plan.decision_path] == [r.id for r in load_tree().rules]


def test_argv_has_an_explicit_method_in_the_speculative_config(catalogs, priors):
    plan = run(catalogs, priors, model="llama-3.1-8b-instruct", gpu="H100")
    sc = json.loads(plan.vllm.argv[plan.vllm.argv.index("--speculative-config") + 1])
    assert sc["method"] == plan.method == plan.vllm.speculative_config["method"]
    assert plan.vllm.argv[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]


def test_medusa_is_an_error_on_033_but_runs_on_032(catalogs, priors):
    kw = dict(model="vicuna-7b", gpu="A100-80GB", context_len=1024, output_len=256, method="medusa")
    with pytest.raises(CapabilityError, match="medusa"):
        run(catalogs, priors, **kw)
    plan = run(catalogs, priors, vllm_version="0.32.0", **kw)
    assert plan.method == "medusa" and plan.vllm.speculative_config["method"] == "medusa"


def test_draft_model_is_refused_on_versions_whose_engine_cannot_run_it(catalogs, priors):
    with pytest.raises(CapabilityError, match="draft_model"):
        run(catalogs, priors, model="llama-3.1-8b-instruct", gpu="H100", method="draft_model", vllm_version="0.12.0")
    plan = run(catalogs, priors, model="llama-3.1-8b-instruct", gpu="H100", vllm_version="0.12.0")
    step = next(s for s in plan.decision_path if s.rule == "vllm_version")
    assert "draft_model" in step.outcome


def test_no_per_batch_schedule_before_0_24(catalogs, priors):
    kw = dict(model="llama-3.1-8b-instruct", gpu="A100-80GB", batch_size=64, context_len=256, output_len=256,
              allow_uncertain=True)
    assert run(catalogs, priors, **kw).num_speculative_tokens_per_batch_size
    old = run(catalogs, priors, vllm_version="0.23.0", **kw)
    assert old.num_speculative_tokens_per_batch_size is None
    assert any("0.24.0" in w for w in old.warnings)
    assert "num_speculative_tokens_per_batch_size" not in (old.vllm.speculative_config or {})


def test_turboquant_is_chosen_when_kv_limits_the_batch_and_only_from_0_20(catalogs, priors):
    kw = dict(model="llama-3.1-8b-instruct", gpu="H100", batch_size=64, context_len=16000, output_len=256)
    plan = run(catalogs, priors, **kw)
    assert plan.kv_cache_dtype.startswith("turboquant")
    assert "--kv-cache-dtype" in plan.vllm.argv
    old = run(catalogs, priors, vllm_version="0.19.0", **kw)
    assert not old.kv_cache_dtype.startswith("turboquant")


def test_short_context_keeps_the_native_kv_dtype(catalogs, priors):
    assert run(catalogs, priors, model="llama-3.1-8b-instruct", gpu="H100").kv_cache_dtype == "auto"


def test_a_kv_cache_that_cannot_hold_the_batch_is_a_warning_not_an_error(catalogs, priors):
    plan = run(catalogs, priors, model="llama-3.1-8b-instruct", gpu="L4", quantization="fp8", batch_size=256,
               context_len=8000, vllm_version="0.19.0")
    assert plan.memory.fits is False
    assert 0 < plan.memory.max_batch_that_fits < 256
    assert any("does not fit" in w for w in plan.warnings)


def test_weights_that_cannot_fit_are_a_fit_error(catalogs, priors):
    with pytest.raises(FitError, match="--gpus"):
        run(catalogs, priors, model="llama-3.1-405b-instruct", gpu="H100", gpus=2)


@pytest.mark.parametrize("kw, match", [
    (dict(gpu="H10"), 'Did you mean "H100"'),
    (dict(model="llama-3.1-8"), "Did you mean"),
    (dict(model="org/unknown-model"), "--params-b"),
    (dict(context_len=200_000), "limit"),
])
def test_bad_inputs_raise_input_errors_with_a_fix(catalogs, priors, kw, match):
    base = dict(model="llama-3.1-8b-instruct", gpu="H100")
    with pytest.raises((InputError, NotFoundError), match=match) as info:
        run(catalogs, priors, **{**base, **kw})
    assert "To fix:" in info.value.one_line()


def test_unknown_hub_id_with_params_b_is_predicted_from_a_generic_architecture(catalogs, priors):
    plan = run(catalogs, priors, model="org/some-13b", params_b=13, gpu="A100-80GB", method="ngram")
    assert plan.model == "org/some-13b" and plan.memory.weights_gib > 20


def test_local_model_folder_is_read_from_config_json(tmp_path, catalogs, priors):
    cfg = {"hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
           "vocab_size": 128256, "intermediate_size": 8192, "max_position_embeddings": 8192,
           "torch_dtype": "bfloat16", "tie_word_embeddings": True}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    plan = run(catalogs, priors, model=str(tmp_path), gpu="L4", method="ngram", num_speculative_tokens=4)
    assert 1.0 < plan.memory.weights_gib < 3.0
    assert plan.vllm.argv[2] == str(tmp_path)


def test_pinned_method_and_gamma_are_evaluated_as_pinned(catalogs, priors):
    plan = run(catalogs, priors, model="llama-3.1-8b-instruct", gpu="H100", method="eagle3", num_speculative_tokens=9,
               batch_size=64, context_len=256, output_len=256)
    assert plan.method == "eagle3" and plan.num_speculative_tokens == 9
    assert plan.num_speculative_tokens_per_batch_size is None  # no schedule overrides a pinned γ


def test_pinned_method_without_a_known_draft_is_refused_with_what_works(catalogs, priors):
    # issue 41: a made-up `<eagle3 draft for ...>` cannot be launched; the fix names --draft and the known methods
    with pytest.raises(InputError, match=r"no eagle3 draft is known.*--draft HUB_ID_OR_FOLDER.*--method draft_model"):
        run(catalogs, priors, model="llama-3.1-70b-instruct", gpu="H100", gpus=4, method="eagle3")
    plan = run(catalogs, priors, model="llama-3.1-70b-instruct", gpu="H100", gpus=4, method="eagle3",
               draft="yuhuili/EAGLE3-LLaMA3.3-Instruct-70B")  # the fix, followed
    assert plan.method == "eagle3" and plan.draft == "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B"


def test_method_none_gives_the_baseline(catalogs, priors):
    plan = run(catalogs, priors, model="llama-3.1-8b-instruct", gpu="H100", method="none")
    assert plan.method == "none" and plan.predicted.speedup == 1.0
    assert "--speculative-config" not in plan.vllm.argv


def test_mtp_is_considered_only_for_models_that_ship_mtp_heads(catalogs, priors):
    plan = run(catalogs, priors, model="deepseek-v3", gpu="H200", gpus=8, context_len=32000)
    assert plan.method == "mtp"
    assert "model" not in plan.vllm.speculative_config
    with_llama = run(catalogs, priors, model="llama-3.1-8b-instruct", gpu="H100", context_len=32000)
    assert with_llama.method != "mtp"


def test_measured_acceptance_feeds_the_plan_and_is_reported(catalogs, priors):
    measured = priors.with_measured(MeasuredAcceptance(
        draft="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", method="eagle3", task="chat",
        per_position=[0.9, 0.82, 0.75, 0.68, 0.6, 0.52], samples=5000))
    plan = recommend(RecommendRequest(model="llama-3.1-8b-instruct", gpu="H100", method="eagle3"), catalogs=catalogs,
                     priors=measured)
    assert plan.predicted.acceptance_prior_source == "measured: 5000 samples"
    assert plan.num_speculative_tokens >= 5


def test_deployment_spec_from_a_plan_round_trips(catalogs, priors):
    plan = run(catalogs, priors, model="llama-3.1-8b-instruct", gpu="H100")
    spec = to_deployment(plan)
    assert spec.name == "llama-3-1-8b-instruct"
    assert spec.target.model == plan.model and spec.draft.model == plan.draft
    text = dump_spec(spec)
    import yaml

    again = DeploymentSpec.model_validate(yaml.safe_load(text))
    assert again.launch_config().method == plan.method
