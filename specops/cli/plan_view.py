"""The human rendering of a Plan (rich); JSON/YAML come from the same model."""

from __future__ import annotations


def print_plan(plan) -> None:
    """``plan``: a specops.planner.types.Plan (from specops.api.recommend)."""
    import shlex

    from rich.markup import escape
    from rich.table import Table

    from specops.cli.output import console

    out = console()
    p, m = plan.predicted, plan.memory
    gamma = plan.num_speculative_tokens or "-"
    out.print(f"[bold]{plan.model}[/] on {plan.gpus}× {plan.gpu}: [bold green]{plan.method}[/] γ={gamma}"
              f" KV {plan.kv_cache_dtype}" + (f" draft {plan.draft}" if plan.draft else ""))
    if plan.num_speculative_tokens_per_batch_size:
        out.print("per-batch γ: " + ", ".join(f"{a}-{b}: {k}" for a, b, k in plan.num_speculative_tokens_per_batch_size))
    out.print(f"predicted: {p.speedup:.2f}x, TPOT {p.tpot_ms:.1f} ms (baseline {p.baseline_tpot_ms:.1f}), "
              f"{p.throughput_tok_s:.0f} tok/s, τ {p.mean_acceptance_length:.2f}, accepted/drafted "
              f"{p.acceptance_rate:.2f}, TTFT {p.ttft_ms:.0f} ms (baseline {p.baseline_ttft_ms:.0f})")
    if p.speedup_low is not None:
        out.print(f"range: {p.speedup_low:.2f}x-{p.speedup_high:.2f}x ({p.evidence})")
    elif p.evidence:
        out.print(f"evidence: {p.evidence}")
    out.print(f"acceptance prior: {p.acceptance_prior_source}")
    for note in plan.learned_from:
        out.print(f"learned from {note}")
    if plan.load is not None:
        ld = plan.load
        lat = f"{ld.latency_s:.2f} s" if ld.latency_s is not None else "unbounded"
        out.print(f"load: {ld.qps:g} req/s -> {ld.concurrency} in flight (latency {lat}; "
                  f"{'converged' if ld.converged else 'NOT converged'} in {ld.iterations} steps): {ld.note}")
    out.print(f"memory: {m.total_gib:.1f} of {m.available_gib:.1f} GiB (weights {m.weights_gib:.1f}, draft "
              f"{m.draft_gib:.2f}, KV {m.kv_cache_gib:.1f}); fits: {m.fits}, max batch {m.max_batch_that_fits}")
    path = Table("rule", "input", "outcome", title="decision path")
    for s in plan.decision_path:
        path.add_row(s.rule, s.input, s.outcome)
    out.print(path)
    if plan.alternatives:
        alt = Table("method", "γ", "KV", "speedup", "range", "TPOT ms", "tok/s", title="alternatives")
        for a in plan.alternatives:
            rng = f"{a.speedup_low:.2f}-{a.speedup_high:.2f}" if a.speedup_low is not None else "-"
            alt.add_row(a.method, str(a.num_speculative_tokens or "-"), a.kv_cache_dtype, f"{a.speedup:.2f}", rng,
                        f"{a.tpot_ms:.1f}", f"{a.throughput_tok_s:.0f}")
        out.print(alt)
    for w in plan.warnings:
        out.print("[yellow]warning:[/] " + escape(w))
    out.print("launch: " + shlex.join(plan.vllm.argv), soft_wrap=True, markup=False, highlight=False)  # [ngram] is argv
