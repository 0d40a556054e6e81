"""Acceptance benchmark: prints numbers, asserts nothing.

Leave-one-source-out error of predicted τ (mean acceptance length) against published τ, over the rows of
playbooks/data/acceptance_2026-12.csv that state γ (specops.planner.acceptance.cross_validate): overall,
per method and per task class, for the acceptance model and, through the same harness, for today's
priors (specops.planner.priors). Then the draft-model-at-scale rows that publish only a speedup: a
speedup S needs τ ≥ S, so a predicted τ below S is an underprediction.

Run: .venv/bin/python bench/acceptance_bench.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from specops.planner.acceptance import (  # noqa: E402
    cross_validate,
    cross_validate_priors,
    fit,
    load_rows,
    lower_bounds,
)
from specops.planner.loso import by_stratum, errors, summary_line  # noqa: E402
from specops.planner.priors import calibrate, load_published  # noqa: E402

GOAL_ALL, GOAL_METHOD, MIN_ROWS = 0.15, 0.20, 10


def _table(label: str, scored, key) -> None:
    for name, group in by_stratum(scored, key).items():
        errs = errors(group)
        if not errs:
            continue
        goal = "" if len(errs) < MIN_ROWS or label != "method" else (
            "  (goal ≤ 0.20: met)" if statistics.median(errs) <= GOAL_METHOD else "  (goal ≤ 0.20: NOT met)")
        print(f"  {label} {name:<14} median |ln τ| {statistics.median(errs):.3f} over {len(errs):>3} rows{goal}")


def main() -> None:
    rows = load_rows()
    t0 = time.perf_counter()
    after = cross_validate(rows)
    t_after = time.perf_counter() - t0
    before = cross_validate_priors(rows)
    common = {id(s.row) for s in before if s.predicted is not None} & {id(s.row) for s in after if s.predicted is not None}
    print(f"{len(rows)} rows, {len({r.source_id for r in rows})} sources; scored: rows that state γ and give τ "
          "(or accepted/drafted, or α)")
    print(summary_line("acceptance", after, measure="|ln τ|") + f"  [goal ≤ {GOAL_ALL}; fits {t_after:.1f} s]")
    print("  " + summary_line("before (today's priors, same harness)", before, measure="|ln τ|"))
    print("  on the rows both predict: after " + summary_line("", [s for s in after if id(s.row) in common],
                                                               measure="|ln τ|").split("LOSO: ")[1]
          + "; before " + summary_line("", [s for s in before if id(s.row) in common], measure="|ln τ|").split("LOSO: ")[1])
    print("after, per method:")
    _table("method", after, lambda s: s.row.method)
    print("before, per method:")
    _table("method", before, lambda s: s.row.method)
    print("after, per task class:")
    _table("task", after, lambda s: s.row.task_class)
    print("before, per task class:")
    _table("task", before, lambda s: s.row.task_class)
    worst = sorted((s for s in after if s.log_error is not None), key=lambda s: -abs(s.log_error))[:8]
    print("worst held-out rows (after):")
    for s in worst:
        r = s.row
        print(f"  {r.id} {r.source_id:<22} {r.method:<11} {r.task_class:<13} γ={r.gamma} published τ {s.published:.2f} "
              f"predicted {s.predicted:.2f}")
    # draft models at scale: each source held out in turn
    model_rows = [r for r in rows if r.tau_lower_bound is not None]
    ok_after = ok_before = n = 0
    print("draft models at scale (published speedup S, so τ ≥ S; each source held out):")
    for src in sorted({r.source_id for r in model_rows}):
        m = fit([r for r in rows if r.source_id != src])
        old = calibrate([p for p in load_published() if src not in p.source.lower()])
        for r, tau in lower_bounds(m, [r for r in model_rows if r.source_id == src]):
            ratio = r.draft_params_b / r.target_params_b
            prior = old.lookup("draft_model", task="chat", draft_ratio=ratio)
            tau_old = prior.expected_tokens(r.gamma or 5)
            n += 1
            ok_after += tau >= r.tau_lower_bound
            ok_before += tau_old >= r.tau_lower_bound
            print(f"  {r.id} {r.target[:28]:<28} draft {r.draft_params_b:g}B γ={r.gamma or '5 (not stated)'}: S {r.tau_lower_bound:.2f}, "
                  f"predicted τ {tau:.2f} (before {tau_old:.2f})")
    print(f"  predicted τ ≥ published speedup: after {ok_after}/{n}, before {ok_before}/{n}")


if __name__ == "__main__":
    main()
