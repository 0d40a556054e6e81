"""The performance model: step times from a roofline, draft costs, tokens per step, memory.

All formulas are documented with sources in docs/performance-model.md. Units: bytes, FLOPs,
milliseconds, GiB. The engine constants (efficiencies, overheads) live in :class:`EngineProfile`
and are passed in explicitly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specops.planner.engine_profile import (  # noqa: F401 - re-exported: the profiles' callers import them from here
    EAGER_PROFILE,
    ENGINE_PROFILES,
    PROFILE_SOURCES,
    SAMPLER_BYTES,
    VLLM_PROFILE,
    EngineProfile,
    eager_profile,
    engine_profile,
)
from specops.planner.moe import (
    all_to_all_ms,
    effective_tokens,
    expert_read_efficiency,
    expert_split,
    experts_touched,
)
from specops.planner.priors import AcceptancePrior
from specops.planner.types import GPU, ModelSpec
from specops.speculation import METHODS

GIB = 1024 ** 3
# Bytes per cached K/V element (or the 16-bit size divided by the compression vLLM reports).
# TurboQuant ratios from shared/reference/vllm-0.33-speculative.md (vLLM's own figures).
KV_ELEMENT_BYTES = {
    "auto": None, "float16": 2.0, "bfloat16": 2.0, "fp8": 1.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0,
    "fp8_inc": 1.0, "fp8_ds_mla": 1.0, "fp8_per_token_head": 1.0, "int8_per_token_head": 1.0,
    "int4_per_token_head": 0.5, "nvfp4": 0.5625, "turboquant_k8v4": 2 / 2.6, "turboquant_4bit_nc": 2 / 3.8,
    "turboquant_k3v4_nc": 2 / 3.5, "turboquant_3bit_nc": 2 / 4.9,
}
# vllm#49548 (open; shared/reference/vllm-0.33-speculative.md "Corrections and additions"): with a
# per-batch γ schedule, TPOT is worse even where every range has K=0 - +6.6% at concurrency 2, +21.6%
# at 189 (the schedule forces PIECEWISE CUDA graphs). Interpolated in log2(batch) between the two points.
SCHEDULE_COST = ((2, 0.066), (189, 0.216))
MOE_REF_TOP_K = 8
"""moe_layer_overhead_ms is the fixed cost of a MoE layer whose tokens each go to 8 experts."""
PREFILL_TOKENS = 64
"""A forward with at least this many new tokens per sequence is a prefill (chunk) for the compute efficiency."""
TURBOQUANT_FULL_LAYERS = 4  # first/last 2 attention layers of dense models stay at full precision


@dataclass(frozen=True)
class Setup:
    """Target model on its hardware."""

    model: ModelSpec
    gpu: GPU
    tp: int
    profile: EngineProfile
    dp_attention: bool = False
    """Issue 44: attention data parallel over the ``tp`` GPUs, experts expert parallel over them (vLLM
    ``--data-parallel-size tp --enable-expert-parallel``, TP 1 a rank): each rank holds the dense weights whole and
    only its own sequences' KV (no MLA latent copies), so ``batch`` is the replica's total over its ranks."""


@dataclass(frozen=True)
class DraftSpec:
    """What drafts: a head (eagle/eagle3/mtp/medusa), a model (draft_model/dflash), or the prompt."""

    method: str
    id: str | None
    params_b: float
    generation: str | None = None
    model: ModelSpec | None = None  # for draft_model
    typical: bool = False           # size estimated, not from a known draft


def bytes_per_param(model: ModelSpec) -> float:
    return model.weight_bits / 8


_expert_split = expert_split  # experts_touched (re-exported) and expert_split live in planner/moe.py


def _moe_bytes(model: ModelSpec, n_tokens: float) -> tuple[float, float]:
    """(dense weight bytes, routed-expert weight bytes) one forward of n independent tokens reads."""
    dense, experts = _expert_split(model)
    frac = experts_touched(model, n_tokens) / model.experts if experts else 0.0
    return dense * bytes_per_param(model), experts * frac * bytes_per_param(model)


def weight_bytes_read(model: ModelSpec, n_tokens: int) -> float:
    """Weights one forward reads: all dense weights + the routed experts that n tokens activate
    (:func:`experts_touched`)."""
    dense, experts = _moe_bytes(model, n_tokens)
    return dense + experts


def kv_element_bytes(model: ModelSpec, kv_dtype: str) -> float:
    b = KV_ELEMENT_BYTES.get(kv_dtype, 2.0)
    return (4.0 if model.dtype == "float32" else 2.0) if b is None else b


def recurrent_state_bytes(model: ModelSpec) -> float:
    """Bytes of one sequence's recurrent state over a hybrid model's linear/Mamba layers (constant in length): the
    sequential hybrid's linear layers and the parallel hybrid's attention + SSM layers (Falcon-H1), which keep it
    beside their KV."""
    return model.recurrent_layers * model.state_bytes_per_layer


def kv_bytes_per_seq(model: ModelSpec, kv_dtype: str, tokens: float) -> float:
    """Bytes of KV cache one sequence of `tokens` tokens holds (whole model, before TP): per-token K/V of the
    attention layers, plus a hybrid model's recurrent state, which does not grow with the tokens. A parallel
    hybrid's layers (parallel_ssm_layers) attend, so they count among the attention layers and hold state too."""
    per_layer = (model.kv_lora_rank + (model.kv_rope_dim or 0)) if model.kv_lora_rank else \
        2 * model.kv_heads * model.head_dim
    elem = kv_element_bytes(model, kv_dtype)
    full_layers = model.layers - model.sliding_layers - model.linear_layers
    total = recurrent_state_bytes(model)
    if kv_dtype.startswith("turboquant") and not model.kv_lora_rank:
        keep = min(TURBOQUANT_FULL_LAYERS, full_layers)
        total += keep * per_layer * kv_element_bytes(model, "auto") * tokens
        full_layers -= keep
    total += full_layers * per_layer * elem * tokens
    if model.sliding_layers and model.sliding_window:
        total += model.sliding_layers * per_layer * elem * min(tokens, model.sliding_window)
    return total


def kv_replication(model: ModelSpec, tp: int, dp_attention: bool = False) -> float:
    """KV copies across TP ranks: MLA latents are replicated; KV heads split until there are fewer than TP.
    Data-parallel attention: one copy (each rank caches only its own sequences)."""
    if dp_attention:
        return 1.0
    if model.kv_lora_rank:
        return float(tp)
    return max(1.0, tp / model.kv_heads)


W4A16_BITS = 7.0
"""Weights stored in fewer bits than this (AWQ, GPTQ, MXFP4 on GPUs without FP4 tensor cores) are dequantised to
BF16 inside the GEMM: the multiply runs at the BF16 peak, not the FP8 one (w4a16 kernels: Marlin, AWQ)."""


def _peak_flops(gpu: GPU, model: ModelSpec) -> float:
    if W4A16_BITS <= model.weight_bits <= 8.5 and gpu.fp8_tflops:
        return gpu.fp8_tflops * 1e12
    return gpu.bf16_tflops * 1e12


def roofline_terms(setup: Setup, *, batch: int, tokens_per_seq: int, kv_len: float, kv_dtype: str,
                   scored: int | None = None) -> tuple[float, float]:
    """(memory time, compute time) in ms of one forward, before overheads: the two sides of the roofline.
    ``scored``: positions whose logits are computed (default every new token; a prefill scores one per sequence)."""
    m, gpu, p = setup.model, setup.gpu, setup.profile
    n = batch * tokens_per_seq
    scored = n if scored is None else scored
    dense_b, expert_b = _moe_bytes(m, effective_tokens(batch, tokens_per_seq, p.routing_locality))
    # routed experts are read at a lower efficiency (small grouped GEMMs): counted as more bytes
    # a hybrid model's recurrent state is read once (in kv_bytes_per_seq) and written once per new token: a
    # verification keeps the state after every verified position so that a rejected draft can roll back
    mem_bytes = dense_b * (setup.tp if setup.dp_attention else 1) + (expert_b / expert_read_efficiency(m, p.expert_half_mb) if expert_b else 0.0) + \
        batch * (kv_bytes_per_seq(m, kv_dtype, kv_len) + tokens_per_seq * recurrent_state_bytes(m)) * \
        kv_replication(m, setup.tp, setup.dp_attention)
    attn_layers = m.layers - m.linear_layers
    attn_len = kv_len
    if m.sliding_layers and m.sliding_window:
        attn_len = (kv_len * (attn_layers - m.sliding_layers) + min(kv_len, m.sliding_window) * m.sliding_layers) / \
            attn_layers
    # recurrent layers: ~4 FLOPs per state element per token (decay, update, readout) instead of attention over L
    lm_head = m.vocab * m.hidden  # the LM head runs only on the positions that are scored
    flops = 2 * (m.active_b * 1e9 - lm_head) * n + 2 * lm_head * scored + \
        4 * attn_layers * m.heads * m.head_dim * attn_len * n + recurrent_state_bytes(m) * n
    t_mem = mem_bytes / setup.tp / (gpu.bandwidth_gbs * 1e9 * p.bandwidth_efficiency)
    eff = p.prefill_compute_efficiency if tokens_per_seq >= PREFILL_TOKENS and p.prefill_compute_efficiency else \
        p.compute_efficiency
    t_cmp = flops / setup.tp / (_peak_flops(gpu, m) * eff)
    return t_mem * 1000, t_cmp * 1000


def overlapped(t_mem: float, t_cmp: float, penalty: float) -> float:
    """A forward's roofline time: the larger of its memory and compute times plus the profile's penalty share of
    the smaller (they overlap imperfectly). Chunked prefill's packed steps use the same rule."""
    return max(t_mem, t_cmp) + penalty * min(t_mem, t_cmp)


def forward_ms(setup: Setup, *, batch: int, tokens_per_seq: int, kv_len: float, kv_dtype: str,
               overhead_ms: float | None = None, scored: int | None = None) -> float:
    """One forward of `batch` sequences, each with `tokens_per_seq` new tokens over `kv_len` cached ones;
    ``scored``: positions whose logits are computed and sampled (default: all new tokens - a verification scores
    every draft position; a prefill scores only each sequence's last position)."""
    m, gpu, p = setup.model, setup.gpu, setup.profile
    n = batch * tokens_per_seq
    scored = n if scored is None else scored
    t_mem, t_cmp = roofline_terms(setup, batch=batch, tokens_per_seq=tokens_per_seq, kv_len=kv_len, kv_dtype=kv_dtype,
                                  scored=scored)
    t = overlapped(t_mem, t_cmp, p.overlap_penalty)
    fixed = p.step_overhead_ms if overhead_ms is None else overhead_ms
    comm = allreduce_ms(setup, n)
    sampler = scored * m.vocab * p.sampler_bytes / (gpu.bandwidth_gbs * 1e9 * p.bandwidth_efficiency) / setup.tp
    return t + fixed + p.layer_overhead_ms * m.layers + comm + sampler * 1000 + p.token_overhead_ms * scored + \
        moe_ms(setup, n)


def allreduce_ms(setup: Setup, n_tokens: int) -> float:
    """Tensor-parallel all-reduces of one forward: two per layer (after attention and after the MLP), each a fixed
    latency plus a ring all-reduce of the n tokens' 16-bit hidden states, of which each GPU sends and receives
    2·(tp−1)/tp over its link (moe_link_gbs): negligible for a decode step, tens of ms for a TP prefill of thousands
    of tokens. A parallel hybrid's layer reduces its Mamba mixer's output separately from attention's (vLLM
    falcon_h1.py: the mixer's out_proj and attention's o_proj are each a RowParallelLinear): three per layer."""
    if setup.tp <= 1 or setup.dp_attention:  # data-parallel attention: TP 1 a rank, no all-reduce
        return 0.0
    m, p, link = setup.model, setup.profile, setup.profile.moe_link_gbs.get(setup.gpu.interconnect, 0.0)
    latency = p.allreduce_ms_per_layer.get(setup.gpu.interconnect, 0.05)
    volume = n_tokens * m.hidden * 2 * 2 * (setup.tp - 1) / setup.tp
    return (2 * m.layers + m.parallel_ssm_layers) * (latency + (volume / (link * 1e9) * 1000 if link else 0.0))


def moe_ms(setup: Setup, n_tokens: int) -> float:
    """What MoE layers add beyond their weight reads: a fixed cost per MoE layer, and, with the experts
    split over several GPUs, the exchange of every token's hidden state with its k experts' ranks and back
    (2·n·k·hidden·2 bytes per layer, a (tp−1)/tp share of it leaves the GPU) - it grows with the tokens
    verified. Zero for dense models."""
    m, p = setup.model, setup.profile
    if not m.is_moe:
        return 0.0
    link = p.moe_link_gbs.get(setup.gpu.interconnect, 0.0)
    # the fixed cost grows with the experts each token is routed to (top-k: k small GEMMs per token-layer);
    # fitted at k = 8 (Qwen3-30B-A3B, DeepSeek-V3), scaled for other k (gpt-oss: k = 4)
    return p.moe_layer_overhead_ms * m.experts_per_token / MOE_REF_TOP_K * m.layers + \
        all_to_all_ms(m, setup.gpu, setup.tp, n_tokens, link)


def schedule_cost(batch: int) -> float:
    """Fraction by which a per-batch γ schedule makes every step slower at this batch (vllm#49548)."""
    (b0, c0), (b1, c1) = SCHEDULE_COST
    x = (math.log2(max(1, batch)) - math.log2(b0)) / (math.log2(b1) - math.log2(b0))
    return c0 + (c1 - c0) * min(1.0, max(0.0, x))


def prefill_ms(setup: Setup, context_len: int, kv_dtype: str) -> float:
    """Time to first token for one request: a forward over the whole prompt."""
    return forward_ms(setup, batch=1, tokens_per_seq=context_len, kv_len=context_len / 2, kv_dtype=kv_dtype,
                      scored=1) + setup.profile.prefill_overhead_ms


def head_params(target: ModelSpec, method: str) -> float:
    """Typical EAGLE/MTP head: one target-sized dense layer + an LM head over the whole vocabulary
    (+ EAGLE-3's fc fusing three hidden states). Medusa: 5 heads of (h² ResBlock + LM head)."""
    h = target.hidden
    dense, _ = _expert_split(target)
    layer = (dense - 2 * target.vocab * h) / target.layers if not target.is_moe else 12 * h * h
    layer = max(layer, 12 * h * h * 0.5)
    if method == "medusa":
        return 5 * (h * h + target.vocab * h)
    if method == "dflash":
        return 5 * layer + target.vocab * h
    extra = 3 * h * h if method == "eagle3" else 2 * h * h if method == "eagle" else 0
    return layer + target.vocab * h + extra


EAGLE3_DRAFT_VOCAB = 32_000
"""The released EAGLE-3 heads' own LM head vocabulary (vllm-project/speculators ``Eagle3SpeculatorConfig``: a
32K draft vocabulary mapped onto the target's 128K; SpecForge trains the same ``draft_vocab_size``)."""


def lm_head_excess(target: ModelSpec, method: str) -> float:
    """Weights an EAGLE-1/2 head (method ``eagle``) reads at every draft step beyond what an EAGLE-3 head of the
    same target reads: EAGLE-1/2 score the target's whole vocabulary through the target's LM head (SGLang and vLLM
    share it with the head), EAGLE-3 heads score EAGLE3_DRAFT_VOCAB tokens - (V − 32K)·h, 394M weights (0.79 GB in
    16 bits) per draft step for Llama-3.1-8B, none for 32K-vocabulary targets (Vicuna, Llama 2).

    Relative, not absolute: :func:`head_params` keeps pricing the EAGLE-3 head with a full-vocabulary LM head,
    because pricing it at 32K made EAGLE-3 and MTP worse held out (issue 37, 2026-12-03: EAGLE-3 0.147 → 0.157,
    all rows 0.186 → 0.203) - that price carries costs the model has no term for. What the two heads' published
    ratios support is the difference between them: the EAGLE-3 paper's SGLang and vLLM tables (EAGLE/EAGLE-3 0.67-0.77
    at τ ratio 0.82, vLLM #20780) and SGLang PR #4247 (EAGLE-2 vs EAGLE-3, num_steps 8: 230 vs 379 tok/s at τ 3.76
    vs 5.39, an EAGLE-2 step 1.15x the EAGLE-3 step). A cost only: the head's memory is unchanged (the LM head
    is the target's own)."""
    if method != "eagle":
        return 0.0
    return max(0, target.vocab - EAGLE3_DRAFT_VOCAB) * target.hidden


def _head_setup(setup: Setup, params: float) -> Setup:
    t = setup.model
    head = t.model_copy(update={"params_b": params / 1e9, "active_params_b": None, "layers": 1, "experts": None,
                                "linear_layers": 0, "state_bytes_per_layer": 0, "parallel_ssm_layers": 0,
                                "experts_per_token": None, "sliding_layers": 0, "weight_bits": 16})
    return Setup(head, setup.gpu, setup.tp, setup.profile, setup.dp_attention)


NGRAM_THREADS = 8
"""vLLM parallelises the n-gram lookup over the batch with at most 8 threads (PR #24986)."""


def lookup_ms(profile: EngineProfile, *, batch: int, history: float) -> float:
    """Prompt lookup (n-gram / suffix) per step: a fixed part plus a scan of every request's history on the CPU,
    spread over up to NGRAM_THREADS threads. The verification it feeds is priced by forward_ms (γ+1 tokens over
    the context: KV reads, attention FLOPs, sampling)."""
    scan = profile.ngram_lookup_ns_per_token * history * batch / min(NGRAM_THREADS, max(1, batch)) / 1e6
    return profile.ngram_step_ms + scan


def draft_ms(setup: Setup, draft: DraftSpec, *, gamma: int, batch: int, kv_len: float, kv_dtype: str) -> float:
    """Cost of drafting γ tokens for a batch (one speculative step)."""
    p = setup.profile
    info = METHODS[draft.method]
    if info.drafting == "lookup" or gamma == 0:
        return lookup_ms(p, batch=batch, history=kv_len) if gamma else 0.0
    per_step = p.head_spec_overhead_ms if info.family == "head" else 0.0
    if info.family in ("head", "native") and info.drafting == "sequential":
        head = _head_setup(setup, draft.params_b * 1e9 + lm_head_excess(setup.model, draft.method))
        one = forward_ms(head, batch=batch, tokens_per_seq=1, kv_len=kv_len, kv_dtype=kv_dtype,
                         overhead_ms=p.draft_step_overhead_ms)
        return gamma * one + per_step  # sequential: each draft token needs the previous one
    if info.family == "head":  # Medusa: all heads in one pass
        head = _head_setup(setup, draft.params_b * 1e9 * min(gamma, 5) / 5)
        return forward_ms(head, batch=batch, tokens_per_seq=1, kv_len=0, kv_dtype=kv_dtype,
                          overhead_ms=p.draft_step_overhead_ms) + per_step
    model = draft.model
    if model is None:
        raise ValueError(f"draft {draft.id} has no architecture")
    dsetup = Setup(model, setup.gpu, setup.tp, p, setup.dp_attention)
    fixed = p.draft_step_overhead_ms + p.draft_lm_overhead_ms + p.draft_layer_overhead_ms * model.layers
    if draft.method == "dflash":  # one parallel block pass over γ positions
        return forward_ms(dsetup, batch=batch, tokens_per_seq=gamma, kv_len=kv_len, kv_dtype=kv_dtype,
                          overhead_ms=fixed)
    one = forward_ms(dsetup, batch=batch, tokens_per_seq=1, kv_len=kv_len, kv_dtype=kv_dtype, overhead_ms=fixed)
    return gamma * one


def draft_prefill_ms(setup: Setup, draft: DraftSpec, context_len: int, kv_dtype: str) -> float:
    info = METHODS[draft.method]
    if info.drafting in ("lookup", "none") or info.family == "head" and info.drafting == "parallel":
        return 0.0  # no draft KV to fill: prompt lookup, or heads on the target's last hidden state
    if draft.model is not None:
        return prefill_ms(Setup(draft.model, setup.gpu, setup.tp, setup.profile, setup.dp_attention), context_len, kv_dtype)
    head = _head_setup(setup, draft.params_b * 1e9)  # one layer over the prompt; its LM head scores the last position
    return forward_ms(head, batch=1, tokens_per_seq=context_len, kv_len=context_len / 2, kv_dtype=kv_dtype,
                      overhead_ms=setup.profile.draft_step_overhead_ms, scored=1)


@dataclass(frozen=True)
class MemoryEstimate:
    weights_gib: float
    draft_gib: float
    kv_per_seq_gib: float
    available_gib: float

    def kv_gib(self, batch: int) -> float:
        return batch * self.kv_per_seq_gib

    def fits(self, batch: int) -> bool:
        return self.weights_gib + self.draft_gib + self.kv_gib(batch) <= self.available_gib

    def max_batch(self) -> int:
        room = self.available_gib - self.weights_gib - self.draft_gib
        return max(0, int(room / self.kv_per_seq_gib)) if self.kv_per_seq_gib > 0 else 0


def memory_estimate(setup: Setup, draft: DraftSpec | None, *, seq_tokens: int, kv_dtype: str,
                    draft_kv_dtype: str | None = None, spec_tokens: int = 0) -> MemoryEstimate:
    """Weights + draft + KV per sequence, summed over the TP GPUs, against usable memory; ``draft_kv_dtype``:
    the draft's own KV dtype (speculative_config.kv_cache_dtype; None: the target's); ``spec_tokens`` (γ): a
    hybrid model keeps 1 + γ recurrent-state slots per sequence when speculating (vLLM
    v1/attention/backends/gdn_attn.py and v1/worker/mamba_utils.py: "1 + num_speculative_blocks")."""
    m, p = setup.model, setup.profile
    weights = m.params_b * 1e9 * bytes_per_param(m) / GIB
    if setup.dp_attention:  # every rank holds the dense weights whole; the experts are split over the ranks
        weights += (setup.tp - 1) * _expert_split(m)[0] * bytes_per_param(m) / GIB
    draft_gib, draft_kv = 0.0, 0.0
    dkv = draft_kv_dtype or kv_dtype
    if draft is not None and METHODS[draft.method].drafting not in ("lookup", "none"):
        if draft.model is not None:
            draft_gib = draft.model.params_b * 1e9 * bytes_per_param(draft.model) / GIB
            draft_kv = kv_bytes_per_seq(draft.model, dkv, seq_tokens) * kv_replication(draft.model, setup.tp, setup.dp_attention)
        else:
            draft_gib = draft.params_b * 1e9 * 2 / GIB
            one_layer = m.model_copy(update={"layers": 1, "sliding_layers": 0, "linear_layers": 0,
                                            "parallel_ssm_layers": 0})
            draft_kv = kv_bytes_per_seq(one_layer, dkv, seq_tokens) * kv_replication(m, setup.tp, setup.dp_attention)
    kv = (kv_bytes_per_seq(m, kv_dtype, seq_tokens) + spec_tokens * recurrent_state_bytes(m)) * \
        kv_replication(m, setup.tp, setup.dp_attention) + draft_kv
    available = setup.tp * (setup.gpu.memory_gib * p.gpu_memory_utilization - p.runtime_reserve_gib)
    return MemoryEstimate(weights, draft_gib, kv / GIB, available)


@dataclass(frozen=True)
class Evaluation:
    """One row of the cost table."""

    method: str
    gamma: int
    kv_dtype: str
    draft: DraftSpec | None
    tau: float
    acceptance_rate: float
    alpha0: float
    prior_source: str
    tpot_ms: float
    baseline_tpot_ms: float
    speedup: float
    throughput_tok_s: float
    baseline_throughput_tok_s: float
    ttft_ms: float
    baseline_ttft_ms: float
    effective_batch: int
    memory: MemoryEstimate
    fits: bool
    mitigations: tuple[str, ...] = ()     # flags the known-bug rows add to this candidate's launch, priced in tpot_ms
    unmitigated_tpot_ms: float | None = None  # the TPOT the same candidate would have without them


def evaluate(setup: Setup, draft: DraftSpec | None, prior: AcceptancePrior | None, *, gamma: int, kv_dtype: str,
             batch: int, context_len: int, output_len: int, verify_tokens: int | None = None,
             schedule: bool = False, spec_profile: EngineProfile | None = None,
             draft_kv_dtype: str | None = None) -> Evaluation:
    """Predict one candidate. `verify_tokens` overrides γ+1 (tree drafts verify more tokens than their depth);
    `schedule`: the engine runs with a per-batch γ schedule, which slows every step (:func:`schedule_cost`);
    `spec_profile`: the engine constants the speculative launch runs with when they differ from the baseline's
    (a mitigation such as --enforce-eager: :func:`eager_profile`); `draft_kv_dtype`: the draft's own KV dtype."""
    method = draft.method if draft else "none"
    seq = context_len + output_len
    mem = memory_estimate(setup, draft, seq_tokens=seq, kv_dtype=kv_dtype, draft_kv_dtype=draft_kv_dtype,
                          spec_tokens=gamma if draft is not None else 0)
    eff = max(1, min(batch, mem.max_batch())) if mem.max_batch() >= 1 else 1
    kv_len = context_len + output_len / 2
    base = forward_ms(setup, batch=eff, tokens_per_seq=1, kv_len=kv_len, kv_dtype=kv_dtype)
    base_ttft = prefill_ms(setup, context_len, kv_dtype)
    if draft is None or gamma == 0 or prior is None:
        tau, rate, alpha, step, ttft, src = 1.0, 0.0, 0.0, base, base_ttft, "no speculation"
    else:
        tau = prior.expected_tokens(gamma)
        rate = prior.acceptance_rate(gamma)
        alpha, src = prior.alpha0, prior.source
        spec = setup if spec_profile is None else Setup(setup.model, setup.gpu, setup.tp, spec_profile, setup.dp_attention)
        dkv = draft_kv_dtype or kv_dtype
        verify = forward_ms(spec, batch=eff, tokens_per_seq=verify_tokens or gamma + 1, kv_len=kv_len,
                            kv_dtype=kv_dtype)
        step = verify + draft_ms(spec, draft, gamma=gamma, batch=eff, kv_len=kv_len, kv_dtype=dkv)
        ttft = (base_ttft if spec is setup else prefill_ms(spec, context_len, kv_dtype)) + \
            draft_prefill_ms(spec, draft, context_len, dkv)
    if schedule:
        step *= 1 + schedule_cost(eff)
    tpot = step / tau
    return Evaluation(
        method=method, gamma=gamma, kv_dtype=kv_dtype, draft=draft, tau=tau, acceptance_rate=rate, alpha0=alpha,
        prior_source=src, tpot_ms=tpot, baseline_tpot_ms=base, speedup=base / tpot,
        throughput_tok_s=eff * 1000 / tpot, baseline_throughput_tok_s=eff * 1000 / base, ttft_ms=ttft,
        baseline_ttft_ms=base_ttft, effective_batch=eff, memory=mem, fits=mem.fits(batch),
    )


def best_gamma(rows: list[Evaluation], *, near_tie: float = 0.02) -> Evaluation | None:
    """The γ to run among one method's candidates at one batch: the smallest γ within ``near_tie`` of the
    best speedup (a longer draft buys nothing inside the model's resolution and costs more when acceptance
    is lower than predicted); None when no γ is faster than no speculation (K=0)."""
    rows = [e for e in rows if e.gamma > 0]
    if not rows:
        return None
    best = max(e.speedup for e in rows)
    if best < 1.0:
        return None
    return min((e for e in rows if e.speedup >= best * (1 - near_tie)), key=lambda e: e.gamma)


def break_even_rate(e: Evaluation) -> float | None:
    """vLLM's accepted/drafted rate below which this candidate is slower than no speculation: the step
    costs ``step = tpot·τ`` whatever is accepted, so speculation breaks even at τ* = step / baseline TPOT,
    i.e. r* = (τ* − 1)/γ (τ = 1 + r·γ, vLLM's counters). None without speculation; above 1 it never pays."""
    if e.gamma <= 0 or e.method == "none":
        return None
    step = e.tpot_ms * e.tau
    return max(0.0, (step / e.baseline_tpot_ms - 1.0) / e.gamma)
