"""Result types of ``specops bench``."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from specops.benchmark.client import RequestResult
from specops.benchmark.procmem import ProcessMemory
from specops.metrics.types import Measurement
from specops.models import Strict

_Strict = Strict


class BenchTarget(_Strict):
    """One engine to drive."""

    role: Literal["spec", "baseline"] = Field(description="spec: speculation on; baseline: off.")
    endpoint: str = Field(description="Base URL of the engine.")
    served_name: str | None = Field(None, description="Model name in requests (default: the engine's only one).")
    pid: int | None = Field(None, description="Local server pid, for process memory.")
    api_key_env: str | None = Field(None, description="Env var holding the API key (value never stored).")


class BenchOptions(_Strict):
    """Everything one benchmark needs; the CLI fills it from flags and the registry."""

    deployment: str | None = Field(None, description="Registry deployment measured (results are recorded).")
    spec: BenchTarget = Field(description="The speculative engine.")
    baseline: BenchTarget | None = Field(None, description="The engine without speculation, if any.")
    workload: str = Field("code", description="Built-in set (code, prose, long-output) or JSONL path.")
    concurrency: list[int] = Field(default_factory=lambda: [1, 4], description="Concurrency levels.")
    requests: int = Field(16, ge=1, le=100_000, description="Requests per run.")
    rate: float | None = Field(None, gt=0, description="Poisson arrival rate (requests/s); None: closed loop.")
    stress_factor: float | None = Field(None, gt=0, description="Multiply --rate (stress mode).")
    max_tokens: int | None = Field(None, ge=1, description="Override the workload's max_tokens.")
    seed: int = Field(1, description="Seed for prompt choice and arrivals.")
    window_s: float = Field(1.0, gt=0, description="Seconds between /metrics scrapes during a run.")
    warmup: int = Field(1, ge=0, description="Unmeasured requests per engine before the first run.")
    request_timeout_s: float = Field(600.0, gt=0, description="Per-request timeout.")
    stream: bool = Field(True, description="Stream (TTFT and TPOT per request); False: one response per request "
                         "(end-to-end time and tokens/s only, least client/API-server CPU).")


class CrossCheck(_Strict):
    """Engine counters against what the client itself received."""

    server_generation_tokens: float | None = Field(None, description="vllm:generation_tokens_total delta.")
    client_usage_tokens: int = Field(description="Sum of usage.completion_tokens over requests.")
    client_chunk_tokens: int = Field(description="Sum of per-chunk token counts over requests.")
    server_draft_tokens: float | None = Field(None, description="spec_decode_num_draft_tokens delta.")
    client_draft_tokens: int | None = Field(None, description="Sum of per-request num_draft_tokens, if offered.")
    server_accepted_tokens: float | None = Field(None, description="spec_decode_num_accepted_tokens delta.")
    client_accepted_tokens: int | None = Field(None, description="Sum of per-request accepted tokens, if offered.")
    agree: bool = Field(description="All compared counts equal.")
    problems: list[str] = Field(default_factory=list, description="Each disagreement, in words.")


class RunResult(_Strict):
    """One engine at one concurrency level."""

    role: Literal["spec", "baseline"]
    endpoint: str
    served_name: str
    concurrency: int
    rate: float | None = Field(None, description="Arrival rate used (requests/s), None: closed loop.")
    requests: int
    ok: int
    failed: int
    errors: list[str] = Field(default_factory=list, description="Distinct error messages (first few).")
    started_at: datetime
    ended_at: datetime
    duration_s: float
    output_tokens: int = Field(description="Tokens received by the client (usage).")
    tokens_per_s: float | None = Field(None, description="output_tokens / duration.")
    ttft_p50_s: float | None = None
    ttft_p90_s: float | None = None
    tpot_p50_s: float | None = Field(None, description="Median of per-request TPOT (client).")
    tpot_p90_s: float | None = None
    tpot_mean_s: float | None = None
    e2e_per_token_p50_s: float | None = Field(None, description="Median of per-request end-to-end latency ÷ "
                                              "output tokens (s): immune to bursty streams.")
    acceptance_p50: float | None = Field(None, description="Median acceptance rate across requests/windows.")
    acceptance_p5: float | None = Field(None, description="5th percentile acceptance rate.")
    acceptance_length_p50: float | None = Field(None, description="Median τ across requests/windows.")
    acceptance_source: Literal["requests", "windows"] | None = Field(None, description="What P50/P5 are over.")
    acceptance_samples: int = Field(0, description="How many requests/windows P50/P5 are over.")
    measurement: Measurement | None = Field(None, description="Server counters over the whole run.")
    crosscheck: CrossCheck
    memory: ProcessMemory | None = None
    notes: list[str] = Field(default_factory=list)
    request_results: list[RequestResult] = Field(default_factory=list, description="Per request.")


class ABComparison(_Strict):
    concurrency: int
    spec_tpot_p50_s: float | None
    baseline_tpot_p50_s: float | None
    tpot_speedup: float | None = Field(None, description="baseline TPOT / spec TPOT (> 1: speculation helps).")
    tpot_speedup_low: float | None = Field(None, description="Low end of the 95% bootstrap interval of the TPOT "
                                           "speedup, from the per-request TPOTs of both runs (None: too few).")
    tpot_speedup_high: float | None = Field(None, description="High end of that interval.")
    speedup_verdict: Literal["faster", "slower", "too few requests to tell"] | None = Field(
        None, description="faster / slower: the whole interval is above / below 1; too few requests to tell: it "
        "spans 1 (or either run had fewer than 3 requests with a TPOT) - not a speedup.")
    spec_tokens_per_s: float | None
    baseline_tokens_per_s: float | None
    throughput_ratio: float | None = Field(None, description="spec tokens/s / baseline tokens/s.")


class BenchResult(_Strict):
    deployment: str | None
    workload: str
    workload_notes: list[str] = Field(default_factory=list)
    options: BenchOptions
    runs: list[RunResult]
    comparisons: list[ABComparison] = Field(default_factory=list)
    crosscheck_ok: bool = Field(description="Every run's counters agreed with the client.")
    recorded: bool = Field(False, description="Stored in the registry.")
    notes: list[str] = Field(default_factory=list)
