"""A request rate served by one engine: decode and prefill share the GPU.

At ``qps`` requests per second every request is prefilled once; a prefill of P ms (the plan's TTFT:
the prompt's forward plus a draft's prefill at its real size) holds the GPU, so prefills take
ρ = qps·P/1000 of every second. What is left runs the decode steps, so a decode step's wall time
stretches to TPOT/(1 − ρ), and a new request waits for the prefills queued ahead of it (M/D/1:
P·ρ/(2(1 − ρ)) on average). ρ ≥ 1 is a rate the prefill alone cannot serve, whatever the batch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Loaded:
    """One request's latency at a rate."""

    prefill_share: float   # ρ: share of GPU time the prefills take
    ttft_ms: float         # TTFT incl. the wait for queued prefills
    tpot_ms: float         # TPOT with the prefills interleaved
    latency_s: float       # TTFT + output × TPOT
    feasible: bool         # ρ < 1

    def limit_note(self, qps: float, prefill_ms: float, context_len: int) -> str:
        most = 1000 / prefill_ms if prefill_ms > 0 else float("inf")
        return (f"{qps:g} req/s of {context_len}-token prompts needs {qps * prefill_ms:.0f} ms of prefill per second "
                f"of GPU time ({qps * context_len:,.0f} prompt tokens/s at {prefill_ms:.0f} ms a prefill): the prefill "
                f"alone cannot keep up above {most:.1f} req/s; add GPUs, shorten the prompts or cache their prefixes")


def loaded(qps: float, *, prefill_ms: float, tpot_ms: float, output_len: int) -> Loaded:
    rho = qps * prefill_ms / 1000
    if rho >= 1:
        return Loaded(rho, float("inf"), float("inf"), float("inf"), False)
    ttft = prefill_ms * (1 + rho / (2 * (1 - rho)))
    tpot = tpot_ms / (1 - rho)
    return Loaded(rho, ttft, tpot, (ttft + output_len * tpot) / 1000, True)
