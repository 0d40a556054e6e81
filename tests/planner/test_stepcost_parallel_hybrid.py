"""Issue 37: a parallel hybrid (Falcon-H1: attention and a Mamba-2 mixer side by side in every layer) in the step
cost and the recommendation. The shipped catalog entry (tiiuae/Falcon-H1-7B-Instruct) is compared with its two
counterparts built from the same config: the dense-attention one (the Mamba mixers' weights removed, no state) and
the pure-SSM one (the attention weights removed, every layer a recurrent layer). The counterparts' parameter counts
are summed here from the config fields the catalog cites, not taken from the code under test. Nothing is faked."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from specops.planner import RecommendRequest, recommend
from specops.planner.catalog import load_catalogs
from specops.planner.perfmodel import (
    VLLM_PROFILE,
    Setup,
    allreduce_ms,
    forward_ms,
    kv_bytes_per_seq,
    memory_estimate,
    roofline_terms,
)

# Falcon-H1-7B per layer, from its config.json (hidden 3072, 12 heads / 2 KV heads of 128; Mamba-2 with d_ssm 3072,
# 24 heads of 128, d_state 256, one group, conv 4)
ATTENTION = 3072 * 12 * 128 * 2 + 3072 * 2 * 128 * 2                                   # q, o + k, v
MAMBA = 3072 * (2 * 3072 + 2 * 256 + 24) + 5 * (3072 + 2 * 256) + 3 * 24 + 3072 + 3072 * 3072  # in/conv/A,D,dt/norm/out
STATE = (3 * (3072 + 2 * 256) + 24 * 128 * 256) * 2                                   # conv + SSM state, bf16


@pytest.fixture(scope="module")
def falcon():
    return load_catalogs().model("falcon-h1-7b")


@pytest.fixture(scope="module")
def counterparts(falcon):
    """(dense-attention, pure-SSM) counterparts of the same config."""
    dense = falcon.model_copy(update={"params_b": falcon.params_b - falcon.layers * MAMBA / 1e9, "parallel_ssm_layers": 0,
                                      "state_bytes_per_layer": 0, "architecture": "dense"})
    ssm = falcon.model_copy(update={"params_b": falcon.params_b - falcon.layers * ATTENTION / 1e9,
                                    "parallel_ssm_layers": 0, "linear_layers": falcon.layers})
    return dense, ssm


def _step(model, *, batch: int, kv_len: float, tp: int = 1) -> float:
    setup = Setup(model, load_catalogs().gpu("H100"), tp, VLLM_PROFILE)
    return forward_ms(setup, batch=batch, tokens_per_seq=1, kv_len=kv_len, kv_dtype="auto")


def test_the_catalog_entry_is_a_parallel_hybrid_with_vllms_mamba2_state(falcon):
    assert falcon.kind() == "hybrid" and falcon.parallel_ssm_layers == falcon.layers == 44 and falcon.linear_layers == 0
    assert falcon.model_copy(update={"architecture": None}).kind() == "hybrid"  # derived from the layers when unstated
    assert falcon.state_bytes_per_layer == STATE
    # the cited params_b is the sum of its fields: 2 embeddings (untied) + 44 × (attention + Mamba-2 + SwiGLU MLP)
    assert falcon.params_b == pytest.approx((2 * 130048 * 3072 + 44 * (ATTENTION + MAMBA + 3 * 3072 * 12288)) / 1e9,
                                            abs=0.01)


def test_its_cache_is_the_attention_kv_of_every_layer_plus_a_constant_state(falcon, counterparts):
    """A parallel hybrid's per-sequence cache is the sum of its counterparts': the KV of 44 attention layers (it grows
    with the context) and the state of 44 Mamba layers (it does not). Declaring the layers as linear_layers - the
    only way before the field existed - drops its KV to nothing."""
    dense, ssm = counterparts
    for tokens in (1, 4096, 32768, 262144):
        assert kv_bytes_per_seq(falcon, "auto", tokens) == pytest.approx(
            kv_bytes_per_seq(dense, "auto", tokens) + kv_bytes_per_seq(ssm, "auto", tokens))
    assert kv_bytes_per_seq(ssm, "auto", 32768) == kv_bytes_per_seq(ssm, "auto", 1) == 44 * STATE
    per_token = kv_bytes_per_seq(falcon, "auto", 1001) - kv_bytes_per_seq(falcon, "auto", 1)
    assert per_token == pytest.approx(44 * 2 * 2 * 128 * 2 * 1000)
    old_schema = falcon.model_copy(update={"parallel_ssm_layers": 0, "linear_layers": 44})
    assert kv_bytes_per_seq(old_schema, "auto", 1001) - kv_bytes_per_seq(old_schema, "auto", 1) == 0


def test_its_kv_stays_below_a_dense_model_of_its_size_at_long_context(falcon):
    """Against Qwen3-8B (dense, 36 layers × 8 KV heads): at 32K tokens Falcon-H1-7B holds less per sequence, so more
    sequences fit on one H100, even with its 67 MiB of state and its 1 + γ state slots when speculating."""
    cat = load_catalogs()
    qwen = cat.model("qwen3-8b")
    assert kv_bytes_per_seq(falcon, "auto", 32768) < 0.5 * kv_bytes_per_seq(qwen, "auto", 32768)
    h100 = cat.gpu("H100")
    fal = memory_estimate(Setup(falcon, h100, 1, VLLM_PROFILE), None, seq_tokens=32768, kv_dtype="auto", spec_tokens=3)
    dense = memory_estimate(Setup(qwen, h100, 1, VLLM_PROFILE), None, seq_tokens=32768, kv_dtype="auto")
    assert fal.max_batch() > dense.max_batch()


def test_a_step_reads_both_mixers_and_its_kv_grows_like_the_attention_counterparts(falcon, counterparts):
    """The step time: every layer's attention and Mamba weights are read (the hybrid is slower than either
    counterpart at a short context), its cost grows with the context as fast as the dense-attention counterpart's
    (all 44 layers attend) while the pure-SSM counterpart's does not grow at all; the state is read whatever the
    context, so at batch 64 the hybrid costs more than the dense counterpart plus the Mamba weights alone."""
    dense, ssm = counterparts
    for batch in (1, 64):
        short = {name: _step(m, batch=batch, kv_len=512) for name, m in
                 (("hybrid", falcon), ("dense", dense), ("ssm", ssm))}
        assert short["hybrid"] > max(short["dense"], short["ssm"])
        grow = {name: _step(m, batch=batch, kv_len=32768) - short[name] for name, m in
                (("hybrid", falcon), ("dense", dense), ("ssm", ssm))}
        assert grow["ssm"] == pytest.approx(0.0, abs=1e-9)
        assert grow["hybrid"] == pytest.approx(grow["dense"], rel=0.02) and grow["hybrid"] > 0
    h100 = load_catalogs().gpu("H100")
    bw = h100.bandwidth_gbs * 1e9 * VLLM_PROFILE.bandwidth_efficiency
    extra = _step(falcon, batch=64, kv_len=512) - _step(dense, batch=64, kv_len=512)
    mamba_reads_ms = 44 * MAMBA * 2 / bw * 1000
    state_reads_ms = 64 * 2 * 44 * STATE / bw * 1000  # read once and written once per sequence
    assert extra > mamba_reads_ms + 0.9 * state_reads_ms
    # a verification of 4 tokens writes the state after each position (rollback): 3 more writes per sequence
    setup = Setup(falcon, h100, 1, VLLM_PROFILE)
    mem1, _ = roofline_terms(setup, batch=8, tokens_per_seq=1, kv_len=4096, kv_dtype="auto")
    mem4, _ = roofline_terms(setup, batch=8, tokens_per_seq=4, kv_len=4096, kv_dtype="auto")
    assert (mem4 - mem1) / 1000 * bw >= 8 * 3 * 44 * STATE * 0.999


def test_tensor_parallel_reduces_the_two_mixers_separately(falcon, counterparts):
    """vLLM's FalconH1ParallelHybrid: the Mamba mixer's out_proj and attention's o_proj are separate row-parallel
    layers, so a TP layer all-reduces three times (attention, Mamba, MLP), the dense counterpart twice."""
    dense, _ = counterparts
    h100 = load_catalogs().gpu("H100")
    hyb, den = (allreduce_ms(Setup(m, h100, 2, VLLM_PROFILE), 8) for m in (falcon, dense))
    assert hyb == pytest.approx(den * 3 / 2)


def test_the_schema_refuses_layers_counted_twice_or_a_parallel_hybrid_without_state(falcon):
    with pytest.raises(ValidationError, match="exceed layers.*To fix"):
        type(falcon).model_validate({**falcon.model_dump(), "linear_layers": 1})
    with pytest.raises(ValidationError, match="state_bytes_per_layer is 0.*To fix"):
        type(falcon).model_validate({**falcon.model_dump(), "state_bytes_per_layer": 0})


def test_recommend_names_the_parallel_hybrid_and_prices_its_state():
    """n-gram on Falcon-H1-7B / H100 at 8K: the path says every layer runs a Mamba mixer beside attention, with its
    KV per token as an all-attention model's and the state per sequence; the hybrid + MTP prefix-caching rule of the
    capability table does not fire for prompt lookup; the speculative step pays the state's rollback writes."""
    plan = recommend(RecommendRequest(model="falcon-h1-7b", gpu="H100", method="ngram", context_len=8192,
                                      batch_size=32, allow_uncertain=True))
    size = next(s for s in plan.decision_path if s.rule == "model_size").outcome
    assert "44 of 44 layers run a Mamba mixer beside attention (parallel hybrid)" in size
    assert "44 KiB per token" in size and "66.9 MiB per sequence" in size
    assert "--no-enable-prefix-caching" not in plan.vllm.argv
    p = plan.predicted
    assert 0 < p.speedup < p.mean_acceptance_length
