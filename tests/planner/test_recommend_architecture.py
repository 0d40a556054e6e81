"""recommend passes the target's architecture to the known-bug rows: a hybrid (Gated DeltaNet) model
with native MTP gets --no-enable-prefix-caching in its argv (vllm#43559 / #47194), a catalog dense
model is judged as dense (no "may apply"), an estimate from --params-b stays unknown. The real
catalog, priors, tree and capability table; the hybrid model is a local config.json folder."""

from __future__ import annotations

import json

import pytest

from specops.planner import RecommendRequest, recommend

# Shaped like Qwen3-Next's config.json (model_type qwen3_next, linear-attention GDN layers every 4th
# layer full attention, num_nextn_predict_layers for its MTP head), scaled down to fit one GPU.
HYBRID = {"model_type": "qwen3_next", "architectures": ["Qwen3NextForCausalLM"], "hidden_size": 2048,
          "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
          "vocab_size": 151936, "intermediate_size": 5632, "max_position_embeddings": 32768,
          "linear_num_value_heads": 32, "linear_num_key_heads": 16, "full_attention_interval": 4,
          "num_nextn_predict_layers": 1, "torch_dtype": "bfloat16"}


def run(catalogs, priors, **kw):
    return recommend(RecommendRequest(**kw), catalogs=catalogs, priors=priors)


@pytest.mark.parametrize("version", ["0.33.0", "0.28.0"])
def test_a_hybrid_mtp_model_gets_prefix_caching_off(tmp_path, catalogs, priors, version):
    (tmp_path / "config.json").write_text(json.dumps(HYBRID))
    plan = run(catalogs, priors, model=str(tmp_path), gpu="H100", method="mtp", num_speculative_tokens=1,
               vllm_version=version)
    assert catalogs.model(str(tmp_path)).architecture == "hybrid"
    assert plan.method == "mtp" and "--no-enable-prefix-caching" in plan.vllm.argv, plan.vllm.argv
    assert any("vllm#43559" in w and "mitigated with --no-enable-prefix-caching" in w for w in plan.warnings)
    assert not any("may apply" in w and "#43559" in w for w in plan.warnings)


def test_a_dense_catalog_model_is_judged_dense(catalogs, priors):
    m = catalogs.model("llama-3.1-8b-instruct")
    assert m.architecture is None and m.kind() == "dense"
    assert catalogs.model("openai/gpt-oss-20b").kind() == "sliding_window"
    assert catalogs.model("Qwen/Qwen3-30B-A3B").kind() == "moe"
    plan = run(catalogs, priors, model="llama-3.1-8b-instruct", gpu="H100", method="eagle3", vllm_version="0.33.0")
    assert "--no-enable-prefix-caching" not in plan.vllm.argv
    assert not any("may apply" in w and "architecture" in w for w in plan.warnings), plan.warnings


def test_an_estimate_from_sizes_has_an_unknown_architecture(catalogs):
    assert catalogs.model("org/some-13b", params_b=13).kind() is None


HYBRID_FAMILIES = ("qwen3-next", "qwen3.5", "qwen3.6", "jamba", "nemotron-h", "falcon-h1", "granite-4.0-h", "zamba",
                   "mamba", "bamba", "plamo-2", "lfm2", "minimax-m1", "nvidia-nemotron-nano")


def test_every_hybrid_family_in_the_catalog_says_so(catalogs):
    """A hybrid model added to models.yaml without `architecture: hybrid` would be judged dense and miss
    the hybrid mitigations: the catalog must state it."""
    for m in catalogs.models:
        if any(f in m.id.lower() for f in HYBRID_FAMILIES):
            assert m.architecture == "hybrid", f"{m.id}: set architecture: hybrid in playbooks/catalogs/models.yaml"
