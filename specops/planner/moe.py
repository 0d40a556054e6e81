"""Mixture-of-experts terms of the step cost: experts a forward reads, how efficiently, what the token
exchange costs under a TP/EP layout, and which regime a verification runs in.

- :func:`experts_touched`: distinct routed experts per MoE layer that n tokens activate. Tokens of
  different sequences route independently; the t tokens one verification scores are consecutive
  positions of one sequence, and consecutive positions share experts more than random tokens do
  (``locality`` ρ: the share of a position's routed experts that the previous position already chose).
  Independent token count n_eff = B·(1 + (t−1)·(1−ρ)); experts touched = E·(1 − (1 − k/E)^n_eff).
  ρ = 0 (the default) is uniform, independent routing: an upper bound on what a verification reads.
- :func:`expert_read_efficiency`: routed-expert weights are read by grouped GEMMs, one small GEMM per
  expert; the smaller an expert's matrices the further from the dense bandwidth. Efficiency
  s / (s + s½), s = bytes of one expert's weights in one layer, s½ = ``EngineProfile.expert_half_mb``
  (the expert size read at half the dense bandwidth). Qwen3-30B-A3B's 9 MB experts read at ~0.5 of
  the dense bandwidth, Mixtral's 352 MB experts at ~0.97 (bench/stepcost_bench.py fits s½).
- :func:`all_to_all_ms`: with experts split over ``ep`` ranks (expert parallel) or sharded over ``tp``
  ranks, every token's hidden state goes to its k experts' ranks and back: 2·n·k·hidden·2 bytes per
  MoE layer, the (r−1)/r share of it off the GPU, over the per-GPU link.
- :func:`regime`: weight-bound (the experts read grow with the tokens verified: speculation reads more
  bytes per step than decode), expert-saturated (decode already reads most experts: verifying more
  tokens reads at most SATURATED_RATIO times the expert bytes, so MoE targets behave like dense ones
  and speculation gains grow with batch until compute binds) or compute-bound (the verification's
  FLOPs exceed its memory time).
"""

from __future__ import annotations

from dataclasses import dataclass

from specops.planner.types import GPU, ModelSpec

SATURATED_RATIO = 1.25
"""Verifying reads at most this many times the expert bytes decoding reads: the layout is expert-saturated
(decode already reads most experts; at batch 64 gpt-oss-120b's 4-token verification reads 1.15x)."""


def expert_split(model: ModelSpec) -> tuple[float, float]:
    """(dense params, routed-expert params) in units of 1; all dense for non-MoE."""
    total = model.params_b * 1e9
    if not model.is_moe:
        return total, 0.0
    share = model.experts_per_token / model.experts
    experts = (total - model.active_b * 1e9) / (1 - share)
    return total - experts, experts


def effective_tokens(batch: int, tokens_per_seq: int, locality: float = 0.0) -> float:
    """Independent routing decisions among ``batch`` sequences × ``tokens_per_seq`` positions."""
    return max(1.0, batch * (1 + (tokens_per_seq - 1) * (1 - locality)))


def experts_touched(model: ModelSpec, n_tokens: float) -> float:
    """Expected distinct routed experts per MoE layer that ``n_tokens`` independent tokens activate, each
    choosing k of E: E·(1 − (1 − k/E)^n) (uniform, independent routing; see the module docstring)."""
    if not model.is_moe:
        return 0.0
    k, e = model.experts_per_token, model.experts
    return e * (1 - (1 - k / e) ** max(1.0, n_tokens))


def expert_bytes(model: ModelSpec) -> float:
    """Bytes of one routed expert's weights in one MoE layer."""
    _, experts = expert_split(model)
    if not experts:
        return 0.0
    return experts / (model.experts * model.layers) * model.weight_bits / 8


def expert_read_efficiency(model: ModelSpec, half_mb: float) -> float:
    """Achieved / dense bandwidth on routed-expert weights: s / (s + s½)."""
    s = expert_bytes(model) / 1e6
    return s / (s + half_mb) if s > 0 else 1.0


def all_to_all_ms(model: ModelSpec, gpu: GPU, ranks: int, n_tokens: float, link_gbs: float) -> float:
    """Dispatch + combine of n tokens' hidden states to their k experts' ranks and back, per forward."""
    if not model.is_moe or ranks <= 1 or link_gbs <= 0:
        return 0.0
    volume = 2 * n_tokens * model.experts_per_token * model.hidden * 2 * (ranks - 1) / ranks / ranks
    return model.layers * volume / (link_gbs * 1e9) * 1000


@dataclass(frozen=True)
class MoeRegime:
    """Where one MoE verification sits, with the numbers behind the name."""

    name: str                   # weight-bound | expert-saturated | compute-bound
    experts_decode: float       # experts per layer one decode step (batch tokens) reads
    experts_verify: float       # ... and one verification (batch × (γ+1) tokens)
    experts_total: int
    expert_bytes_ratio: float   # expert bytes verify / decode
    read_efficiency: float

    def line(self) -> str:
        why = {
            "weight-bound": "verifying reads more experts than decoding, so a speculative step costs more bytes",
            "expert-saturated": "decode already reads nearly every expert, so verifying more tokens adds no weight reads",
            "compute-bound": "the verification's FLOPs exceed what the weight reads hide",
        }[self.name]
        return (f"MoE regime {self.name}: {self.experts_decode:.1f} of {self.experts_total} experts per layer at decode, "
                f"{self.experts_verify:.1f} when verifying ({self.expert_bytes_ratio:.2f}x the expert bytes); {why}")


def regime(model: ModelSpec, *, batch: int, verify_tokens: int, compute_bound: bool, locality: float,
           half_mb: float) -> MoeRegime | None:
    """Name the regime of a MoE verification (None for dense targets)."""
    if not model.is_moe:
        return None
    dec = experts_touched(model, effective_tokens(batch, 1, locality))
    ver = experts_touched(model, effective_tokens(batch, verify_tokens, locality))
    if compute_bound:
        name = "compute-bound"
    elif (ver / dec if dec else 1.0) <= SATURATED_RATIO:
        name = "expert-saturated"
    else:
        name = "weight-bound"
    return MoeRegime(name, dec, ver, model.experts, ver / dec if dec else 1.0,
                     expert_read_efficiency(model, half_mb))
