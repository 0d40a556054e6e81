"""The published-run section of bench/uncertainty_bench.py (issue 38; specops.planner.published_runs): the spread
between sources that published the same configuration, and the nested figures with and without the update by the
other sources' runs near each held-out row. Imported by uncertainty_bench.py's main(); not a bench of its own."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

import uncertainty_bench as ub

from specops.planner.evidence import hardware_known
from specops.planner.uncertainty import DEFAULT_MIN_P_GAIN, assess


def between_sources(rows=None) -> None:
    """The replication floor (specops.planner.replications): how much independent sources disagree on the same
    configuration, at three keys, with a bootstrap 80% interval over configurations and the implied floor on an 80%
    range's high/low; split by engine class and by task-matched pairs. What BETWEEN_SOURCE_SD stands for."""
    from specops.planner import replications as rp
    from specops.planner.published_runs import BETWEEN_SOURCE_SD

    rows = rows if rows is not None else rp.replication_rows()
    print("\n== the replication floor: configurations published by two or more independent sources ==")
    print(f"   rows: the calibration rows (with {rp.REPLICATIONS_FILE}) + {rp.COMMUNITY_FILE} (replication only); one "
          f"author's repeats merged ({', '.join(sorted(rp.SAME_AUTHOR))}); a source's figure is the mean ln speedup of "
          "its rows there")
    for level in rp.LEVELS:
        configs = rp.replications(rows, level=level)
        print(f"-- key {level}: {len(configs)} configurations, {sum(len(c.pairs()) for c in configs)} pairs --")
        for c in configs:
            print(f"   {'/'.join(map(str, c.key[:5]))}{' (sampled)' if c.key[5] else ''}"
                  f"{'' if c.task_matched else ' [task differs]'}: "
                  + ", ".join(f"{_short(s)} {math.exp(v):.2f}x" for s, v in sorted(c.means.items())))
        _floor_line("all", configs)
        for label, keep in (("serving", lambda c: c.engine == "serving"), ("HF harness", lambda c: c.engine == "harness"),
                            ("native runtimes", lambda c: c.engine == "native"),
                            ("task-matched", lambda c: c.task_matched), ("task differs", lambda c: not c.task_matched)):
            _floor_line(label, [c for c in configs if keep(c)])
        repeats = rp.replications(rows, level=level, independent=False)
        _floor_line("with one author's repeats as two sources", repeats)
    well = {level: rp.well_estimated(rp.replications(rows, level=level)) for level in rp.LEVELS}
    serving = rp.serving_sigma(rows)
    print(f"shipped BETWEEN_SOURCE_SD {BETWEEN_SOURCE_SD:.2f} (floor {rp.width_floor(BETWEEN_SOURCE_SD):.2f}); the "
          f"serving configurations at the any-gpu key (what a published run near a request is): σ_rep {serving:.3f}; "
          f"well estimated (>= {rp.MIN_CONFIGS} configurations, 80% interval hi/lo <= {rp.WELL_ESTIMATED_RATIO}): "
          + ", ".join(f"{level} {'yes' if ok else 'no'}" for level, ok in well.items()))


def _short(source: str) -> str:
    """A source key short enough for one line: a community table's contributor by handle."""
    return source.split("table ", 1)[1][:20] if "community table" in source else source[:26]


def _floor_line(label: str, configs: list) -> None:
    from specops.planner import replications as rp

    sigma = rp.sigma_rep(configs)
    if sigma is None:
        print(f"   {label:<42} no pair")
        return
    lo, hi = rp.bootstrap(configs)
    robust = rp.sigma_robust(configs)
    print(f"   {label:<42} {len(configs):>2} configs: σ_rep {sigma:.3f} (80% {lo:.3f}-{hi:.3f}), floor on an 80% "
          f"range's hi/lo {rp.width_floor(sigma):.2f} ({rp.width_floor(lo):.2f}-{rp.width_floor(hi):.2f}); from the "
          f"median pair (σ {robust:.3f}) {rp.width_floor(robust):.2f}; goal 1.6")


def floor_versus_shipped(held: list) -> None:
    """The replication floor next to the shipped ranges' median high/low (the same nested folds) and the goal."""
    from specops.planner import replications as rp

    widths = [h.u.speedup_high / h.u.speedup_low for h in held if h.u.speedup_low > 0]
    rows = rp.replication_rows()
    for label, sigma in [(f"{level} key", rp.sigma_rep(rp.replications(rows, level=level))) for level in rp.LEVELS] + [
            ("serving, any-gpu key", rp.serving_sigma(rows))]:
        if sigma is not None:
            print(f"replication floor ({label}): 80% hi/lo >= {rp.width_floor(sigma):.2f} for a new source's figure; "
                  f"shipped median hi/lo {statistics.median(widths):.2f}; goal 1.6")


def width_goal_lines(held: list) -> None:
    """The width goal where recommend is asked, in one line: for the serving rows and the HF harness rows, the shipped
    median hi/lo (these nested folds), the oracle width (the rows' own held-out residuals' 10-90%, ub.oracle_width)
    and the replication floor (two independent sources of one configuration, any-gpu key,
    specops.planner.replications): what width is reachable."""
    from specops.planner import replications as rp

    configs = rp.replications(rp.replication_rows(), level="any-gpu")
    parts = []
    for label, engine in (("serving rows", "serving"), ("HF harness rows", "harness")):
        items = [h for h in held if h.u.stratum.startswith(engine)]
        mine = [c for c in configs if c.engine == engine]
        sigma = rp.sigma_rep(mine)
        floor = f"{rp.width_floor(sigma):.2f} ({len(mine)} configurations)" if sigma is not None else "no pair"
        parts.append(f"{label} ({len(items)}): shipped median hi/lo {statistics.median(h.u.width for h in items):.2f}, "
                     f"oracle {ub.oracle_width(items):.2f}, replication floor {floor}")
    print(f"width goal {ub.GOAL_WIDTH} (oracle: the rows' own held-out residuals' 10-90%; floor: any-gpu key): "
          + "; ".join(parts))


def published_section(held: list) -> None:
    """Before/after the published-run update, on the same nested folds."""
    floor_versus_shipped(held)
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
                                         query=h.query, bounds=h.bounds if ub.GAMMA_BOUNDS else None)) for h in held]
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




if __name__ == "__main__":  # the replication section alone (≈ 2 s); the nested figures come with uncertainty_bench.py
    between_sources()
