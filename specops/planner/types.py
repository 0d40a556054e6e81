"""The planner's vocabulary: catalog entries, the request, candidates and the plan.

Every type is a pydantic model with ``extra="forbid"``; field descriptions feed ``--help`` and docs.
"""

from __future__ import annotations

import math
from typing import Literal, Protocol, runtime_checkable

from pydantic import Field, model_validator

from specops.models import Strict
from specops.speculation import METHODS as METHOD_TABLE
from specops.speculation import PLANNED as METHODS
from specops.speculation import Method

Task = Literal["code", "math", "chat", "creative", "translation", "summarization", "rag", "agentic"]
TASKS: tuple[str, ...] = ("code", "math", "chat", "creative", "translation", "summarization", "rag", "agentic")
Quantization = Literal["fp8", "int8", "awq", "gptq", "nvfp4"]
QUANTIZATIONS: tuple[str, ...] = ("fp8", "int8", "awq", "gptq", "nvfp4")
Objective = Literal["latency", "throughput"]
# Methods whose draft is a separate set of weights (a head or a model), not the prompt or the target.
DRAFT_WEIGHT_METHODS = tuple(m for m in METHODS if METHOD_TABLE[m].draft_weights)
SEPARATE_MODEL_METHODS = tuple(m for m in METHODS if METHOD_TABLE[m].family == "model")


_Strict = Strict


class GPU(_Strict):
    """One accelerator from playbooks/catalogs/gpus.yaml."""

    name: str = Field(description="Catalog name, e.g. H100 (SXM).")
    aliases: list[str] = Field(default_factory=list, description="Other accepted spellings.")
    smi_names: list[str] = Field(default_factory=list, description="What nvidia-smi (--query-gpu=name) or rocm-smi "
                                 "(--showproductname, Card Series) prints for this card; accepted as given.")
    memory_gib: float = Field(gt=0, le=65536, description="On-board memory per GPU (GiB; at most 64 TiB).")
    bandwidth_gbs: float = Field(gt=0, le=1e6, description="Peak memory bandwidth (GB/s; at most 1 PB/s).")
    bf16_tflops: float = Field(gt=0, le=1e6, description="Dense BF16 tensor TFLOP/s (at most 10^6).")
    fp8_tflops: float | None = Field(None, gt=0, le=2e6, description="Dense FP8 tensor TFLOP/s (null: no FP8).")
    interconnect: Literal["nvlink", "pcie", "xgmi", "none"] = Field("pcie", description="GPU-to-GPU link.")
    source: str = Field(description="Where the numbers come from.")


class DraftRef(_Strict):
    """A public draft trained for a target."""

    id: str = Field(description="Hub id or folder of the draft.")
    method: Literal[DRAFT_WEIGHT_METHODS] = Field(description="vLLM method.")  # type: ignore[valid-type]
    generation: Literal["1", "2", "3", "3.1"] | None = Field(None, description="EAGLE generation.")
    params_b: float | None = Field(None, gt=0, description="Draft size (billions); heads default to one layer + LM head.")
    source: str = Field("", description="Where the draft is published.")
    min_vllm: str | None = Field(None, description="Oldest vLLM release that serves this draft (its card says so); "
                                 "older releases skip it.")


class QuantizedCheckpoint(_Strict):
    """A published pre-quantized checkpoint of a catalog model (what --quantization awq/gptq/int8/nvfp4 launches)."""

    id: str = Field(description="Hub id of the quantized checkpoint.")
    quantization: Literal["awq", "gptq", "int8", "nvfp4"] = Field(description="Its weight quantization.")
    source: str = Field(description="Where it is published.")


class ModelSpec(_Strict):
    """Architecture facts of a target (or draft) model."""

    id: str = Field(description="Hub id or local path.")
    names: list[str] = Field(default_factory=list, description="Short names accepted on the command line.")
    params_b: float = Field(gt=0, le=1e5, description="Total parameters (billions; at most 10^5).")
    active_params_b: float | None = Field(None, gt=0, le=1e5, description="Parameters active per token (MoE).")
    layers: int = Field(ge=1, description="Decoder layers.")
    hidden: int = Field(ge=1, description="Hidden size.")
    heads: int = Field(ge=1, description="Attention heads.")
    kv_heads: int = Field(ge=1, description="Key/value heads.")
    head_dim: int = Field(ge=1, description="Head dimension.")
    vocab: int = Field(ge=1, description="Vocabulary size.")
    max_context: int = Field(ge=1, description="Longest context the model supports.")
    dtype: Literal["bfloat16", "float16", "float32"] = Field("bfloat16", description="Checkpoint dtype.")
    weight_bits: float = Field(16, gt=0, le=32, description="Bits per parameter as shipped.")
    experts: int | None = Field(None, ge=1, description="Routed experts per MoE layer.")
    experts_per_token: int | None = Field(None, ge=1, description="Experts each token activates.")
    kv_lora_rank: int | None = Field(None, ge=1, description="MLA latent size (replaces K/V heads in the cache).")
    kv_rope_dim: int | None = Field(None, ge=0, description="MLA rotary part cached beside the latent.")
    sliding_window: int | None = Field(None, ge=1, description="Window of sliding-window layers.")
    sliding_layers: int = Field(0, ge=0, description="How many layers use the sliding window.")
    mtp_layers: int = Field(0, ge=0, description="Native multi-token-prediction modules (0: none).")
    linear_layers: int = Field(0, ge=0, description="Hybrid models: layers with a recurrent state (Mamba, Gated "
                               "DeltaNet, linear attention) instead of a per-token KV cache.")
    state_bytes_per_layer: float = Field(0, ge=0, description="Hybrid models: bytes of one sequence's recurrent "
                                         "state in one such layer (e.g. GDN: value heads × key dim × value dim × 4 "
                                         "bytes fp32 + the conv state).")
    parallel_ssm_layers: int = Field(0, ge=0, description="Parallel hybrids (Falcon-H1): layers whose block runs a "
                                     "recurrent (Mamba) mixer beside attention and sums the two outputs. Such a layer "
                                     "keeps its per-token KV (it is not one of linear_layers) and also a recurrent "
                                     "state of state_bytes_per_layer; params_b counts both mixers' weights.")
    architecture: Literal["dense", "moe", "hybrid", "sliding_window"] | None = Field(
        None, description="For the known-bug rows: hybrid = Mamba/GDN/linear-attention layers. Unset: derived from "
        "the experts / sliding-window facts (dense otherwise); a generic --params-b estimate stays unknown.")
    drafts: list[DraftRef] = Field(default_factory=list, description="Public drafts for this target.")
    quantization: str | None = Field(None, description="Quantization the weights are served with.")
    base_id: str | None = Field(None, description="Hub id of the base (pre-trained) checkpoint of this "
                                "instruct model: same architecture, its own names, none of the instruct drafts' heads.")
    base_names: list[str] = Field(default_factory=list, description="Short names of the base checkpoint.")
    checkpoints: list[QuantizedCheckpoint] = Field(default_factory=list, description="Published quantized checkpoints.")
    source: str = Field("", description="Where the facts come from.")

    @property
    def active_b(self) -> float:
        return self.active_params_b or self.params_b

    @property
    def is_moe(self) -> bool:
        return bool(self.experts and self.experts_per_token and self.active_params_b)

    @property
    def recurrent_layers(self) -> int:
        """Layers that hold a recurrent state: the sequential hybrid's linear layers and the parallel hybrid's
        attention + SSM layers."""
        return self.linear_layers + self.parallel_ssm_layers

    @model_validator(mode="after")
    def _hybrid_layers(self) -> ModelSpec:
        if self.linear_layers + self.parallel_ssm_layers > self.layers:
            raise ValueError(f"linear_layers ({self.linear_layers}) + parallel_ssm_layers ({self.parallel_ssm_layers}) "
                             f"exceed layers ({self.layers}). To fix: count each decoder layer once - linear_layers "
                             "for layers with only a recurrent mixer, parallel_ssm_layers for attention + SSM side by side")
        if self.parallel_ssm_layers and not self.state_bytes_per_layer:
            raise ValueError("parallel_ssm_layers is set but state_bytes_per_layer is 0. To fix: give the bytes of "
                             "one sequence's recurrent state in one layer (conv + SSM state, as vLLM sizes it)")
        return self

    def kind(self) -> str | None:
        """The architecture the known-bug rows test: stated, else from the catalog facts (None for an
        estimate from sizes only: its layers are unknown)."""
        if self.architecture:
            return self.architecture
        if self.source.startswith("estimated from"):
            return None
        if self.recurrent_layers:  # Mamba/GDN layers, sequential or beside attention: the hybrid rows apply
            return "hybrid"
        return "sliding_window" if self.sliding_layers else "moe" if self.is_moe else "dense"


class MeasuredAcceptance(_Strict):
    """Measured per-position acceptance for one draft on one task (fed from the registry later)."""

    draft: str = Field(description="Draft id the measurement belongs to ('*' = any draft of the method).")
    method: str = Field(description="vLLM method the draft ran with.")
    task: str = Field(description="Task label of the traffic.")
    per_position: list[float] = Field(min_length=1, description="vLLM per-position rates p_i = accepted_per_pos[i] / drafts "
                                      "(cumulative: P(first i+1 drafts accepted)).")
    samples: int = Field(ge=1, description="Verify steps (drafts) behind the numbers.")

    @model_validator(mode="after")
    def _monotone(self) -> MeasuredAcceptance:
        prev = 1.0
        for p in self.per_position:
            if not (0 <= p <= prev + 1e-9):
                raise ValueError("per_position rates must fall from ≤1 and never rise (they are cumulative)")
            prev = p
        return self


class MeasuredPrediction(_Strict):
    """What a fitted (measured) performance model predicts for one configuration at one batch."""

    tpot_ms: float = Field(gt=0, description="Time per output token (ms).")
    tokens_per_s: float = Field(gt=0, description="Output tokens/s over the whole batch.")
    tau: float = Field(ge=1, description="Tokens per sequence-step incl. the bonus token.")
    acceptance_rate: float = Field(0.0, ge=0, le=1, description="accepted / drafted (0 without speculation).")


@runtime_checkable
class MeasuredModel(Protocol):
    """A performance model fitted on the user's own engine (``specops tune``): when given to
    ``recommend(measured=...)`` it ranks the configurations it measured instead of the roofline. Optionally
    ``range_residuals() -> specops.planner.measured_range.MeasuredResiduals``: its own held-out errors, which give
    its predictions their range, P(gain) and expected speedup; without it (or with too few), they get the
    published-evidence range, with a note."""

    label: str  # e.g. "calibration tiny-cpu@2 (132 points)"

    def drafts(self) -> dict[str, str | None]:
        """Measured methods (incl. 'none') → draft folder/id (None for weightless methods)."""

    def gammas(self, method: str) -> list[int]:
        """γ values measured for ``method``."""

    def predict(self, method: str, gamma: int, batch: int) -> MeasuredPrediction | None:
        """None when the model cannot predict that configuration."""


class RecommendRequest(_Strict):
    """Inputs of one recommendation (the CLI flags, validated)."""

    model: str = Field(description="Catalog name, hub id, or local Hugging Face folder.")
    params_b: float | None = Field(None, gt=0, le=1e5, allow_inf_nan=False,
                                   description="Parameters (billions) for unknown models.")
    active_params_b: float | None = Field(None, gt=0, le=1e5, allow_inf_nan=False, description="Parameters active per "
                                          "token (billions) for unknown mixture-of-experts models (with params_b).")
    quantization: Quantization | None = Field(None, description="Weight quantization: fp8, int8, awq, gptq, nvfp4.")
    gpu: str = Field(description="GPU catalog name (H100, A100-80GB, L4, cpu, ...).")
    gpus: int = Field(1, ge=1, le=64, description="GPUs (tensor parallel size).")
    data_parallel_size: int = Field(1, ge=1, le=8, description="Attention data-parallel ranks over the GPUs (1, or "
                                    "gpus: vLLM --data-parallel-size gpus --enable-expert-parallel, TP 1 a rank; the "
                                    "batch is the replica's total); the capacity search sets it for MoE models.")
    expert_parallel: bool = Field(False, description="Render --enable-expert-parallel (MoE: experts split over the "
                                  "GPUs instead of sharded; the step cost prices the exchange the same either way).")
    tpot_ms: float | None = Field(None, gt=0, allow_inf_nan=False, description="Target time per output token (ms).")
    task: Task = Field("chat", description="Workload task.")
    context_len: int = Field(4096, ge=1, description="Prompt/context tokens per request.")
    output_len: int = Field(256, ge=1, description="Generated tokens per request.")
    temperature: float = Field(0.0, ge=0, le=5, allow_inf_nan=False, description="Sampling temperature.")
    batch_size: int = Field(1, ge=1, le=65536, description="Concurrent requests (decode batch).")
    vllm_version: str = Field("0.33.0", description="vLLM release to render for.")
    objective: Objective = Field("latency", description="latency: per-request speedup; throughput: tokens/s meeting TPOT.")
    method: Method | None = Field(None, description="Pin a method (what-if).")
    num_speculative_tokens: int | None = Field(None, ge=1, le=16, description="Pin γ (1-16).")
    draft: str | None = Field(None, description="Pin a draft (hub id or folder).")
    parallel_drafting: bool = Field(False, description="P-EAGLE: eagle3 drafting all γ positions in one pass "
                                    "(speculative_config parallel_drafting: true, vLLM >= 0.16.0); not modelled: "
                                    "the prediction is sequential EAGLE-3's.")
    adaptive_verification: bool = Field(False, description="Render enable_adaptive_verification (vLLM >= 0.33.0) "
                                        "where the capability rows allow it; not modelled (the prediction is fixed K).")
    allow_uncertain: bool = Field(False, description="Keep the cost model's pick (the best point prediction) "
                                  "whatever its chance of a gain, with a warning when it misses the risk level.")
    min_p_gain: float | None = Field(None, ge=0, le=1, allow_inf_nan=False, description="Risk level: a candidate "
                                     "is chosen only if P(speedup > 1) is at least this (default "
                                     "specops.planner.uncertainty.DEFAULT_MIN_P_GAIN).")
    engine: Literal["vllm", "sglang", "tensorrt-llm", "hf"] = Field(
        "vllm", description="Engine whose step-time profile predicts (the rendered launch stays vLLM).")
    kv_cache_dtype: str | None = Field(None, description="Pin the KV cache dtype (--kv-cache-dtype): auto, fp8, "
                                       "turboquant_k8v4, ... as the vLLM version has it; default: the least compressed "
                                       "that fits the batch.")
    qps: float | None = Field(None, gt=0, le=1e6, allow_inf_nan=False,
                              description="Request rate: the batch becomes the concurrency Little's law gives "
                              "(qps × predicted request latency, iterated to a fixed point).")


class DecisionStep(_Strict):
    """One rule of the decision tree as applied to this request."""

    rule: str = Field(description="Rule id from playbooks/decision-tree.yaml.")
    input: str = Field(description="The input value(s) the rule looked at.")
    outcome: str = Field(description="What the rule decided.")


class GammaPoint(_Strict):
    """One γ of the chosen method at the request's batch: what its acceptance gives through the cost model."""

    gamma: int = Field(description="num_speculative_tokens.")
    mean_acceptance_length: float = Field(description="τ at this γ (acceptance × position decay).")
    acceptance_rate: float = Field(description="vLLM's accepted/drafted at this γ.")
    speedup: float = Field(description="Predicted speedup at this γ.")
    tpot_ms: float = Field(description="Predicted TPOT at this γ (ms).")


class AcceptanceEvidence(_Strict):
    """Where the chosen method's acceptance comes from (specops.planner.acceptance), and how sure it is."""

    task_class: str = Field(description="The data's task class --task maps to.")
    cell_rows: list[str] = Field(description="Ids of the published rows of this method × task class "
                                 "(playbooks/data/acceptance_2026-12.csv).")
    cell_sources: int = Field(description="Sources behind those rows.")
    method_rows: int = Field(description="Published rows of the method over all tasks.")
    task_shift: float = Field(description="α0 with this task minus α0 with no task effect.")
    logit_sd: float = Field(description="Spread of logit α0 a new source sees (cross-source residuals, pooled).")
    mean_acceptance_length_low: float = Field(description="τ at the chosen γ, 10th percentile of that spread.")
    mean_acceptance_length_high: float = Field(description="τ at the chosen γ, 90th percentile.")
    decay: float = Field(description="Per-position decay d (α_i = α0·d^i) used.")
    note: str = Field(description="What --task did to this prediction, with the rows it looked at.")


class Predicted(_Strict):
    """Predicted performance of the chosen configuration."""

    acceptance_rate: float = Field(description="vLLM's accepted/drafted (NOT the per-token α).")
    alpha: float = Field(description="Per-token acceptance α at the first position (the model's prior).")
    mean_acceptance_length: float = Field(description="τ: tokens per verify step incl. the bonus token.")
    speedup: float = Field(description="Baseline TPOT / speculative TPOT at the request's batch.")
    tpot_ms: float = Field(description="Predicted time per output token (ms).")
    baseline_tpot_ms: float = Field(description="Same deployment without speculation (ms).")
    throughput_tok_s: float = Field(description="Output tokens/s over the whole batch.")
    baseline_throughput_tok_s: float = Field(description="Output tokens/s without speculation.")
    ttft_ms: float = Field(description="Time to first token of one request incl. draft prefill (ms).")
    baseline_ttft_ms: float = Field(description="Time to first token without speculation (ms).")
    effective_batch: int = Field(description="Batch the prediction ran at (the request's, capped by memory).")
    num_speculative_tokens_at_batch: int = Field(description="γ in effect at the request's batch (schedule applied).")
    meets_tpot_target: bool | None = Field(None, description="Whether tpot_ms meets --tpot-ms (null: no target).")
    acceptance_prior_source: str = Field(description="Where α came from: a published row, or 'measured: N samples'.")
    break_even_acceptance_rate: float | None = Field(
        None, description="vLLM's accepted/drafted below which this configuration is slower than no speculation "
        "(same step-time model; null without speculation).")
    speedup_low: float | None = Field(None, description="Lower end of the speedup's range (nominal range_level), "
                                      "from out-of-source errors on published rows, never below the all-rejected "
                                      "speedup; for a prediction of a `specops tune` calibration, from its "
                                      "leave-one-configuration-out residuals (null: no speculation).")
    speedup_high: float | None = Field(None, description="Upper end of that range, never above τ's one-sided 95% upper "
                                       "bound (above acceptance.mean_acceptance_length_high; τ where none is stated).")
    range_level: float | None = Field(None, description="Nominal coverage of [speedup_low, speedup_high] (0.8).")
    range_width: float | None = Field(None, description="speedup_high / speedup_low.")
    p_gain: float | None = Field(None, description="P(speedup > 1) from the calibrated residual distribution.")
    expected_speedup: float | None = Field(None, description="Mean speedup under that distribution (bounded by "
                                           "the range's physics): what the pick ranks.")
    evidence: str = Field("", description="Where the speedup and its range come from, and how near the evidence is.")
    evidence_near: bool | None = Field(None, description="False: no published row is near this configuration.")
    evidence_rows: list[str] | None = Field(None, description="Published runs of (nearly) this configuration that "
                                            "moved p_gain, expected_speedup and the range toward them (method, "
                                            "speedup, batch, GPU, source); empty: none is near, the figures are the "
                                            "model's alone (or a `specops tune` calibration's own); null: no range "
                                            "(no speculation).")
    gamma_curve: list[GammaPoint] | None = Field(None, description="Every γ the cost model scored for the chosen "
                                                 "method at this batch (null without speculation).")
    acceptance: AcceptanceEvidence | None = Field(None, description="The acceptance model's cell, rows and spread "
                                                  "for the chosen method (null: not from the acceptance model).")


class Memory(_Strict):
    """Memory of the chosen configuration, summed over the tensor-parallel GPUs (GiB)."""

    weights_gib: float = Field(description="Target weights.")
    draft_gib: float = Field(description="Draft weights (heads or model).")
    kv_cache_gib: float = Field(description="KV cache for batch × (context + output).")
    total_gib: float = Field(description="weights + draft + KV cache.")
    available_gib: float = Field(description="Usable memory (gpu_memory_utilization × memory − runtime reserve).")
    fits: bool = Field(description="Whether total ≤ available.")
    max_batch_that_fits: int = Field(description="Largest batch whose KV cache fits beside the weights.")


class Alternative(_Strict):
    """Another candidate from the cost table."""

    method: str
    num_speculative_tokens: int | None
    kv_cache_dtype: str
    draft: str | None
    speedup: float
    speedup_low: float | None = None
    speedup_high: float | None = None
    range_level: float | None = None
    range_width: float | None = None
    p_gain: float | None = None
    expected_speedup: float | None = None
    tpot_ms: float
    throughput_tok_s: float
    fits: bool


class WithheldLaunch(_Strict):
    """An artifact the chosen configuration needs and specops does not have: the prediction stands (it is about the
    configuration), the launch is not rendered (it would name a made-up draft or serve the wrong weights)."""

    artifact: Literal["draft", "checkpoint"] = Field(description="draft: no draft of the pinned method is known for "
                                                    "the model; checkpoint: no checkpoint of the --quantization is.")
    missing: str = Field(description="What is missing (a draft trained for the model, a quantized checkpoint).")
    fix: str = Field(description="How to supply it; with it the launch renders.")

    def line(self) -> str:
        """One line: what is missing. To fix: ..."""
        return f"{self.missing.rstrip('.')}. To fix: {self.fix}"


class VllmLaunch(_Strict):
    """The exact vLLM launch for the chosen version."""

    version: str = Field(description="vLLM release rendered for.")
    argv: list[str] = Field(description="`vllm serve` argument list (empty when the launch is withheld).")
    speculative_config: dict | None = Field(description="The --speculative-config JSON as a dict.")
    nodes: int = Field(1, ge=1, description="Machines one replica spans (pipeline stages of tensor-parallel GPUs).")
    setup: str | None = Field(None, description="What to start before argv when the replica spans several nodes.")
    withheld: list[WithheldLaunch] = Field(default_factory=list, description="Artifacts the configuration needs and "
                                           "specops does not have: when any is listed, argv is empty and "
                                           "speculative_config null (the prediction still holds for the "
                                           "configuration), and `-o deployment` is refused with the fix.")


class Load(_Strict):
    """How a request rate became a batch (Little's law: concurrency = rate × latency)."""

    qps: float = Field(description="Requests per second asked for.")
    concurrency: int = Field(description="Concurrent requests the plan was made for (its batch).")
    latency_s: float | None = Field(description="Predicted request latency at that concurrency: TTFT + output × TPOT "
                                    "under the load; null when the prefills alone exceed the GPU (no finite latency).")
    iterations: int = Field(description="Fixed-point iterations used.")
    converged: bool = Field(description="False: no stable concurrency (the rate exceeds what fits or it cycles).")
    note: str = Field("", description="What to make of it.")
    prefill_share: float | None = Field(None, description="Share of the decode's time the arriving requests' "
                                        "prefills take (qps × what a prefill adds to the decode steps its chunks ride "
                                        "on / 1000; data-parallel ranks: while any rank prefills); 1 or more: the "
                                        "prefill alone cannot keep up.")
    ttft_ms: float | None = Field(None, description="TTFT under this load (incl. the wait for queued prefills).")
    tpot_ms: float | None = Field(None, description="TPOT under this load (decode steps share the GPU with prefills).")


class Plan(_Strict):
    """The recommendation: chosen candidate, its prediction, the path that led there, and the launch."""

    model: str
    gpu: str
    gpus: int
    method: str
    draft: str | None
    num_speculative_tokens: int | None
    num_speculative_tokens_per_batch_size: list[tuple[int, int, int]] | None
    kv_cache_dtype: str
    tensor_parallel_size: int
    predicted: Predicted
    memory: Memory
    decision_path: list[DecisionStep]
    warnings: list[str]
    alternatives: list[Alternative]
    vllm: VllmLaunch
    learned_from: list[str] = Field(default_factory=list, description="Measured priors / calibration used.")
    load: Load | None = Field(None, description="With --qps: how the rate became the plan's batch.")


def finite(name: str, value: float | None) -> None:
    """Raise InputError for NaN/inf (pydantic already refuses them on the request)."""
    if value is not None and not math.isfinite(value):
        from specops.errors import InputError

        raise InputError(f"{name} must be a finite number, got {value}", f"give --{name.replace('_', '-')} a number")
