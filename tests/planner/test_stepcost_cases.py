"""Issue 37, second and third rounds: the step-cost terms added to close the baseline cross-validation (TP all-reduce
volume, w4a16 weights, the expert read efficiency fitted as a shared key), the hybrid catalog entries (Nemotron-H,
Jamba) and the draft-LM cost pooled over the draft-cost sources. Every published row a test checks is predicted by a fit made without the row's own source (the step-cost
profiles of stepcost.fit_engine_profiles, the draft-cost pair of draftcost.loso_draft_cost). Shipped catalogs,
data and profiles; nothing is faked."""

from __future__ import annotations

import math

import pytest

from specops.planner import RecommendRequest, recommend
from specops.planner.catalog import load_catalogs
from specops.planner.perfmodel import (
    VLLM_PROFILE,
    Setup,
    _peak_flops,
    allreduce_ms,
    kv_bytes_per_seq,
    memory_estimate,
    recurrent_state_bytes,
    roofline_terms,
)
from specops.planner.stepcost import fit_engine_profiles, load_step_rows, predict_row, scored_rows


@pytest.fixture(scope="module")
def catalogs():
    return load_catalogs()


@pytest.fixture(scope="module")
def rows():
    return scored_rows(load_step_rows())[0]


def held_out(rows, row_id):
    """The row and the profile a fit made without the row's source gives it."""
    row = next(r for r in rows if r.id == row_id)
    fit = fit_engine_profiles([r for r in rows if r.source != row.source])
    return row, fit.profile(row)


def test_a_tp_prefill_pays_for_the_hidden_states_its_all_reduces_carry(rows, catalogs):
    """TensorRT-LLM's 70B TP4 prefill of 2048 tokens on H100 (performance.md, 109 ms): with the all-reduce volume
    the held-out prediction is within 15%; charging only a fixed latency per all-reduce (the old model: a profile
    without link bandwidths) misses it by more than 20%."""
    row, prof = held_out(rows, "TRT-perf-ttft-H100-70B-2048")
    with_volume = predict_row(row, prof)
    latency_only = predict_row(row, prof.model_copy(update={"moe_link_gbs": {}}))
    assert abs(math.log(row.value / with_volume)) < 0.15 < 0.2 < abs(math.log(row.value / latency_only))
    setup = Setup(catalogs.model(row.model), catalogs.gpu("H100"), 4, prof)
    assert allreduce_ms(setup, 2048) > 10 * allreduce_ms(setup, 4) / 4 > 0  # grows with the tokens, not fixed
    assert allreduce_ms(Setup(setup.model, setup.gpu, 1, prof), 2048) == 0.0


def test_four_bit_weights_multiply_at_the_bf16_peak(rows, catalogs):
    """AWQ DeepSeek-R1 on 8×H100 (tenstorrent issue #356, TTFT of a 2048-token prompt, 127 ms): its 4-bit weights
    are dequantised into BF16 GEMMs. Held out, the prediction is within 15%; at the FP8 peak it is not."""
    h100 = catalogs.gpu("H100")
    awq = catalogs.model("deepseek-ai/DeepSeek-V3").model_copy(update={"weight_bits": 4.0})
    fp8 = awq.model_copy(update={"weight_bits": 8.0})
    assert _peak_flops(h100, awq) == h100.bf16_tflops * 1e12 and _peak_flops(h100, fp8) == h100.fp8_tflops * 1e12
    row, prof = held_out(rows, "tt356-DSR1-AWQ-8xH100-2048-ttft")
    assert abs(math.log(row.value / predict_row(row, prof))) < 0.15
    import specops.planner.perfmodel as perfmodel

    real = perfmodel.W4A16_BITS
    try:
        perfmodel.W4A16_BITS = 0.0  # the old rule: every weight of 8.5 bits or fewer at the FP8 peak
        assert abs(math.log(row.value / predict_row(row, prof))) > 0.2
    finally:
        perfmodel.W4A16_BITS = real


@pytest.mark.parametrize("model_id,attention,recurrent,state", [
    # Nemotron-H-8B: Mamba-2, conv (4-1)·(8192 + 2·8·128) + SSM 128·64·128 elements at bf16
    ("nvidia/Nemotron-H-8B-Base-8K", 4, 24, (3 * (8192 + 2 * 8 * 128) + 128 * 64 * 128) * 2),
    # Jamba-v0.1: Mamba-1, conv (4-1)·8192 + SSM 8192·16 elements at bf16
    ("ai21labs/Jamba-v0.1", 4, 28, (3 * 8192 + 8192 * 16) * 2),
])
def test_hybrid_targets_hold_state_not_kv_in_their_mamba_layers(catalogs, model_id, attention, recurrent, state):
    m = catalogs.model(model_id)
    assert m.kind() == "hybrid" and m.linear_layers == recurrent and m.layers - m.linear_layers == attention
    assert m.state_bytes_per_layer == state
    per_token = kv_bytes_per_seq(m, "auto", 1001) - kv_bytes_per_seq(m, "auto", 1)
    assert per_token == pytest.approx(attention * 2 * m.kv_heads * m.head_dim * 2 * 1000)  # attention layers only
    setup = Setup(m, catalogs.gpu("H200"), 1, VLLM_PROFILE)
    base = memory_estimate(setup, None, seq_tokens=4096, kv_dtype="auto")
    spec = memory_estimate(setup, None, seq_tokens=4096, kv_dtype="auto", spec_tokens=4)
    assert (spec.kv_per_seq_gib - base.kv_per_seq_gib) * 2**30 == pytest.approx(4 * recurrent_state_bytes(m))
    # a verification of 5 tokens writes the state after each position (rollback): 4 more writes than decode
    mem1, _ = roofline_terms(setup, batch=8, tokens_per_seq=1, kv_len=4096, kv_dtype="auto")
    mem5, _ = roofline_terms(setup, batch=8, tokens_per_seq=5, kv_len=4096, kv_dtype="auto")
    reads = (mem5 - mem1) / 1000 * catalogs.gpu("H200").bandwidth_gbs * 1e9 * VLLM_PROFILE.bandwidth_efficiency
    assert reads >= 8 * 4 * recurrent_state_bytes(m) * 0.999


@pytest.mark.parametrize("model_id", ["nvidia/Nemotron-H-8B-Base-8K", "ai21labs/Jamba-v0.1"])
def test_recommend_on_a_hybrid_target_names_its_state_and_applies_only_the_rows_for_its_method(model_id):
    """n-gram on a hybrid target: the path names the recurrent state; the hybrid + MTP rows of the capability
    table (prefix caching corrupts MTP drafts on Mamba/GDN models) do not fire for prompt lookup."""
    plan = recommend(RecommendRequest(model=model_id, gpu="H200", method="ngram", allow_uncertain=True))
    size = next(s for s in plan.decision_path if s.rule == "model_size").outcome
    assert "hybrid target:" in size and "layers hold a recurrent state" in size
    assert "--no-enable-prefix-caching" not in plan.vllm.argv
    assert plan.predicted.speedup > 0


def test_the_draft_lm_cost_pair_that_other_sources_pick_fits_amds_sweep_better_than_the_old_term():
    """AMD's vLLM draft-size sweep (1B/3B/8B drafts for 70B and 405B), held out: the (per-layer, fixed) draft-LM
    cost the other draft-cost sources pick (NVIDIA's TensorRT-LLM sweep, Liu et al.'s c values) scores it better
    than the old 0.08 ms per layer with no fixed term, and it is what ships for vLLM."""
    from specops.planner.draftcost import _median, best_draft_cost, draft_cost_grid, source_errors

    grid = draft_cost_grid(VLLM_PROFILE)
    amd = next(s for s in grid[(0.0, 0.0)] if s.startswith("ROCm/rocm-blogs"))
    pair = best_draft_cost(grid, [s for s in grid[(0.0, 0.0)] if s != amd])
    old = source_errors(VLLM_PROFILE.model_copy(update={"draft_layer_overhead_ms": 0.08, "draft_lm_overhead_ms": 0.0}))
    assert _median(grid[pair][amd]) < _median(old[amd]) - 0.05
    assert (VLLM_PROFILE.draft_layer_overhead_ms, VLLM_PROFILE.draft_lm_overhead_ms) == \
        best_draft_cost(grid, list(grid[(0.0, 0.0)]))


def test_ngram_verification_is_priced_by_gamma_at_every_context():
    """Issue 37: n-gram speedups sat at ~99% of τ whatever γ and context. At batch 64 on one H100 the share of τ
    a step keeps falls with every extra verified token, by an amount that depends on the context (the KV reads
    a long prompt adds to every step dilute the verification's extra tokens)."""
    def share(ctx, gamma):
        p = recommend(RecommendRequest(model="llama-3.1-8b-instruct", gpu="H100", context_len=ctx, batch_size=64,
                                       method="ngram", num_speculative_tokens=gamma, allow_uncertain=True)).predicted
        return p.speedup / p.mean_acceptance_length

    short, long_ = [share(1024, g) for g in (1, 3, 5)], [share(32768, g) for g in (1, 3, 5)]
    assert short[0] > short[1] > short[2] and long_[0] > long_[1] > long_[2] and max(short + long_) < 0.95
    assert short[0] - short[2] > long_[0] - long_[2]


def test_tp_decode_pays_the_all_reduce_latency_the_other_sources_fit(rows):
    """NVIDIA NIM's Llama-3.3-70B FP8 on 2×H100 at concurrency 1 (ITL 18.6 ms at a 5000-token prompt): the
    all-reduce latency fitted without NIM's rows is above the old 0.012 ms per all-reduce, and with it the held-out
    prediction of that row is closer than with the old latency."""
    row, prof = held_out(rows, "NIM-L33-70B-5k-c1")
    assert prof.allreduce_ms_per_layer["nvlink"] > 0.012
    old = prof.model_copy(update={"allreduce_ms_per_layer": {"nvlink": 0.012, "xgmi": 0.015, "pcie": 0.05, "none": 0.0}})
    assert abs(math.log(row.value / predict_row(row, prof))) < abs(math.log(row.value / predict_row(row, old))) - 0.05


def _class_medians(scored) -> dict[str, float]:
    import statistics

    out: dict[str, list[float]] = {}
    for s in scored:
        out.setdefault(s.row.engine_class, []).append(abs(s.log_error))
    return {k: statistics.median(v) for k, v in out.items()}


def test_sglang_rows_held_out_improve_once_the_expert_read_efficiency_is_fitted(rows, monkeypatch):
    """Issue 37, third round: expert_half_mb (how efficiently grouped GEMMs read small experts) is a shared fitted
    constant of the step LOSO. Each source held out in turn, the fit picks 1.0-4.7 MB, never the former 9.4; SGLang's
    rows (Qwen3-30B-A3B at TP2/TP4, gpt-oss-20b, Qwen3-8B, Vicuna) go from above 0.20 to at most 0.20, the other
    engine classes no worse. The old rule (9.4 MB fixed, not fitted) is recomputed here and shown to miss."""
    import specops.planner.perfmodel as perfmodel
    import specops.planner.stepcost as stepcost
    from specops.planner.stepcost import step_loso

    picks: list[float] = []

    def recording_fit(train):  # the real fit; what each held-out fold picks is kept
        fit = fit_engine_profiles(train)
        picks.append(fit.profiles["pooled"].expert_half_mb)
        return fit

    monkeypatch.setattr(stepcost, "fit_engine_profiles", recording_fit)
    new = _class_medians(step_loso(rows))
    assert len(picks) == len({r.source for r in rows})
    assert max(picks) < 9.4 and perfmodel.VLLM_PROFILE.expert_half_mb in picks
    monkeypatch.setattr(stepcost, "fit_engine_profiles", fit_engine_profiles)
    for name, prof in list(perfmodel.ENGINE_PROFILES.items()):
        monkeypatch.setitem(perfmodel.ENGINE_PROFILES, name, prof.model_copy(update={"expert_half_mb": 9.4}))
    monkeypatch.setattr(stepcost, "SHARED_KEYS", tuple(k for k in stepcost.SHARED_KEYS if k != "expert_half_mb"))
    old = _class_medians(step_loso(rows))
    assert old["sglang"] > 0.20 >= new["sglang"]
    assert new["vllm"] <= old["vllm"] + 1e-9 and new["tensorrt-llm"] <= old["tensorrt-llm"] + 1e-9
