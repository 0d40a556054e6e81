"""Roofline, draft cost, MoE expert reads, memory."""

from specops.planner.perfmodel import (
    VLLM_PROFILE,
    DraftSpec,
    Setup,
    evaluate,
    forward_ms,
    head_params,
    kv_bytes_per_seq,
    memory_estimate,
    weight_bytes_read,
)
from specops.planner.priors import AcceptancePrior


def test_moe_verification_reads_more_experts_as_tokens_grow(catalogs):
    m = catalogs.model("mixtral-8x7b-instruct")
    one, four, many = (weight_bytes_read(m, n) for n in (1, 4, 64))
    assert one < four < many
    assert abs(one / 2 - 12.9e9) / 12.9e9 < 0.01  # one token reads the active parameters
    assert abs(many / 2 - m.params_b * 1e9) / (m.params_b * 1e9) < 0.01


def test_dense_verification_is_nearly_free_at_batch_one_and_costly_when_compute_bound(catalogs):
    s = Setup(catalogs.model("llama-3.1-8b-instruct"), catalogs.gpu("H100"), 1, VLLM_PROFILE)
    small = forward_ms(s, batch=1, tokens_per_seq=5, kv_len=512, kv_dtype="auto") / \
        forward_ms(s, batch=1, tokens_per_seq=1, kv_len=512, kv_dtype="auto")
    big = forward_ms(s, batch=512, tokens_per_seq=5, kv_len=512, kv_dtype="auto") / \
        forward_ms(s, batch=512, tokens_per_seq=1, kv_len=512, kv_dtype="auto")
    assert small < 1.05
    assert big > 2.5


def test_eagle_head_is_one_layer_plus_the_full_vocabulary_lm_head(catalogs):
    m = catalogs.model("llama-3.1-8b-instruct")
    params = head_params(m, "eagle3")
    assert m.vocab * m.hidden < params < m.vocab * m.hidden + 3 * (m.params_b * 1e9 / m.layers)


def test_turboquant_shrinks_the_kv_cache_but_keeps_boundary_layers(catalogs):
    m = catalogs.model("llama-3.1-8b-instruct")
    auto, tq = kv_bytes_per_seq(m, "auto", 1000), kv_bytes_per_seq(m, "turboquant_k8v4", 1000)
    assert 2.0 < auto / tq < 2.6


def test_a_kv_cache_that_cannot_hold_the_batch_reports_the_largest_batch_that_fits(catalogs):
    s = Setup(catalogs.model("llama-3.1-8b-instruct"), catalogs.gpu("H100"), 1, VLLM_PROFILE)
    mem = memory_estimate(s, None, seq_tokens=32768, kv_dtype="auto")
    assert not mem.fits(64)
    assert mem.fits(mem.max_batch()) and not mem.fits(mem.max_batch() + 1)


def test_speedup_uses_tau_over_step_cost(catalogs):
    s = Setup(catalogs.model("llama-3.1-8b-instruct"), catalogs.gpu("H100"), 1, VLLM_PROFILE)
    d = DraftSpec("ngram", None, 0.0)
    e = evaluate(s, d, AcceptancePrior(0.5, 1.0, "x"), gamma=3, kv_dtype="auto", batch=1, context_len=512,
                 output_len=128)
    assert abs(e.tau - 1.875) < 1e-9
    assert abs(e.speedup - e.baseline_tpot_ms / e.tpot_ms) < 1e-9
    assert e.ttft_ms == e.baseline_ttft_ms  # n-gram drafts need no prefill
