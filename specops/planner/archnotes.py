"""What the decision path says about a target's architecture: a mixture of experts (its regime by layout,
planner/moe.py) and a hybrid model (recurrent state instead of KV). Both annotate the ``model_size`` step
of a finished pipeline run (``ctx``: planner.recommend.Context)."""

from __future__ import annotations

from specops.planner.types import DecisionStep


def moe_note(ctx, steps: list[DecisionStep]) -> None:
    """Name a mixture-of-experts target on the model-size rule: its size bucket is by total parameters, but a
    step reads the active ones, and verifying t tokens reads the experts t tokens touch - which regime the
    layout is in (planner/moe.py), and the published baseline rows of this model the step cost rests on."""
    m = ctx.model
    step = next((s for s in steps if s.rule == "model_size"), None)
    if step is None or not m.is_moe:
        return
    from specops.planner.moe import regime
    from specops.planner.perfmodel import roofline_terms
    from specops.planner.stepcost import rows_for_model

    chosen, p, req = ctx.chosen, ctx.setup.profile, ctx.request
    t = (chosen.gamma + 1) if chosen is not None and chosen.method != "none" and chosen.gamma else 4
    b = chosen.effective_batch if chosen is not None else req.batch_size
    kv = chosen.kv_dtype if chosen is not None else "auto"
    mem, cmp_ = roofline_terms(ctx.setup, batch=b, tokens_per_seq=t, kv_len=req.context_len + req.output_len / 2,
                               kv_dtype=kv)
    r = regime(m, batch=b, verify_tokens=t, compute_bound=cmp_ > mem, locality=p.routing_locality,
               half_mb=p.expert_half_mb)
    step.input += f", moe: {m.active_b:g}B active of {m.params_b:g}B, top-{m.experts_per_token} of {m.experts} experts"
    rows = rows_for_model(m.id)
    rested = (f"; step cost checked on {len(rows)} published baseline rows of this model "
              f"({', '.join(rows[:3])}{', ...' if len(rows) > 3 else ''}; bench/stepcost_bench.py)" if rows else
              "; no published baseline row of this model: the MoE terms rest on other MoE targets' rows")
    step.outcome += (f"; MoE target: a decode step reads the {m.active_b:g}B active parameters, not {m.params_b:g}B; "
                     f"at batch {b} verifying {t} tokens per sequence: {r.line()} "
                     f"(uniform routing, locality {p.routing_locality:g}: an upper bound at small batch; experts read at "
                     f"{r.read_efficiency:.2f} of the dense bandwidth){rested}")


def hybrid_note(ctx, steps: list[DecisionStep]) -> None:
    """Name a hybrid target (recurrent / linear-attention layers) on the model-size rule: what its memory holds
    instead of a per-token KV cache, and what a verification costs in those layers."""
    m = ctx.model
    step = next((s for s in steps if s.rule == "model_size"), None)
    if step is None or not m.recurrent_layers:
        return
    from specops.planner.perfmodel import kv_bytes_per_seq, recurrent_state_bytes

    state = recurrent_state_bytes(m)
    per_token = kv_bytes_per_seq(m, "auto", 2) - kv_bytes_per_seq(m, "auto", 1)
    full = per_token * m.layers / max(1, m.layers - m.linear_layers)
    t = (ctx.chosen.gamma + 1) if ctx.chosen is not None and ctx.chosen.gamma else 4
    if m.linear_layers:
        held = (f"{m.linear_layers} of {m.layers} layers hold a recurrent state ({state / 2**20:.1f} MiB per sequence, "
                f"whatever its length) instead of KV, so KV is {per_token / 1024:.0f} KiB per token (all-attention: "
                f"{full / 1024:.0f} KiB)")
    else:  # a parallel hybrid (Falcon-H1): attention and a Mamba mixer side by side in each such layer
        held = (f"{m.parallel_ssm_layers} of {m.layers} layers run a Mamba mixer beside attention (parallel hybrid): "
                f"a step reads both mixers' weights, the KV grows as an all-attention model's ({per_token / 1024:.0f} "
                f"KiB per token) and the layers also hold a recurrent state ({state / 2**20:.1f} MiB per sequence, "
                f"whatever its length)")
    step.outcome += (f"; hybrid target: {held}; speculating keeps "
                     f"1 + γ state slots per sequence (vLLM gdn_attn.py / mamba_utils.py), and a verification of {t} "
                     f"tokens reads the state once and writes it {t} times (one per position, for rollback)")
