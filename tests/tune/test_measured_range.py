"""A range from the user's own measurement: a calibration's leave-one-configuration-out residuals
(specops.tune.residuals) give its predictions a split-conformal range, P(gain) and expected speedup
(specops.planner.measured_range).

Nothing is faked in the library: calibrations are fitted by ``fit_calibration`` from grid points whose ground truth
is the closed-form machine below, written here and unlike the fitter's formula - the target's step grows with the
*square* of the verified tokens (the fitter's step cost is linear in them), a draft model's passes grow with the
batch, n-gram's lookup is per sequence - with acceptance P(first k drafts accepted) = α^k, counters at their
expected values, and seeded log-normal noise of a known σ on each run's tokens/s (TPOT moves with it). The
coverage checks draw fresh points from the same machine.
"""

from __future__ import annotations

import math
import random
import statistics

import pytest

from specops.planner.measured_range import MIN_RESIDUALS, assess_measured, order_statistics
from specops.tune.calibration import FittedModel, fit_calibration
from specops.tune.residuals import loco_residuals, measured_residuals
from specops.tune.types import EngineConfig, GridPoint, PointResult, Sample

ALPHA = {"ngram": 0.62, "draft_model": 0.78}  # per-token acceptance: P(first k drafts accepted) = α^k
DRAFTING = {"ngram": 0.75, "draft_model": 1.0}  # share of decode steps that carry a draft
CONCURRENCY = (1, 4)
POOL = [(m, g) for m in ("ngram", "draft_model") for g in range(1, 9)]  # the configurations a user might tune
DRAFT = "/models/draft"


def step_ms(method: str, gamma: int, b: int) -> float:
    """One scheduler step (ms): a fixed cost, per-sequence work and a compute term quadratic in the tokens
    verified; speculating adds a proposer call and the draft's work."""
    f = DRAFTING.get(method, 0.0)
    v = b * (1 + f * gamma)  # tokens through the target per step
    t = 8.0 + 1.5 * b + 0.4 * v + 0.02 * v * v
    if method == "ngram":
        t += 0.9 + 0.3 * b * f
    elif method == "draft_model":
        t += 0.9 + f * gamma * (1.8 + 0.25 * b)
    return t


def tau(method: str, gamma: int) -> float:
    if method == "none":
        return 1.0
    return 1.0 + DRAFTING[method] * sum(ALPHA[method] ** k for k in range(1, gamma + 1))


def util(b: int) -> float:
    """The decoding share of a closed-loop run's wall time (prefill, ramp-up, tail)."""
    return 0.92 / (1 + 0.03 * (b - 1))


def true_speedup(method: str, gamma: int, b: int) -> float:
    return step_ms("none", 0, b) / (step_ms(method, gamma, b) / tau(method, gamma))


def run(method: str, gamma: int, b: int, rng: random.Random, sigma: float, rate: float | None = None,
        requests: int = 8, output: int = 64) -> Sample:
    """One run: tokens/s e^ε times the truth, ε ~ N(0, σ); counters at their expected values. ``rate``: a
    synthetic-rate cost run (acceptance α = rate by construction, the same step cost)."""
    alpha = rate if rate is not None else ALPHA.get(method, 0.0)
    t = 1.0 if method == "none" else 1.0 + DRAFTING[method] * sum(alpha ** k for k in range(1, gamma + 1))
    tpot = step_ms(method, gamma, b) / t * math.exp(-rng.gauss(0.0, sigma))
    decode = requests * (output - 1)
    steps = decode / t
    drafts = DRAFTING.get(method, 0.0) * steps
    per_pos = [drafts * alpha ** k for k in range(1, gamma + 1)] if method != "none" else []
    return Sample(tpot_ms=tpot, tokens_per_s=util(b) * b * 1000.0 / tpot, num_drafts=drafts,
                  num_draft_tokens=drafts * gamma, num_accepted_tokens=sum(per_pos), accepted_per_position=per_pos,
                  generation_tokens=requests * output, requests=requests)


def config(method: str, gamma: int) -> EngineConfig:
    return EngineConfig(method=method, gamma=gamma, draft=DRAFT if method == "draft_model" else None)


def calibration(configs, sigma: float, rng: random.Random, repeats: int = 1, name: str = "sim"):
    """The baseline and ``configs`` at each concurrency, ``repeats`` runs each, fitted as `specops tune` does."""
    points = [PointResult(run_id="sim", point=GridPoint(config=config(m, g), concurrency=b, repeat=r), status="ok",
                          sample=run(m, g, b, rng, sigma), started_at="2026-12-01T00:00:00+00:00", seconds=1.0)
              for r in range(repeats) for m, g in [("none", 0), *configs] for b in CONCURRENCY]
    return fit_calibration(points, name=name, hardware="simulated", model="sim", engine_version="0.32.0",
                           workload="code", run_id="sim")


def predicted(model: FittedModel, method: str, gamma: int, b: int) -> tuple[float, float]:
    """(speedup, τ) as recommend takes them from a calibration (specops.planner.context._measured)."""
    p, base = model.predict(method, gamma, b), model.predict("none", 0, b)
    return base.tpot_ms / p.tpot_ms, p.tau


def fresh_configuration_coverage(sigma: float, draws: int, seed0: int = 0) -> dict[str, float]:
    """Split-conformal's own setting: each draw measures 11 configurations drawn from POOL, keeps one back as the
    fresh one, and fits the calibration on the other 10 (20 residuals); the fresh configuration's range (from the
    fit of all 10) is scored at each concurrency against a fresh run of it over the calibration's measured
    baseline ("measured", how tune measures a speedup) and against its true speedup ("true")."""
    hits: dict[str, list[float]] = {"measured": [], "true": []}
    for seed in range(seed0, seed0 + draws):
        rng = random.Random(seed)
        fresh, *configs = rng.sample(POOL, 11)
        cal = calibration(configs, sigma, rng)
        model, evidence = FittedModel(cal), measured_residuals(cal)
        base = {r.point.concurrency: r.sample.tokens_per_s for r in cal.points if r.point.config.method == "none"}
        got = {"measured": 0, "true": 0}
        for b in CONCURRENCY:
            u = assess_measured(*predicted(model, *fresh, b), evidence)
            again = run(*fresh, b, rng, sigma).tokens_per_s / base[b]
            got["measured"] += u.speedup_low <= again <= u.speedup_high
            got["true"] += u.speedup_low <= true_speedup(*fresh, b) <= u.speedup_high
        for k in hits:
            hits[k].append(got[k] / len(CONCURRENCY))
    out = {k: statistics.fmean(v) for k, v in hits.items()}
    out.update({f"{k}_se": statistics.stdev(v) / math.sqrt(draws) for k, v in hits.items()})
    return out


def test_the_range_holds_its_nominal_level_on_fresh_configurations():
    """300 draws at σ 0.05: a fresh run of a configuration the calibration never saw lands in its 80% range as
    often as split-conformal promises for 20 residuals - (19 − 2)/21 = 81% - within three standard errors of
    the draws; its true speedup at least as often (the residuals carry the runs' noise, the truth does not)."""
    assert order_statistics(20) == (2, 19)
    c = fresh_configuration_coverage(0.05, 300)
    print(f"coverage at σ 0.05: {c['measured']:.3f} ± {c['measured_se']:.3f} of fresh runs, "
          f"{c['true']:.3f} ± {c['true_se']:.3f} of true speedups")
    assert abs(c["measured"] - 17 / 21) <= 3 * c["measured_se"], c
    assert c["true"] >= 0.8 - 3 * c["true_se"], c


def test_a_split_conformal_range_needs_nine_residuals_at_80_percent():
    """⌊(n+1)·0.1⌋ ≥ 1 and ⌈(n+1)·0.9⌉ ≤ n first hold at n = 9; with 8, no range of the calibration's own."""
    assert MIN_RESIDUALS == 9
    assert order_statistics(8) is None and order_statistics(9) == (1, 9)
    rng = random.Random(1)
    few = measured_residuals(calibration([("ngram", 2), ("ngram", 5), ("draft_model", 2), ("draft_model", 5)],
                                         0.02, rng))
    assert len(few.log_ratios) == 8 and few.configurations == 4
    assert assess_measured(1.5, 2.0, few) is None


def test_synthetic_rate_runs_are_no_residuals_and_leave_with_their_configuration():
    """Residuals are the standard runs' configurations × concurrencies; a configuration's synthetic cost runs
    are left out with it: its residual does not change when they were never measured (a fit that kept them
    would have learned its step cost from them)."""
    rng = random.Random(2)
    configs = [("ngram", g) for g in (1, 2, 4)] + [("draft_model", g) for g in (1, 3, 5)]
    std = calibration(configs, 0.03, rng).points
    syn = [PointResult(run_id="sim", point=GridPoint(config=EngineConfig(method=m, gamma=g, synthetic_rate=a,
                                                                         draft=DRAFT if m == "draft_model" else None),
                                                     concurrency=b), status="ok",
                       sample=run(m, g, b, rng, 0.03, rate=a), started_at="2026-12-01T00:00:00+00:00", seconds=1.0)
           for m, g in configs for a in (0.3, 0.8) for b in CONCURRENCY]
    rows, _ = loco_residuals(std + syn)
    assert len(rows) == len(configs) * len(CONCURRENCY)
    assert all(r.config.synthetic_rate is None for r in rows)
    held = next(r for r in rows if r.config.key == "draft_model-g3" and r.concurrency == 4)
    without_its_own = [p for p in syn if p.point.config.key.partition("-syn")[0] != "draft_model-g3"]
    again = next(r for r in loco_residuals(std + without_its_own)[0]
                 if r.config.key == "draft_model-g3" and r.concurrency == 4)
    assert again.log_ratio == pytest.approx(held.log_ratio, abs=1e-12)


def test_a_concurrency_without_a_measured_baseline_uses_the_fitted_one_and_says_so():
    rng = random.Random(3)
    points = calibration([("ngram", g) for g in (1, 2, 3, 4, 6)], 0.02, rng).points
    points = [p.model_copy(update={"status": "failed", "sample": None, "error": "engine exited"})
              if p.point.config.method == "none" and p.point.concurrency == 4 else p for p in points]
    cal = fit_calibration(points, name="nobase", hardware="simulated", model="sim", engine_version="0.32.0",
                          workload="code")
    rows, _ = loco_residuals(cal.points)
    assert {r.baseline for r in rows if r.concurrency == 4} == {"fitted"}
    assert {r.baseline for r in rows if r.concurrency == 1} == {"measured"}
    evidence = measured_residuals(cal)
    u = assess_measured(1.4, 2.0, evidence)
    assert evidence.fitted_baseline == 5 and "5 of them over the fitted baseline" in u.line()


GRID = [(m, g) for m in ("ngram", "draft_model") for g in (1, 2, 3, 4, 6)]  # tune's default-sized grid
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


class WithoutResiduals:
    """The same fitted model without ``range_residuals`` (the optional part of the planner's MeasuredModel
    protocol): what its predictions get without residuals of their own - the published-evidence range, for the
    same speedup and τ. Faked: nothing; it hides one method of a real FittedModel."""

    def __init__(self, model: FittedModel) -> None:
        self.label, self.drafts, self.gammas, self.predict = model.label, model.drafts, model.gammas, model.predict


def plans(cal, batch: int = 1, pin: tuple[str, int] | None = None):
    """(the plan with the calibration's own range, the plan with the published range), same request; ``pin``
    (method, γ) the candidate."""
    from specops.api.recommend import build_request
    from specops.planner.recommend import recommend

    extra = {"method": pin[0], "num_speculative_tokens": pin[1]} if pin else {}
    req = build_request(model=MODEL, gpu="cpu", task="code", batch_size=batch, **extra)
    return recommend(req, measured=FittedModel(cal)), recommend(req, measured=WithoutResiduals(FittedModel(cal)))


def test_the_range_narrows_with_the_noise_and_is_far_narrower_than_the_published_one():
    """The grid at σ 0.01 and 0.10 (3 repeats, 4 seeds each): the median width hi/lo of the pick's range grows
    with σ - at σ 0.10 its ln-width is at least 0.2, as an 80% range of runs whose median over 3 repeats
    scatters by ≈ 0.8·σ must be (2·1.28·0.8·σ) - and at σ 0.01 its ln-width is under a third of the published
    range's for the same candidate (the same fitted speedup and τ, the pick pinned)."""
    widths: dict[float, list[float]] = {0.01: [], 0.10: []}
    published = []
    for sigma in widths:
        for seed in range(4):
            cal = calibration(GRID, sigma, random.Random(seed), repeats=3, name=f"w{seed}")
            own, _ = plans(cal)
            assert own.method != "none"
            widths[sigma].append(own.predicted.range_width)
            pinned, pub = plans(cal, pin=(own.method, own.num_speculative_tokens))
            assert pinned.predicted.range_width == own.predicted.range_width
            published.append(pub.predicted.range_width)
    narrow, wide, pub_w = (statistics.median(widths[0.01]), statistics.median(widths[0.10]),
                           statistics.median(published))
    print(f"median hi/lo: σ 0.01 {narrow:.3f}, σ 0.10 {wide:.3f}; published for the same candidates {pub_w:.3f}")
    assert narrow < wide and math.log(wide) >= 0.2
    assert math.log(narrow) < math.log(pub_w) / 3


def test_with_too_few_configurations_the_published_range_is_shown_and_says_why():
    cal = calibration([("ngram", 2), ("ngram", 5), ("draft_model", 2), ("draft_model", 5)], 0.02,
                      random.Random(4), name="few")
    own, pub = plans(cal)
    p = own.predicted
    assert p.evidence.startswith("calibration few has 8 leave-one-configuration-out residuals (from 4 "
                                 "configurations), fewer than the 9 that a split-conformal range at 80% needs")
    assert "held-out errors on published rows" in p.evidence
    assert (p.speedup_low, p.speedup_high, p.p_gain) == (pub.predicted.speedup_low, pub.predicted.speedup_high,
                                                         pub.predicted.p_gain)
    assert any(w.startswith(f"{own.method}: calibration few has 8") for w in own.warnings)


def test_a_batch_outside_the_measured_concurrencies_gets_the_published_range_and_says_why():
    """Leaving a configuration out never tests the fit on another batch: at batch 8, past the measured 1 and 4, the
    fit extrapolates (this machine's quadratic compute term grows there) and no residual says how far off.
    Inside them (batch 2) the calibration's own range stands."""
    cal = calibration(GRID, 0.02, random.Random(5), name="c14")
    inside, _ = plans(cal, batch=2)
    outside, pub = plans(cal, batch=8)
    assert "leave-one-configuration-out residuals of calibration c14" in inside.predicted.evidence
    assert "(batch 2 lies between them: its range is theirs)" in inside.predicted.evidence
    b = outside.predicted.effective_batch  # 7: what fits of the 8 asked for on the cpu catalog entry
    assert b > 4 and outside.predicted.evidence.startswith(f"batch {b} is outside the concurrencies calibration c14 "
                                                           "measured (1, 4)")
    assert outside.predicted.speedup_low == pub.predicted.speedup_low and outside.predicted.p_gain is not None


def test_a_measured_point_on_the_published_range_takes_its_spread_not_the_rooflines_bias():
    """The published fallback for a measured candidate: the difficulty model's μ is the roofline's bias on published
    rows (separate draft models ran above it), which says nothing of a calibration's own point; its spread does."""
    from specops.planner.uncertainty import assess, default_calibration, stratum_of

    cal = default_calibration()
    s = stratum_of(engine="vllm", method="draft_model", kind="dense", moe=False, batch=8)
    roofline = assess(1.4, 2.5, s, cal, method="draft_model")
    measured = assess(1.4, 2.5, s, cal, method="draft_model", roofline_bias=False)
    assert roofline.bias > 0.1 and measured.bias == 0.0
    assert measured.expected_speedup < roofline.expected_speedup and measured.p_gain <= roofline.p_gain
    assert measured.scale == pytest.approx(roofline.scale)
