"""The range of a calibration's own predictions (specops.planner.measured_range) on simulated calibrations: the
closed-form machine of tests/tune/test_measured_range.py (a step cost the fitter cannot represent, α^k acceptance,
log-normal run noise of a known σ), no engine.

Coverage, per σ, over DRAWS draws of 10 configurations (11 drawn from γ 1-8 × ngram/draft_model, one kept back),
1 run per cell; each draw scores, at concurrency 1 and 4:

- fresh: the kept-back configuration (split-conformal's own setting), against a fresh run of it over the
  calibration's measured baseline ("over cal. baseline"), over a fresh baseline run too ("fresh baseline"), and its
  true speedup ("true");
- measured: one of the 10 measured configurations (what `recommend --calibration` ranks), the same three ways.

Width: the median hi/lo of recommend's pick (tune's grid: γ 1,2,3,4,6 × ngram/draft_model, 3 repeats, 8 seeds,
batch 1) at σ 0.01 and 0.10, and the published-evidence range of the same candidate (the pick pinned, the
calibration's residuals hidden)."""

from __future__ import annotations

import math
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DRAWS = 400


def coverage(sigma: float) -> dict[str, float]:
    from specops.planner.measured_range import assess_measured
    from specops.tune.calibration import FittedModel
    from specops.tune.residuals import measured_residuals
    from tests.tune.test_measured_range import CONCURRENCY, POOL, calibration, predicted, run, true_speedup

    hits: dict[str, list[bool]] = {}
    for seed in range(DRAWS):
        rng = random.Random(seed)
        fresh, *configs = rng.sample(POOL, 11)
        cal = calibration(configs, sigma, rng)
        model, evidence = FittedModel(cal), measured_residuals(cal)
        base = {r.point.concurrency: r.sample.tokens_per_s for r in cal.points if r.point.config.method == "none"}
        for b in CONCURRENCY:
            for kind, (m, g) in (("fresh", fresh), ("measured", configs[rng.randrange(len(configs))])):
                u = assess_measured(*predicted(model, m, g, b), evidence)
                spec = run(m, g, b, rng, sigma).tokens_per_s
                for what, value in (("over cal. baseline", spec / base[b]),
                                    ("fresh baseline", spec / run("none", 0, b, rng, sigma).tokens_per_s),
                                    ("true", true_speedup(m, g, b))):
                    hits.setdefault(f"{kind}, {what}", []).append(u.speedup_low <= value <= u.speedup_high)
    return {k: statistics.fmean(v) for k, v in hits.items()}


def widths(sigma: float, seeds: int = 8) -> tuple[float, float]:
    from tests.tune.test_measured_range import GRID, calibration, plans

    own_w, pub_w = [], []
    for seed in range(seeds):
        cal = calibration(GRID, sigma, random.Random(seed), repeats=3, name=f"w{seed}")
        own, _ = plans(cal)
        _, pub = plans(cal, pin=(own.method, own.num_speculative_tokens))
        own_w.append(own.predicted.range_width)
        pub_w.append(pub.predicted.range_width)
    return statistics.median(own_w), statistics.median(pub_w)


def main() -> None:
    import os

    os.environ["SPECOPS_HOME"] = tempfile.mkdtemp(prefix="specops-measured-range-")
    t0 = time.perf_counter()
    print(f"coverage of the 80% range, {DRAWS} draws x 2 concurrencies per cell (split-conformal on 20 residuals "
          f"promises (19-2)/21 = {17 / 21:.3f} for an exchangeable fresh configuration)")
    for sigma in (0.01, 0.05, 0.10):
        c = coverage(sigma)
        print(f"  sigma {sigma:.2f}: " + ", ".join(f"{k} {v:.3f}" for k, v in c.items()))
    for sigma in (0.01, 0.10):
        own, pub = widths(sigma)
        print(f"width: sigma {sigma:.2f}: calibration's own range median hi/lo {own:.3f} (ln {math.log(own):.3f}); "
              f"published range of the same candidates {pub:.3f} (ln {math.log(pub):.3f})")
    print(f"({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
