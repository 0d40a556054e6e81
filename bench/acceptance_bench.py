"""Acceptance benchmark: prints numbers, asserts nothing.

Leave-one-source-out error of predicted τ (mean acceptance length) against published τ, over the rows of
playbooks/data/acceptance_2026-12.csv that state γ (specops.planner.acceptance.cross_validate): overall,
per method and per task class, for the acceptance model and, through the same harness, for today's
priors (specops.planner.priors; `cross_validate_priors` below, the "before" harness). Then the draft-model-at-scale rows that publish only a speedup: a
speedup S needs τ ≥ S, so a predicted τ below S is an underprediction.

Also: suffix decoding per held-out source (where its error comes from; the rows of a repetitive workload that no other source measures are not predicted, and what they would miss as an ordinary workload is printed beside); the draft-model slopes (ratio, target size) and the lineage effect (released same-family sibling drafts) with each draft-model source held out, and the sibling rows held out, and the largest targets' rows held out; the γ-not-stated draft-model rows at
γ=5 and γ=10 (TensorRT-LLM's draft-target examples put draft_len at 4-10 "in common usage"); and the task
directions: every method × task contrast a source publishes within itself (same method, draft, γ, temperature,
engine: task rows against its chat rows), against the sign of `--task`'s shift in a model fitted without
that source.

Run: .venv/bin/python bench/acceptance_bench.py
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from specops.planner.acceptance import (  # noqa: E402
    AcceptanceRow,
    cross_validate,
    fit,
    lineage_key,
    load_rows,
    lower_bounds,
    row_branching,
    scorable,
    solve_gamma,
)
from specops.planner.acceptance_fit import tree_tokens  # noqa: E402
from specops.planner.loso import by_stratum, errors, leave_one_source_out, summary_line  # noqa: E402
from specops.planner.priors import calibrate, load_published  # noqa: E402
from specops.speculation import PLANNED  # noqa: E402

GOAL_ALL, GOAL_METHOD, MIN_ROWS = 0.15, 0.20, 10


PRIORS_TASK = {"mixed": "chat", "qa": "chat", "multimodal": "chat", "rag": "summarization", "code-edit": "code"}


def cross_validate_priors(rows: list[AcceptanceRow] | None = None):
    """The same harness on today's priors (specops.planner.priors, calibrated on the speedup tables of
    playbooks/data without the held-out source): the 'before' figure."""
    rows = list(rows if rows is not None else load_rows())
    published = load_published()
    by_string = {r.source: r.source_id for r in rows}
    all_ids = {r.source_id for r in rows}

    def fit_priors(train: list[AcceptanceRow]):
        held = all_ids - {r.source_id for r in train}
        return calibrate([p for p in published if by_string.get(p.source) not in held])

    def predict(priors, r: AcceptanceRow) -> float | None:
        if r.method not in PLANNED or r.method == "none":
            return None
        ratio = r.draft_params_b / r.target_params_b if r.draft_params_b and r.target_params_b else None
        prior = priors.lookup(r.method, task=PRIORS_TASK.get(r.task_class, r.task_class), temperature=r.temperature or 0.0,
                              generation=r.variant if r.method == "eagle3" and r.variant in ("3", "3.1") else None,
                              structure=r.structure, draft=r.draft or None, draft_ratio=ratio)
        return prior.expected_tokens(solve_gamma(r))

    return leave_one_source_out(rows, fit=fit_priors, predict=predict,
                                published=lambda r: r.published_tau() if scorable(r) else None,
                                source=lambda r: r.source_id)




def _table(label: str, scored, key) -> None:
    for name, group in by_stratum(scored, key).items():
        errs = errors(group)
        if not errs:
            continue
        goal = "" if len(errs) < MIN_ROWS or label != "method" else (
            "  (goal ≤ 0.20: met)" if statistics.median(errs) <= GOAL_METHOD else "  (goal ≤ 0.20: NOT met)")
        print(f"  {label} {name:<14} median |ln τ| {statistics.median(errs):.3f} over {len(errs):>3} rows{goal}")


def _level(r) -> tuple[str, float] | None:
    """A row's published level for within-source contrasts: τ, else its per-task speedup (same table only)."""
    tau = r.published_tau()
    if tau is not None:
        return ("tau", tau)
    return ("speedup", r.speedup) if r.speedup else None


def published_directions(rows) -> dict[tuple[str, str, str], float]:
    """(source, method, task class) -> mean relative difference of the task's level against the same
    source's chat rows of the same method, draft, γ, temperature and engine (and kind of level)."""
    groups: dict[tuple, dict[str, list[float]]] = {}
    for r in rows:
        lv = _level(r)
        if lv is None or r.task_class in ("mixed", "multimodal") or "pathological" in r.flags:
            continue
        key = (r.source_id, r.method, r.variant, r.draft, r.target, r.gamma, r.temperature, r.engine, lv[0])
        groups.setdefault(key, {}).setdefault(r.task_class, []).append(lv[1])
    out: dict[tuple[str, str, str], list[float]] = {}
    for key, by_task in groups.items():
        if "chat" not in by_task:
            continue
        chat = statistics.fmean(by_task["chat"])
        for task, vals in by_task.items():
            if task != "chat":
                out.setdefault((key[0], key[1], task), []).append(statistics.fmean(vals) / chat - 1)
    return {k: statistics.fmean(v) for k, v in out.items()}


def _directions(rows) -> None:
    from specops.planner.acceptance import estimate

    found = published_directions(rows)
    print("task directions (published within one source vs that source held out; |Δ| < 3% counts as 'no move'):")
    agree = n = alone = 0
    models = {}
    for (src, method, task), rel in sorted(found.items()):
        if src not in models:
            models[src] = fit([r for r in rows if r.source_id != src])
        est = estimate(models[src], method, task=task, target="meta-llama/Llama-3.1-8B-Instruct")
        if est is None:
            continue
        pub = "raises" if rel > 0.03 else "lowers" if rel < -0.03 else "no move"
        if not est.cell_rows:  # no other source has a row of this method × task: --task does not move it
            alone += 1
            print(f"  {method:<11} {task:<13} {src:<22} published {pub:<7} ({rel:+.0%})  held out: no row of another source")
            continue
        shift = est.task_shift
        got = "raises" if shift > 0.005 else "lowers" if shift < -0.005 else "no move"
        ok = pub == got or pub == "no move"
        n += 1
        agree += ok
        print(f"  {method:<11} {task:<13} {src:<22} published {pub:<7} ({rel:+.0%})  held out: {got:<7} "
              f"(α0 {shift:+.3f}, {len(est.cell_rows)} rows of other sources){'' if ok else '  <- disagrees'}")
    print(f"  directions reproduced with their source held out: {agree}/{n} where another source has rows of the cell; "
          f"{alone} contrasts have none (--task leaves those methods at their chat level)")


def _trees_by_size(after, rows) -> None:
    """The tree rows held out, by candidates a level, under the tree term (after) and the old switch (before: a chain
    of the depth, no decay, one per-method tree effect, ``acceptance_fit.TREE_SIZE_TERM = False``)."""
    from specops.planner import acceptance_fit

    acceptance_fit.TREE_SIZE_TERM = False
    try:
        old = {s.row.id: s.predicted for s in cross_validate(rows)}
    finally:
        acceptance_fit.TREE_SIZE_TERM = True
    k = fit(rows).kappa
    print(f"trees by size, each source held out (b = draft tokens / depth; κ {k.value:.2f} on all rows, from {k.sweeps} "
          f"tree-size sweeps):")
    swept = sorted({r.source_id for r in rows if r.id in k.rows})
    print("  κ with each sweep's source held out: " + ", ".join(
        f"{src} {fit([r for r in rows if r.source_id != src]).kappa.value:.2f}" for src in swept))
    trees = sorted((s for s in after if s.row.structure == "tree" and s.predicted is not None),
                   key=lambda s: (row_branching(s.row), s.row.id))
    for s in trees:
        r, n = s.row, tree_tokens(s.row)
        print(f"  {r.id} {r.source_id:<22} {r.method:<7} depth {solve_gamma(r)} tokens {n}{'' if r.tree_tokens else ' (default)':<10} "
              f"b {row_branching(r):4.1f}: published τ {s.published:.2f}, predicted {s.predicted:.2f} (old switch "
              f"{old[r.id]:.2f})")
    for lo, hi, label in ((1.0, 1.5, "b < 1.5 (nearly chains)"), (1.5, 4.0, "1.5 ≤ b < 4"), (4.0, 99.0, "b ≥ 4")):
        group = [s for s in trees if lo <= row_branching(s.row) < hi]
        if group:
            e_new = statistics.median(abs(math.log(s.published / s.predicted)) for s in group)
            e_old = statistics.median(abs(math.log(s.published / old[s.row.id])) for s in group)
            print(f"  {label:<24} median |ln τ| {e_new:.3f} (old switch {e_old:.3f}) over {len(group)} rows")
    e_new = statistics.median(abs(math.log(s.published / s.predicted)) for s in trees)
    e_old = statistics.median(abs(math.log(s.published / old[s.row.id])) for s in trees)
    print(f"  all tree rows             median |ln τ| {e_new:.3f} (old switch {e_old:.3f}) over {len(trees)} rows")


def _suffix_by_source(after, rows) -> None:
    print("suffix decoding by held-out source:")
    for src, group in by_stratum([s for s in after if s.row.method == "suffix"], lambda s: s.row.source_id).items():
        errs = errors(group)
        missing = [s for s in group if s.predicted is None]
        tail = ""
        if missing:  # rows of a workload no other source measures: not predicted; what ignoring that would have said
            m = fit([r for r in rows if r.source_id != src])
            forced = [abs(math.log(s.published / m.predict_row(AcceptanceRow(**{**s.row.__dict__,
                                                                                  "flags": s.row.flags - {"repetitive-workload"}}))))
                      for s in missing]
            tail = (f"; {len(missing)} rows of a repetitive workload not predicted (no evidence near; predicted as an "
                    f"ordinary workload they would miss by median |ln τ| {statistics.median(forced):.3f})")
        if not errs:
            print(f"  {src:<27} no row predicted{tail}")
            continue
        by_task = ", ".join(f"{t} {statistics.median(errors(g)):.3f} ({len(errors(g))})"
                            for t, g in by_stratum(group, lambda s: s.row.task_class).items() if errors(g))
        print(f"  {src:<27} median |ln τ| {statistics.median(errs):.3f} over {len(errs):>2} rows: {by_task}{tail}")
    brackets = [r.tau_bounds() for r in rows if r.method == "suffix" and r.tau_bounds()]
    if brackets:
        half = [math.log(hi / lo) / 2 for lo, hi in brackets]
        print(f"  tau-bracketed rows (scored at the geometric middle of [batch-1 speedup, 1 + rate·γ]): {len(half)}, "
              f"half-width in ln {min(half):.3f}-{max(half):.3f}")


def _draft_slopes(rows) -> None:
    """The draft-model slopes (logit α0 per ln(draft/target ÷ 1/16) and per ln(target/8B)), fitted on every row and
    with each draft-model source held out, and the rows with the largest targets predicted with their source held out."""
    print("draft-model slopes (logit α0: per ln draft ratio, per ln(target/8B)) and the lineage effect (a released "
          "sibling of the target), each draft-model source held out:")
    srcs = sorted({r.source_id for r in rows if r.method == "draft_model" and r.used})
    for src in ["(none)", *srcs]:
        m = fit([r for r in rows if r.source_id != src])
        print(f"  without {src:<22} ratio {m.slopes['draft_ratio'].get('*', 0.0):+.3f}, "
              f"target size {m.slopes['target_size'].get('*', 0.0):+.3f}, "
              f"lineage {m.effects['lineage'].get(('draft_model', 'sibling'), 0.0):+.3f}")
    sib = [r for r in rows if scorable(r) and lineage_key(r.method, r.draft, r.target_family, r.draft_params_b)]
    for r, p in _held_out(rows, sib):
        print(f"  sibling {r.id} {r.target[:24]:<24} draft {r.draft[:24]:<24} γ={solve_gamma(r)}: published τ "
              f"{r.published_tau():.2f}, held out {p:.2f} (ln {math.log(r.published_tau() / p):+.3f})")
    big = [r for r in rows if r.method == "draft_model" and scorable(r) and (r.target_params_b or 0) >= 100]
    for r, p in _held_out(rows, big):
        print(f"  {r.id} {r.target[:16]:<16} draft {r.draft:<10} γ={solve_gamma(r)}: published τ {r.published_tau():.2f}, "
              f"held out {p:.2f} (|ln| {abs(math.log(r.published_tau() / p)):.3f})")


def _held_out(rows, subset):
    """(row, τ predicted by the model fitted without the row's source) for each row of ``subset``, by source."""
    for src in sorted({r.source_id for r in subset}):
        m = fit([r for r in rows if r.source_id != src])
        for r in (r for r in subset if r.source_id == src):
            yield r, m.predict_row(r)


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
    _suffix_by_source(after, rows)
    _trees_by_size(after, rows)
    # draft models at scale: each source held out in turn
    model_rows = [r for r in rows if r.tau_lower_bound is not None and "lower-bound-only" in r.flags]
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
            at10 = ""
            if r.gamma is None:
                (_, tau10), = lower_bounds(m, [AcceptanceRow(**{**r.__dict__, "gamma": 10})])
                at10 = f"; at γ=10 {tau10:.2f}"
            print(f"  {r.id} {r.target[:28]:<28} draft {r.draft_params_b:g}B γ={r.gamma or '5 (not stated)'}: S {r.tau_lower_bound:.2f}, "
                  f"predicted τ {tau:.2f} (before {tau_old:.2f}){at10}")
    print(f"  predicted τ ≥ published speedup: after {ok_after}/{n}, before {ok_before}/{n}")
    _draft_slopes(rows)
    _directions(rows)


if __name__ == "__main__":
    main()
