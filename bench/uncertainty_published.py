"""The published-run section of bench/uncertainty_bench.py (issue 38; specops.planner.published_runs): the spread
between sources that published the same configuration, and the nested figures with and without the update by the
other sources' runs near each held-out row. Imported by uncertainty_bench.py's main(); not a bench of its own."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

import uncertainty_bench as ub

from specops.planner.evidence import catalog_gpu, hardware_known
from specops.planner.published_runs import target_key
from specops.planner.uncertainty import DEFAULT_MIN_P_GAIN, assess, calibration_rows


def between_sources(rows=None) -> None:
    """The spread between sources that published the same configuration (target, method, GPU, batch, engine
    class): what BETWEEN_SOURCE_SD stands for."""
    from specops.planner.published_runs import BETWEEN_SOURCE_SD
    from specops.planner.uncertainty import engine_class, source_key

    rows = rows if rows is not None else calibration_rows()
    cells: dict[tuple, dict[str, list[float]]] = {}
    for r in rows:
        gpu = catalog_gpu(r.hardware)
        if r.speedup and r.batch_known and gpu and r.method:
            key = (target_key(r.target), r.method, gpu, r.batch, engine_class(r.engine))
            cells.setdefault(key, {}).setdefault(source_key(r.source), []).append(math.log(r.speedup))
    diffs = []
    print("\n== between-source spread: configurations published by two or more sources ==")
    for key, by in sorted(cells.items()):
        if len(by) < 2:
            continue
        means = {s: statistics.mean(v) for s, v in by.items()}
        vals = list(means.values())
        diffs += [abs(a - b) for i, a in enumerate(vals) for b in vals[i + 1:]]
        print(f"   {'/'.join(map(str, key))}: " + ", ".join(f"{s[:28]} {math.exp(v):.2f}x" for s, v in means.items()))
    if diffs:
        med = statistics.median(diffs)
        print(f"between sources: {len(diffs)} pairs, median |Δ ln speedup| {med:.3f} (a per-source sd of "
              f"{med / 0.954:.3f} for normal noise); shipped BETWEEN_SOURCE_SD {BETWEEN_SOURCE_SD:.2f}")


def published_section(held: list) -> None:
    """Before/after the published-run update, on the same nested folds."""
    before = [replace(h, u=h.model_only) for h in held]
    near = [h for h in held if h.u.evidence_rows]
    print("\n== published runs near the request (each fold: the other sources' rows only) ==")
    print(f"held-out rows with a near published row from another source: {len(near)} of {len(held)} "
          f"({len({h.row.source for h in near})} sources)")
    for label, items in (("all rows", (before, held)),
                         ("rows with a near run", ([replace(h, u=h.model_only) for h in near], near))):
        if not items[1]:
            continue
        for name, hs in zip(("model alone", "with published runs"), items, strict=True):
            sits = ub.situations(hs)
            m, hm, _, _ = ub.regret(sits, ub.new_rule(DEFAULT_MIN_P_GAIN))
            print(f"   {label:<22} {name:<20} {ub._cov(hs, lambda h: (h.u.speedup_low, h.u.speedup_high))}, "
                  f"Brier {ub._brier(hs):.4f}, regret left {m:.2f} slowdown {hm:.2f}, median |ln(published/expected)| "
                  f"{statistics.median(abs(math.log(h.published / h.u.expected_speedup)) for h in hs):.3f}")
    _published_sensitivity(held)
    for h in near[:12]:
        print(f"   {h.row.target[:28]} {h.row.method} b{h.row.batch} {h.row.hardware[:12]} published "
              f"{h.published:.2f}x, point {h.speedup:.2f}x: P(gain) {h.model_only.p_gain:.2f} -> {h.u.p_gain:.2f}, "
              f"expected {h.model_only.expected_speedup:.2f} -> {h.u.expected_speedup:.2f}x; {h.u.evidence_rows[0][:70]}")
    print("-- P(gain) reliability, model alone --")
    _reliability(before)
    print("-- P(gain) reliability, with published runs --")
    _reliability(held)


def _published_sensitivity(held: list) -> None:
    """The same folds re-assessed with other noise levels of a published run (BETWEEN_SOURCE_SD)."""
    import specops.planner.published_runs as pr

    shipped = pr.BETWEEN_SOURCE_SD
    print(f"-- the noise of one published run (BETWEEN_SOURCE_SD, shipped {shipped:.2f}), the same folds re-assessed --")
    sits = ub.situations(held)
    transfer = pr.TRANSFER_ERROR
    try:
        for sd, tr in ((0.05, transfer), (0.10, transfer), (0.15, transfer), (0.20, transfer), (0.30, transfer),
                       (0.45, transfer), (shipped, not transfer)):
            pr.BETWEEN_SOURCE_SD, pr.TRANSFER_ERROR = sd, tr
            again = [replace(h, u=assess(h.speedup, h.tau, h.stratum, h.calibration, tau_high=h.tau_high,
                                         hardware_known=hardware_known(h.row.hardware), method=h.row.method,
                                         query=h.query)) for h in held]
            by_id = {id(h.row): a for h, a in zip(held, again, strict=True)}
            m, hm, _, _ = ub.regret({k: [by_id[id(h.row)] for h in v] for k, v in sits.items()},
                                 ub.new_rule(DEFAULT_MIN_P_GAIN))
            print(f"   sd {sd:.2f}, observe {'the model error at the run' if tr else 'the run speedup as the request'}"
                  f"'s: {ub._cov(again, lambda h: (h.u.speedup_low, h.u.speedup_high))}, Brier "
                  f"{ub._brier(again):.4f}, regret left {m:.2f} slowdown {hm:.2f}")
    finally:
        pr.BETWEEN_SOURCE_SD, pr.TRANSFER_ERROR = shipped, transfer


def _reliability(held: list) -> None:
    p = [h.u.p_gain for h in held]
    gained = [1.0 if h.published > 1 else 0.0 for h in held]
    for lo, hi in ((0, 0.5), (0.5, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 0.97), (0.97, 1.01)):
        idx = [i for i, x in enumerate(p) if lo <= x < hi]
        if idx:
            print(f"   [{lo:.2f}, {min(hi, 1):.2f}) n={len(idx):>3}  mean P {statistics.mean(p[i] for i in idx):.2f}  "
                  f"gained {statistics.mean(gained[i] for i in idx):.2f}")


