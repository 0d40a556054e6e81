"""Engine constants of the performance model: :class:`EngineProfile` (efficiencies, fixed and per-layer
overheads, the MoE and draft terms) and the profile of each engine class that published rows were measured on
(``recommend --engine``). The step-time formulas that read them are in :mod:`specops.planner.perfmodel`; what
each constant was fitted on is in its field's description and in docs/performance-model.md.
"""

from __future__ import annotations

from pydantic import Field

from specops.models import Strict

SAMPLER_BYTES = 12.0
"""Default of EngineProfile.sampler_bytes: bytes moved per scored token per vocabulary entry by sampling: fp32 logits written, read by the
softmax that writes fp32 probabilities, read again by the (rejection) sampler - 3 × 4 bytes. vLLM's
rejection sampler scores the full vocabulary at every draft position and the bonus position
(vllm/v1/sample/rejection_sampler.py), so verification pays it γ+1 times per sequence."""

class EngineProfile(Strict):
    """Engine constants of the model (not fitted per measurement; see docs/performance-model.md)."""


    name: str = Field("vllm", description="Profile name.")
    bandwidth_efficiency: float = Field(0.80, gt=0, le=1, description="Achieved / peak memory bandwidth.")
    compute_efficiency: float = Field(0.55, gt=0, le=1, description="Achieved / peak dense tensor FLOP/s.")
    prefill_compute_efficiency: float | None = Field(
        None, gt=0, le=1, description="Achieved / peak FLOP/s in a prefill (a forward of at least PREFILL_TOKENS tokens "
        "per sequence: large GEMMs run nearer peak than decode's); None: compute_efficiency.")
    overlap_penalty: float = Field(0.3, ge=0, le=1, description="t = max(mem, compute) + p·min(mem, compute).")
    step_overhead_ms: float = Field(0.6, ge=0, description="Fixed cost of one target forward (scheduler, sampler, launch).")
    layer_overhead_ms: float = Field(0.0, ge=0, description="Per-layer launch cost (eager frameworks).")
    draft_step_overhead_ms: float = Field(0.12, ge=0, description="Fixed cost of one draft forward.")
    head_spec_overhead_ms: float = Field(0.0, ge=0, description="Fixed cost of a draft head's (EAGLE/EAGLE-3/Medusa) "
        "speculative step beyond its forwards; SGLang 0.75 (bench/stepcost_bench.py, each SGLang source held out).")
    draft_layer_overhead_ms: float = Field(
        0.02, ge=0, description="Per-layer cost of one forward of a separate draft LM (draft_model, dflash) "
        "beyond its weight reads and all-reduces (the draft's own small kernels, norms, attention metadata): "
        "fitted with draft_lm_overhead_ms on the pooled draft-cost sources - Liu et al. 2026's vLLM draft/target "
        "forward-time ratios (playbooks/data/draft_costs_2026-12.csv) and the AMD (vLLM) and NVIDIA (TensorRT-LLM) "
        "draft-size sweeps - each held out in turn (planner/draftcost.loso_draft_cost; bench/stepcost_bench.py).")
    draft_lm_overhead_ms: float = Field(
        1.0, ge=0, description="Fixed cost of one forward of a separate draft LM (draft_model, dflash) beyond "
        "draft_step_overhead_ms, whatever its depth: the proposer's own scheduling and input preparation around a "
        "second model (planner/draftcost.py fits it with draft_layer_overhead_ms, each draft-cost source held out).")
    ngram_step_ms: float = Field(0.05, ge=0, description="Prompt-lookup / suffix-tree proposal per step (fixed part).")
    ngram_lookup_ns_per_token: float = Field(
        2.0, ge=0, description="CPU time of the n-gram lookup per token of each request's history per step: vLLM's "
        "proposer scans the history on the CPU (numba KMP, one pass per n-gram size: vllm#22408 'the cost would increase "
        "linearly when we increase the ngram range'), batched over up to NGRAM_THREADS threads (vllm PR #24986). "
        "Assumption (~0.5 ns per token per pass, 4 passes for prompt_lookup 2-5): no published timing with lengths "
        "was found to fit it; vllm#22408 bounds it at 0.9% of a Llama-4-Scout step.")
    token_overhead_ms: float = Field(
        0.015, ge=0, description="Cost per token one step schedules, not hidden behind the weight reads (input "
        "preparation, sampling, rejection sampling, output processing): 15 µs, fitted on the serving engines' "
        "published batch sweeps (bench/planner_bench.py prints the fit and its leave-one-source-out error).")
    allreduce_ms_per_layer: dict[str, float] = Field(
        default_factory=lambda: {"nvlink": 0.018, "xgmi": 0.0225, "pcie": 0.075, "none": 0.0},
        description="Fixed latency of one tensor-parallel all-reduce (two per layer) by interconnect; the hidden "
        "states it carries are priced on top (allreduce_ms). The former 0.012 / 0.015 / 0.05 ms x 1.5: the shared "
        "fit on the published baselines picks x2 with every source held out (TP decode rows - NVIDIA NIM 70B TP2, "
        "vLLM CI 70B TP4 - ask for more), but at x2 SGLang's TP2 Qwen3-30B-A3B baseline leaves its e^0.25 band "
        "(bench/stepcost_bench.py; docs/performance-model.md).")
    sampler_bytes: float = Field(SAMPLER_BYTES, ge=0, description="Bytes per scored token per vocabulary entry "
                                 "that sampling moves (see SAMPLER_BYTES).")
    expert_half_mb: float = Field(
        4.7, gt=0, description="Size of one expert's weights in one layer (MB) that grouped GEMMs read at half the "
        "dense bandwidth: routed experts are read at s/(s + expert_half_mb) of it (planner/moe.py). A shared fitted "
        "constant of the step-cost cross-validation (stepcost.SHARED_KEYS): with each baseline source held out in "
        "turn the fit picks 1.0-4.7 MB, never the former 9.4 (issue 18's 0.5 efficiency for Qwen3-30B-A3B); 4.7, "
        "the largest held-out pick, ships (Qwen3-30B-A3B's 9.4 MB experts at 0.67 of the dense bandwidth). "
        "bench/stepcost_bench.py prints the picks; docs/performance-model.md.")
    routing_locality: float = Field(
        0.25, ge=0, lt=1, description="Share of a position's routed experts the previous position of the same "
        "sequence already chose (planner/moe.py; 0: independent routing, an upper bound on experts verified). "
        "0.25: with each source of the MoE-target published speedups held out in turn, the grid (0, 0.25, 0.5, "
        "0.75) picks 0.25 or 0.5, never 0 (nested median |ln| 0.157 vs 0.159 at 0 over 32 rows; all 102 rows "
        "0.177 vs 0.209); docs/performance-model.md.")
    moe_layer_overhead_ms: float = Field(
        0.06, ge=0, description="Fixed cost per MoE layer per forward (router, top-k, token permute/unpermute, "
        "grouped-GEMM launches), fitted on published MoE baseline TPOTs (playbooks/data/moe_baselines_2026-12.csv).")
    moe_link_gbs: dict[str, float] = Field(
        default_factory=lambda: {"nvlink": 450.0, "xgmi": 300.0, "pcie": 25.0, "none": 0.0},
        description="Per-GPU link bandwidth (GB/s) the MoE token exchange (dispatch + combine of each token's "
        "hidden state to its k experts' ranks) runs over when experts are split across GPUs.")
    prefill_overhead_ms: float = Field(
        0.0, ge=0, description="Per-request cost of a prefill beyond its forward (scheduling, input processing, the "
        "first token's output): added to TTFT; fitted per engine class in bench/stepcost_bench.py.")
    gpu_memory_utilization: float = Field(0.90, gt=0, le=1, description="vLLM's default --gpu-memory-utilization.")
    runtime_reserve_gib: float = Field(1.5, ge=0, description="Per-GPU activations, CUDA graphs, context.")


VLLM_PROFILE = EngineProfile()
# HF-transformers style harnesses (EAGLE/Medusa papers): no CUDA graphs, Python per layer.
# token_overhead_ms 0: the per-token term was fitted on serving engines only; papers' harnesses run batch 1.
EAGER_PROFILE = EngineProfile(name="eager", step_overhead_ms=2.0, layer_overhead_ms=0.25,
                              draft_step_overhead_ms=1.0, ngram_step_ms=0.5, token_overhead_ms=0.0,
                              draft_layer_overhead_ms=0.0, draft_lm_overhead_ms=0.0,  # layer_overhead_ms charges every layer
                              moe_layer_overhead_ms=0.0)  # its per-layer launch cost already covers it


# Per-engine profiles for `recommend --engine` and for predicting published rows by the harness that
# measured them (the rendered launch stays vLLM). Only what an engine's own rows can identify is fitted:
# - sglang: step_overhead_ms 1.6 (draft forward 0.32, the same ratio as vLLM's), the grid value with the
#   lowest median |ln error| on SGLang's 24 published rows; with each SGLang source left out in turn the
#   fit's held-out median error is 0.160 against 0.158 with vLLM's constants: no better across sources,
#   kept because it removes the bias on SGLang's rows (bench/planner_bench.py prints both).
# - tensorrt-llm: 5 rows from 2 sources, too few to fit the step: vLLM's constants, and the path says so; a
#   separate draft LM's per-layer overhead 0 (planner/draftcost.py: NVIDIA's 405B draft-size sweep, the ratio of
#   speedups between 1B/3B/8B drafts, is best at the grid's 0 - the draft runs inside the compiled engine).
# - hf: the eager profile (papers' HF-transformers harnesses).
ENGINE_PROFILES = {
    "vllm": VLLM_PROFILE,
    "sglang": VLLM_PROFILE.model_copy(update={"name": "sglang", "step_overhead_ms": 1.6, "draft_step_overhead_ms": 0.32,
                                              "head_spec_overhead_ms": 0.75,
                                              "moe_layer_overhead_ms": 0.0}),
    "tensorrt-llm": VLLM_PROFILE.model_copy(update={"name": "tensorrt-llm", "draft_layer_overhead_ms": 0.0,
                                                    "draft_lm_overhead_ms": 0.0}),
    "hf": EAGER_PROFILE,
}
PROFILE_SOURCES = {
    "vllm": "vLLM profile (constants from typical decode TPOTs; per-token overhead fitted on published batch sweeps; "
            "a draft LM's 1.0 ms per forward + 0.02 ms per layer fitted on the draft-cost sources, each held out)",
    "sglang": "SGLang profile (step overhead fitted on SGLang's 24 published rows; a draft head's step 0.75 ms, "
              "picked with each SGLang source held out)",
    "tensorrt-llm": "TensorRT-LLM: too few published rows (5) to fit the step, vLLM's constants; draft LM per-layer "
                    "overhead 0 (fitted on NVIDIA's 405B draft-size sweep)",
    "hf": "HF-transformers eager profile (no CUDA graphs, per-layer launch cost)",
}


def eager_profile(profile: EngineProfile) -> EngineProfile:
    """``profile`` without CUDA graphs (``--enforce-eager``): every forward launches its kernels from Python,
    layer by layer - the eager profile's fixed and per-layer launch costs replace the graph-captured step
    overhead. Checked against vllm-omni#7960's eager/graph pair (Qwen2.5-7B on an A800: published 1.73x,
    predicted 1.84x; bench/stepcost_bench.py)."""
    if profile.layer_overhead_ms >= EAGER_PROFILE.layer_overhead_ms:
        return profile
    return profile.model_copy(update={
        "name": f"{profile.name}-eager",
        "step_overhead_ms": max(profile.step_overhead_ms, EAGER_PROFILE.step_overhead_ms),
        "layer_overhead_ms": EAGER_PROFILE.layer_overhead_ms,
        "draft_step_overhead_ms": max(profile.draft_step_overhead_ms, EAGER_PROFILE.draft_step_overhead_ms),
        "draft_layer_overhead_ms": 0.0,  # the per-layer launch cost already charges every draft layer
        "draft_lm_overhead_ms": 0.0,
        "moe_layer_overhead_ms": 0.0})


def engine_profile(engine: str) -> EngineProfile:
    """The profile for rows measured on ``engine`` (ENGINES of the calibration); others: eager."""
    return ENGINE_PROFILES.get(engine, EAGER_PROFILE)
