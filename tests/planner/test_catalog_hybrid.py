"""Issue 37 item 3: the hybrid-attention models people serve are catalog entries, each fact read from the model's
config.json (the entry's `source` says where). Every expected number below is recomputed here from the config
fields the source cites - the state formulas of vLLM's MambaStateShapeCalculator (Gated DeltaNet, Mamba-1,
Mamba-2) and the layer split - not read back from the code under test. Nothing is faked: the shipped catalog,
priors and capability table."""

from __future__ import annotations

import pytest

from specops.planner import RecommendRequest, recommend
from specops.planner.perfmodel import VLLM_PROFILE, Setup, kv_bytes_per_seq, memory_estimate


def gdn(k_heads, v_heads, k_dim=128, v_dim=128, kernel=4):
    """Gated DeltaNet state of one sequence in one layer: fp32 temporal state (the Qwen3.5 configs' mamba_ssm_dtype)
    + the bf16 conv state over q, k and v."""
    return v_heads * k_dim * v_dim * 4 + (2 * k_heads * k_dim + v_heads * v_dim) * (kernel - 1) * 2


def mamba1(d_inner, d_state, kernel=4):
    return ((kernel - 1) * d_inner + d_inner * d_state) * 2


def mamba2(d_inner, groups, d_state, heads, head_dim, kernel=4):
    return ((kernel - 1) * (d_inner + 2 * groups * d_state) + heads * head_dim * d_state) * 2


# (hub id, attention layers, recurrent layers, parallel (attention + SSM) layers, state bytes per layer, MTP layers)
ENTRIES = [
    ("Qwen/Qwen3.5-27B", 16, 48, 0, gdn(16, 48), 1),
    ("Qwen/Qwen3.5-35B-A3B", 10, 30, 0, gdn(16, 32), 1),
    ("Qwen/Qwen3.5-122B-A10B", 12, 36, 0, gdn(16, 64), 1),
    ("Qwen/Qwen3.5-397B-A17B", 15, 45, 0, gdn(16, 64), 1),
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", 12, 36, 0, gdn(16, 32), 1),
    ("ai21labs/AI21-Jamba-1.5-Mini", 4, 28, 0, mamba1(2 * 4096, 16), 0),
    ("nvidia/NVIDIA-Nemotron-Nano-9B-v2", 4, 27, 0, mamba2(128 * 80, 8, 128, 128, 80), 0),
    ("tiiuae/Falcon-H1-34B-Instruct", 0, 0, 72, mamba2(4096, 2, 256, 32, 128), 0),
    ("ibm-granite/granite-4.0-h-small", 4, 36, 0, mamba2(2 * 4096, 1, 128, 128, 64), 0),
]


@pytest.mark.parametrize("model_id,attention,recurrent,parallel,state,mtp", ENTRIES)
def test_each_hybrid_entry_resolves_with_its_layer_split_and_the_state_its_config_implies(
        catalogs, model_id, attention, recurrent, parallel, state, mtp):
    for name in (model_id, model_id.lower(), model_id.upper(), model_id.split("/")[1]):
        assert catalogs.model(name).id == model_id  # the hub id as typed, any case, or without the org
    m = catalogs.model(model_id)
    assert m.kind() == "hybrid" and m.architecture == "hybrid"
    assert (m.linear_layers, m.parallel_ssm_layers, m.layers - m.linear_layers - parallel) == (recurrent, parallel,
                                                                                              attention)
    assert m.state_bytes_per_layer == state and m.mtp_layers == mtp
    assert model_id.split("/")[0] in m.source and "config" in m.source  # where the facts were read


@pytest.mark.parametrize("name,model_id", [
    ("qwen3.5-27b", "Qwen/Qwen3.5-27B"), ("qwen3.5-397b-a17b", "Qwen/Qwen3.5-397B-A17B"),
    ("jamba-1.5-mini", "ai21labs/AI21-Jamba-1.5-Mini"), ("nemotron-nano-9b-v2", "nvidia/NVIDIA-Nemotron-Nano-9B-v2"),
    ("falcon-h1-34b", "tiiuae/Falcon-H1-34B-Instruct"), ("granite-4.0-h-small", "ibm-granite/granite-4.0-h-small"),
])
def test_short_names_resolve_to_the_hub_id(catalogs, name, model_id):
    assert catalogs.model(name).id == model_id


def test_a_catalog_model_wins_over_params_b(catalogs):
    """--params-b is for models specops does not know. Given with a catalog model (as a user copying a command
    line does) the catalog's architecture is kept - not a generic dense estimate of that size, whose memory and
    verification cost treat every layer as full attention - and the hybrid rows still apply."""
    for name, size in (("Qwen/Qwen3.5-27B", 27), ("qwen/qwen3.5-9b", 9), ("Qwen/Qwen3-Next-80B-A3B-Instruct", 80)):
        m = catalogs.model(name, params_b=size)
        assert m.kind() == "hybrid" and not m.source.startswith("estimated from"), name
    assert catalogs.model("Qwen/Qwen3.5-35B-A3B", params_b=35, active_params_b=3).active_params_b == pytest.approx(
        3.46, abs=0.01)  # the catalog's active parameters, summed from the config, not the --active-params-b given


def test_a_hybrid_model_holds_less_kv_at_32k_than_its_all_attention_counterpart_by_the_state_formula(catalogs):
    """Qwen3.5-27B against the same config with every layer full attention (and Qwen3-32B, a dense catalog model of
    the same KV width: 64 layers x 8 KV heads of 128): at 32K the hybrid holds 16 layers of KV plus 48 states; the
    difference is exactly 48 layers' KV minus 48 states, and more sequences fit on one H100."""
    hybrid = catalogs.model("Qwen/Qwen3.5-27B")
    dense = hybrid.model_copy(update={"linear_layers": 0, "state_bytes_per_layer": 0, "architecture": "dense"})
    tokens = 32768
    per_layer_token = 2 * hybrid.kv_heads * hybrid.head_dim * 2  # K and V, bf16
    assert kv_bytes_per_seq(hybrid, "auto", tokens) == 16 * per_layer_token * tokens + 48 * gdn(16, 48)
    assert kv_bytes_per_seq(dense, "auto", tokens) - kv_bytes_per_seq(hybrid, "auto", tokens) == \
        48 * per_layer_token * tokens - 48 * gdn(16, 48)
    qwen3 = catalogs.model("Qwen/Qwen3-32B")
    assert kv_bytes_per_seq(qwen3, "auto", tokens) == kv_bytes_per_seq(dense, "auto", tokens)
    h100 = catalogs.gpu("H100")
    fit = {name: memory_estimate(Setup(m, h100, 1, VLLM_PROFILE), None, seq_tokens=tokens, kv_dtype="auto")
           for name, m in (("hybrid", hybrid), ("dense", dense))}
    assert fit["hybrid"].kv_per_seq_gib < 0.3 * fit["dense"].kv_per_seq_gib
    room = fit["hybrid"].available_gib - fit["hybrid"].weights_gib
    assert fit["hybrid"].max_batch() == int(room / fit["hybrid"].kv_per_seq_gib) >= 4 * fit["dense"].max_batch() > 0


def test_a_parallel_hybrid_keeps_the_kv_of_every_layer_and_adds_its_state(catalogs):
    falcon = catalogs.model("tiiuae/Falcon-H1-34B-Instruct")
    per_token = 72 * 2 * 4 * 128 * 2  # 72 attention layers, 4 KV heads of 128, bf16
    assert kv_bytes_per_seq(falcon, "auto", 32768) == per_token * 32768 + 72 * mamba2(4096, 2, 256, 32, 128)


@pytest.mark.parametrize("model_id,gpu,gpus", [
    ("Qwen/Qwen3.5-27B", "H100", 1), ("Qwen/Qwen3.5-35B-A3B", "H100", 1),
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", "H100", 4), ("Qwen/Qwen3.5-397B-A17B", "H200", 8),
])
def test_native_mtp_on_a_hybrid_entry_launches_without_prefix_caching(catalogs, priors, model_id, gpu, gpus):
    """The MTP heads the configs ship are used, and the capability row for MTP + prefix caching on hybrid models
    (vllm#43559 / #47194) puts --no-enable-prefix-caching in the launch; the pick is not refused. The --explain
    model-size step names the state instead of per-token KV."""
    plan = recommend(RecommendRequest(model=model_id, gpu=gpu, gpus=gpus), catalogs=catalogs, priors=priors)
    assert plan.method == "mtp" and plan.predicted.speedup > 1
    assert "--no-enable-prefix-caching" in plan.vllm.argv, plan.vllm.argv
    m = catalogs.model(model_id)
    size = next(s for s in plan.decision_path if s.rule == "model_size").outcome
    assert f"hybrid target: {m.linear_layers} of {m.layers} layers hold a recurrent state" in size


def test_prompt_lookup_on_a_mamba_entry_does_not_get_the_mtp_mitigation(catalogs, priors):
    plan = recommend(RecommendRequest(model="nvidia/NVIDIA-Nemotron-Nano-9B-v2", gpu="H100", method="ngram",
                                      allow_uncertain=True), catalogs=catalogs, priors=priors)
    assert plan.method == "ngram" and "--no-enable-prefix-caching" not in plan.vllm.argv
