"""Data types of the metrics layer: one scrape (``Snapshot``) and one window (``Measurement``).

A ``Snapshot`` holds the raw cumulative values of the vLLM series specops uses, summed per group
(the ``specops_deployment`` label where present, else ``model_name``; engine indexes are summed).
A ``Measurement`` is the difference of two snapshots (or a PromQL window) with the derived rates.
Counters are floats because Prometheus returns floats; from ``/metrics`` they are whole numbers.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from specops.models import Strict

SPEC_COUNTERS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens")


class GroupValues(Strict):
    """Cumulative values of one group (deployment or served model) at one scrape."""


    group: str = Field(description="specops_deployment label value, else model_name.")
    group_label: Literal["specops_deployment", "model_name"] = Field(description="Which label grouped it.")
    num_drafts: float | None = Field(None, description="vllm:spec_decode_num_drafts_total (None: not exported).")
    num_draft_tokens: float | None = Field(None, description="vllm:spec_decode_num_draft_tokens_total.")
    num_accepted_tokens: float | None = Field(None, description="vllm:spec_decode_num_accepted_tokens_total.")
    accepted_per_pos: dict[int, float] = Field(default_factory=dict,
                                               description="vllm:spec_decode_num_accepted_tokens_per_pos_total by position.")
    generation_tokens: float | None = Field(None, description="vllm:generation_tokens_total.")
    request_success: float | None = Field(None, description="vllm:request_success_total (all finish reasons).")
    tpot_buckets: dict[float, float] = Field(default_factory=dict,
                                             description="Cumulative counts of vllm:request_time_per_output_token_seconds by `le`.")
    tpot_count: float | None = Field(None, description="Histogram _count.")
    tpot_sum: float | None = Field(None, description="Histogram _sum (seconds).")
    kv_cache_usage: float | None = Field(None, description="vllm:kv_cache_usage_perc (0..1; max over engines).")
    requests_running: float | None = Field(None, description="vllm:num_requests_running.")
    requests_waiting: float | None = Field(None, description="vllm:num_requests_waiting.")
    prefix_cache_queries: float | None = Field(None, description="vllm:prefix_cache_queries_total (tokens queried).")
    prefix_cache_hits: float | None = Field(None, description="vllm:prefix_cache_hits_total (tokens found cached).")
    external_prefix_cache_queries: float | None = Field(None, description="vllm:external_prefix_cache_queries_total "
                                                        "(a KV connector's cache, tokens queried).")
    external_prefix_cache_hits: float | None = Field(None, description="vllm:external_prefix_cache_hits_total "
                                                     "(tokens a KV connector restored).")

    @property
    def has_spec(self) -> bool:
        return all(getattr(self, c) is not None for c in SPEC_COUNTERS)


class Snapshot(Strict):
    """One scrape of a vLLM ``/metrics`` endpoint."""


    source: str = Field(description="The URL scraped (no credentials).")
    taken_at: datetime = Field(description="When the scrape finished (UTC).")
    groups: dict[str, GroupValues] = Field(default_factory=dict, description="Values per group.")
    vllm_series: int = Field(0, description="How many vllm:* samples the scrape held (0: stats disabled).")
    process_start: datetime | None = Field(None, description="process_start_time_seconds of the server, if exported.")
    notes: list[str] = Field(default_factory=list, description="What was ignored as not real (bad labels, ...).")


class Measurement(Strict):
    """Counters and derived rates of one group over one window. Rates are None when they cannot be
    computed (no drafts, no speculation, no requests), and ``notes`` says why: never a made-up number."""


    deployment: str = Field(description="Group: specops_deployment label, else served model name.")
    group_label: Literal["specops_deployment", "model_name"] = Field("model_name", description="Label grouped by.")
    source: Literal["metrics", "prometheus"] = Field(description="/metrics deltas or PromQL.")
    window_start: datetime = Field(description="Start of the window (UTC).")
    window_end: datetime = Field(description="End of the window (UTC).")
    speculation: bool = Field(description="Whether the engine exports spec-decode counters at all.")
    num_drafts: float | None = Field(None, description="Verify steps that had a draft, in the window.")
    num_draft_tokens: float | None = Field(None, description="Drafted tokens in the window.")
    num_accepted_tokens: float | None = Field(None, description="Accepted draft tokens (bonus excluded).")
    num_speculative_tokens: int | None = Field(None, description="K (γ), from the number of position series.")
    accepted_per_position: list[float] = Field(default_factory=list, description="Accepted tokens at position i.")
    per_position_rate: list[float | None] = Field(
        default_factory=list, description="accepted_per_position[i] / drafts: P(first i+1 drafts accepted).")
    acceptance_rate: float | None = Field(None, description="accepted / draft_tokens (not α unless K=1).")
    mean_acceptance_length: float | None = Field(
        None, description="τ = 1 + accepted / drafts (bonus included), per drafted step: steps without a draft "
        "are not counted as drafts.")
    per_token_alpha: float | None = Field(
        None, description="i.i.d. per-token α solving (1−α^(K+1))/(1−α) = τ.")
    generation_tokens: float | None = Field(None, description="Output tokens generated in the window.")
    requests_finished: float | None = Field(None, description="Requests finished in the window.")
    tpot_p50: float | None = Field(None, description="Median per-request TPOT (s) in the window.")
    tpot_p90: float | None = Field(None, description="90th percentile per-request TPOT (s).")
    tpot_p99: float | None = Field(None, description="99th percentile per-request TPOT (s).")
    tpot_mean: float | None = Field(None, description="Mean per-request TPOT (s): histogram sum/count.")
    kv_cache_usage: float | None = Field(None, description="KV-cache usage (0..1) at window end.")
    requests_running: float | None = Field(None, description="Running requests at window end.")
    requests_waiting: float | None = Field(None, description="Waiting requests at window end (queue depth).")
    prefix_cache_queries: float | None = Field(None, description="Prefix-cache queries in the window (tokens).")
    prefix_cache_hits: float | None = Field(None, description="Prefix-cache hits in the window (tokens).")
    external_prefix_cache_queries: float | None = Field(None, description="KV-connector cache queries (tokens).")
    external_prefix_cache_hits: float | None = Field(None, description="KV-connector cache hits: tokens whose KV "
                                                     "a connector restored in the window.")
    prefix_hit_rate: float | None = Field(None, description="prefix_cache_hits / prefix_cache_queries (None: no "
                                          "queries, or not exported).")
    external_prefix_hit_rate: float | None = Field(None, description="external hits / external queries (None: "
                                                   "no KV connector, or no queries).")
    counter_reset: bool = Field(False, description="A counter went down in the window (engine restart).")
    reset_counters: list[str] = Field(default_factory=list, description="Which counters reset.")
    empty_window: bool = Field(False, description="No drafts in the window: rates are None.")
    short_drafts: bool = Field(False, description="Drafts averaged fewer than K tokens: per-position rates and α "
                               "are lower bounds (vLLM exports no draft tokens per position).")
    notes: list[str] = Field(default_factory=list, description="Why a value is missing or flagged.")

    @property
    def seconds(self) -> float:
        return (self.window_end - self.window_start).total_seconds()
