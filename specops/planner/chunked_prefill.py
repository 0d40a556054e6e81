"""What an arriving request's prefill costs the decode it shares a GPU with, under chunked prefill (issue 44).

vLLM V1 schedules prefill and decode together: chunked prefill is on by default and each step packs the running
requests' decode tokens and chunks of waiting prompts up to ``--max-num-batched-tokens`` (vllm 0.33.0
engine/arg_utils.py ``get_batch_defaults``: for the API server 16384 on GPUs of ≥ 160 GiB, 8192 on ≥ 70 GiB other than
A100, 2048 otherwise). A decode step is memory-bound: it reads the weights (and the KV) once whatever the tokens, so
a prompt chunk packed into it does not read the weights again; its compute fills the step's idle compute, and the
step only grows by what the chunk adds to the roofline's larger side:

    step(decode + chunk) = max(M_d + M_c', C_d + C_c) + p·min(...)   vs   step(decode) = max(M_d, C_d) + p·min(...)

(M: memory time, C: compute time, p: the profile's overlap penalty, M_c': what the chunk reads beyond the decode's
weights: its KV and the experts it alone routes to; perfmodel.py ``roofline_terms``). A prefill run on its own
(``perfmodel.prefill_ms``, the plan's TTFT) pays the weight read, the step overhead and the penalty again. So the
share of GPU time the arriving prefills take from decode is ``rate × Σ_chunks (step(decode + chunk) − step(decode))``,
not ``rate × TTFT``: at a short prompt on a memory-bound GPU most of the prefill rides on the decode's weight read.

The cost model's profile may be a fitted one (`specops tune`): the ratio marginal/separate is taken from the shipped
profile's roofline and applied to the plan's own TTFT, so the scale stays the plan's.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specops.planner.perfmodel import Setup
    from specops.planner.types import GPU, Plan, RecommendRequest


def batched_tokens(gpu: GPU) -> int:
    """vLLM 0.33's default ``--max-num-batched-tokens`` for the OpenAI server on ``gpu`` (engine/arg_utils.py
    ``get_batch_defaults``; the same table is assumed for SGLang's chunked prefill; the CPU backend: 2048 a
    process, one here)."""
    if gpu.name == "cpu":
        return 2048
    if gpu.memory_gib >= 160:
        return 16384
    if gpu.memory_gib >= 70 and "a100" not in gpu.name.lower():
        return 8192
    return 2048


def _on_rank(setup: Setup) -> float:
    """How many times the replica-level (spread) compute of a prompt its own rank does under data-parallel attention:
    its attention and dense layers all (× ranks), its routed experts' GEMMs spread (expert parallel); 1 otherwise."""
    from specops.planner.moe import expert_split

    ranks = setup.tp if setup.dp_attention else 1
    m = setup.model
    routed = expert_split(m)[1] * m.experts_per_token / m.experts if m.is_moe else 0.0
    f = min(1.0, routed / (m.active_b * 1e9)) if m.active_b else 0.0  # routed experts' share of a token's FLOPs
    return ranks * (1 - f) + f


def rank_prefill_factor(setup: Setup, context_len: int, kv_dtype: str) -> float:
    """(one request's prefill on its own rank) / (the replica-level prefill, spread over the ranks): data-parallel
    attention runs a prompt's attention and dense layers on one rank, its routed experts on all, and keeps its KV on
    that rank; 1 without data parallelism. Between 1 and the ranks."""
    from specops.planner.perfmodel import overlapped, prefill_ms, roofline_terms

    ranks = setup.tp if setup.dp_attention else 1
    if ranks <= 1:
        return 1.0
    spread = prefill_ms(setup, context_len, kv_dtype)
    m_p, c_p = roofline_terms(setup, batch=1, tokens_per_seq=context_len, kv_len=context_len / 2, kv_dtype=kv_dtype,
                              scored=1)
    m_0, _ = roofline_terms(setup, batch=1, tokens_per_seq=context_len, kv_len=0, kv_dtype=kv_dtype, scored=1)
    pen = setup.profile.overlap_penalty
    one = spread - overlapped(m_p, c_p, pen) + overlapped(m_0 + (m_p - m_0) * ranks, c_p * _on_rank(setup), pen)
    return min(float(ranks), max(1.0, one / spread)) if spread > 0 else float(ranks)


def mixed_share(setup: Setup, *, context_len: int, batch: int, tokens_per_seq: int, kv_len: float,
                kv_dtype: str, budget: int | None = None) -> float:
    """(decode time a prompt of ``context_len`` tokens adds when its chunks ride on decode steps of ``batch``
    sequences × ``tokens_per_seq`` new tokens over ``kv_len``) / (its prefill run alone), in (0, 1].

    Data-parallel attention (``setup.dp_attention``): the prompt is prefilled on one rank, the decode batch is spread
    over the ranks; both sides are taken on that one rank. The chunk's attention and dense layers run on its rank
    (the replica-level roofline terms × ranks), its routed experts' GEMMs on the experts' ranks (expert parallel:
    spread as the replica-level terms are)."""
    from specops.planner.perfmodel import allreduce_ms, moe_ms, overlapped, prefill_ms, roofline_terms

    p = setup.profile
    budget = budget or batched_tokens(setup.gpu)
    ranks = setup.tp if setup.dp_attention else 1
    on_rank = _on_rank(setup)
    dec_tokens = max(1, math.ceil(batch / ranks)) * tokens_per_seq
    chunk = max(1, budget - dec_tokens)
    m_d, c_d = roofline_terms(setup, batch=batch, tokens_per_seq=tokens_per_seq, kv_len=kv_len, kv_dtype=kv_dtype)
    m_w, _ = roofline_terms(setup, batch=batch, tokens_per_seq=tokens_per_seq, kv_len=0, kv_dtype=kv_dtype)
    alone = overlapped(m_d, c_d, p.overlap_penalty)
    added, done = 0.0, 0
    while done < context_len:
        c = min(chunk, context_len - done)
        m_c, c_c = roofline_terms(setup, batch=1, tokens_per_seq=c, kv_len=done + c / 2, kv_dtype=kv_dtype, scored=1)
        m_c0, _ = roofline_terms(setup, batch=1, tokens_per_seq=c, kv_len=0, kv_dtype=kv_dtype, scored=1)
        # the chunk's own reads: its KV, and the weights its tokens touch beyond what the decode step reads already
        extra_mem = (m_c - m_c0) * ranks + max(0.0, m_c0 - m_w)  # experts: sharded over the ranks
        added += overlapped(m_d + extra_mem, c_d + c_c * on_rank, p.overlap_penalty) - alone
        added += allreduce_ms(setup, dec_tokens + c) - allreduce_ms(setup, dec_tokens)
        added += moe_ms(setup, dec_tokens + c) - moe_ms(setup, dec_tokens)
        done += c
    separate = prefill_ms(setup, context_len, kv_dtype) * ranks
    return min(1.0, max(added, 0.0) / separate) if separate > 0 else 1.0


@lru_cache(maxsize=4096)
def _share_for(request_json: str, batch: int, gamma: int, kv_dtype: str) -> tuple[float, float]:
    """(:func:`mixed_share`, :func:`rank_prefill_factor`) for a request; (1, ranks) (the whole prefill, the
    conservative side) where the shipped catalogs do not know what the plan was made with (a caller's own)."""
    from specops.errors import SpecopsError
    from specops.planner.catalog import load_catalogs
    from specops.planner.perfmodel import engine_profile
    from specops.planner.recommend import resolve
    from specops.planner.types import RecommendRequest

    request = RecommendRequest.model_validate_json(request_json)
    try:
        _, _, setup = resolve(request, load_catalogs(), engine_profile(request.engine), withheld=[])  # as recommend
    except SpecopsError:
        return 1.0, float(request.data_parallel_size)
    return (mixed_share(setup, context_len=request.context_len, batch=batch, tokens_per_seq=gamma + 1,
                        kv_len=request.context_len + request.output_len / 2, kv_dtype=kv_dtype),
            rank_prefill_factor(setup, request.context_len, kv_dtype))


def prefill_cost_ms(request: RecommendRequest, plan: Plan) -> tuple[float, float]:
    """(GPU time one arriving request's prefill takes from the decode of ``plan`` (its batch, its γ: a verify step
    carries γ + 1 tokens a sequence): the plan's TTFT × :func:`mixed_share`; the factor from the plan's TTFT to one
    request's own prefill, :func:`rank_prefill_factor`)."""
    key = request.model_copy(update={"qps": None, "batch_size": 1}).model_dump_json()
    pred = plan.predicted
    gamma = pred.num_speculative_tokens_at_batch if plan.method != "none" else 0
    kv = plan.kv_cache_dtype if plan.kv_cache_dtype else "auto"
    share, own = _share_for(key, max(1, pred.effective_batch), max(0, gamma or 0), kv)
    return pred.ttft_ms * share, own
