"""recommend uses what the installation learned: a `specops tune` calibration (named, or the newest
for the model on CPU) and says so; an unknown calibration is bad input."""

from __future__ import annotations

import json

import pytest

from specops.api.recommend import build_request, recommend_with_defaults
from specops.tune.calibration import fit_calibration, predict_with, save_calibration
from specops.tune.types import (
    Coefficients,
    DrafterAcceptance,
    EngineConfig,
    GridPoint,
    PointResult,
    TuneCalibration,
)
from tests.tune.fakes import synthetic_sample


def _calibration(name: str, model: str, p0: float) -> TuneCalibration:
    return TuneCalibration(
        name=name, created_at="2026-11-29T12:00:00+00:00", hardware="cpu: 2 cores", model=model,
        engine_version="0.32.0", workload="code", samples=12,
        coefficients=Coefficients(overhead_ms=20.0, per_seq_ms=1.0, per_token_ms=0.5,
                                  draft_ms_per_token={"draft_model": 3.0}, draft_ms_per_seq={"ngram": 0.1}),
        acceptance=[DrafterAcceptance(method="ngram", per_position=[p0, p0 * 0.8, p0 * 0.6], drafts=[500, 500, 500])],
    )


def test_named_calibration_is_used_and_reported():
    save_calibration(_calibration("tiny-cpu", "meta-llama/Llama-3.1-8B-Instruct", 0.9))
    req = build_request(model="meta-llama/Llama-3.1-8B-Instruct", gpu="cpu", method="ngram")
    plan = recommend_with_defaults(req, calibration="tiny-cpu")
    assert any("calibration tiny-cpu@1: 12 measured points" in n for n in plan.learned_from)
    assert "measured" in plan.predicted.acceptance_prior_source


def test_newest_calibration_for_the_model_applies_by_default_on_cpu_only():
    save_calibration(_calibration("auto-cal", "meta-llama/Llama-3.1-8B-Instruct", 0.9))
    on_cpu = recommend_with_defaults(build_request(model="meta-llama/Llama-3.1-8B-Instruct", gpu="cpu"))
    on_gpu = recommend_with_defaults(build_request(model="meta-llama/Llama-3.1-8B-Instruct", gpu="H100"))
    assert any("auto-cal" in n for n in on_cpu.learned_from)
    assert on_gpu.learned_from == []


def test_measured_acceptance_in_the_calibration_changes_the_prediction():
    req = build_request(model="meta-llama/Llama-3.1-8B-Instruct", gpu="cpu", method="ngram",
                        num_speculative_tokens=3)
    save_calibration(_calibration("high", "x", 0.95))
    save_calibration(_calibration("low", "x", 0.2))
    high = recommend_with_defaults(req, calibration="high").predicted.mean_acceptance_length
    low = recommend_with_defaults(req, calibration="low").predicted.mean_acceptance_length
    assert high > low


def test_unknown_calibration_is_one_line_exit_2(cli):
    r = cli("recommend", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "cpu", "--calibration", "nope")
    assert r.returncode == 2
    assert "To fix:" in r.stderr and "Traceback" not in r.stderr


def test_json_output_lists_what_it_learned_from(cli):
    save_calibration(_calibration("cli-cal", "meta-llama/Llama-3.1-8B-Instruct", 0.9))
    r = cli("recommend", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "cpu", "-o", "json")
    assert r.returncode == 0, r.stderr
    assert any("cli-cal" in n for n in json.loads(r.stdout)["learned_from"])


def _fitted(name: str, model: str, gammas=(1, 2, 3, 4, 6), batches=(1, 4)) -> TuneCalibration:
    """A calibration fitted on consistent synthetic points (tests/tune/fakes.py), as `specops tune` stores it."""
    configs = [EngineConfig(method="none")]
    configs += [EngineConfig(method=m, gamma=g, draft="/models/draft" if m == "draft_model" else None)
                for m in ("ngram", "draft_model") for g in gammas]
    points = [PointResult(run_id="r", point=GridPoint(config=c, concurrency=b), status="ok",
                          sample=synthetic_sample(c, b), started_at="2026-11-29T12:00:00+00:00", seconds=1.0)
              for c in configs for b in batches]
    return fit_calibration(points, name=name, hardware="cpu: 2 cores", model=model, engine_version="0.32.0",
                           workload="code", run_id="r")


def test_with_a_calibration_the_fitted_model_ranks_the_measured_configurations():
    model = "meta-llama/Llama-3.1-8B-Instruct"
    cal = save_calibration(_fitted("fitted", model))
    for batch in (1, 4):
        plan = recommend_with_defaults(build_request(model=model, gpu="cpu", task="code", batch_size=batch),
                                       calibration="fitted")
        measured = [EngineConfig(method="none")] + [
            EngineConfig(method=m, gamma=g, draft="/models/draft" if m == "draft_model" else None)
            for m in ("ngram", "draft_model") for g in (1, 2, 3, 4, 6)]
        best = max(predict_with(cal, c, batch).tokens_per_s for c in measured)
        pick = next(c for c in measured if (c.method, c.gamma) == (plan.method, plan.num_speculative_tokens or 0))
        # the fitted model's best, or within the planner's 2% near-tie band (then the smaller γ wins)
        assert predict_with(cal, pick, batch).tokens_per_s >= 0.98 * best
        assert plan.predicted.tpot_ms == pytest.approx(predict_with(cal, pick, batch).tpot_ms, rel=1e-3)
        assert plan.predicted.acceptance_prior_source == "calibration fitted@1 (22 points)"
        assert any("not ranked:" in w and "suffix" in w for w in plan.warnings)
        # memory, not the GPU class, decides (issue 41): no rule of thumb excludes the measured draft model
        assert "draft_model" in {a.method for a in plan.alternatives} | {plan.method}
        ranked = {(a.method, a.num_speculative_tokens) for a in plan.alternatives}
        assert not any(m == "suffix" for m, _ in ranked)  # only measured configurations compete


def test_a_measured_draft_becomes_a_candidate_and_its_gammas_are_the_measured_ones():
    model = "meta-llama/Llama-3.1-8B-Instruct"
    save_calibration(_fitted("drafts", model, gammas=(2, 5)))
    plan = recommend_with_defaults(build_request(model=model, gpu="cpu", task="code", method="draft_model"),
                                   calibration="drafts")
    assert plan.method == "draft_model" and plan.draft == "/models/draft"
    assert plan.num_speculative_tokens in (2, 5)
    assert any("/models/draft (measured, calibration drafts@1" in s.outcome for s in plan.decision_path)


def test_json_of_a_calibrated_plan_carries_the_calibrations_own_range(cli):
    """`recommend --calibration NAME -o json`: the measured pick and its measured alternatives carry a range, P(gain)
    and expected speedup from the calibration's 20 leave-one-configuration-out residuals (10 configurations × 2
    concurrencies), inside the physics bounds; the evidence says where they come from."""
    model = "meta-llama/Llama-3.1-8B-Instruct"
    save_calibration(_fitted("cli-range", model))
    r = cli("recommend", "--model", model, "--gpu", "cpu", "--task", "code", "--batch-size", "4",
            "--calibration", "cli-range", "-o", "json")
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    p = plan["predicted"]
    assert plan["method"] in ("ngram", "draft_model") and p["range_level"] == 0.8
    assert p["speedup_low"] <= p["speedup"] <= p["speedup_high"] <= p["mean_acceptance_length"]
    assert p["range_width"] == pytest.approx(p["speedup_high"] / p["speedup_low"], abs=0.01)
    assert 0.8 <= p["p_gain"] <= 20 / 21 and p["expected_speedup"] > 1
    assert "from 20 leave-one-configuration-out residuals of calibration cli-range@1 (10 configurations" in p["evidence"]
    assert "the 2nd and 19th of 20 sorted" in p["evidence"]
    measured = [a for a in plan["alternatives"] if a["method"] != "none"]
    assert measured and all(a["p_gain"] is not None and a["speedup_low"] <= a["speedup"] <= a["speedup_high"]
                            for a in measured)
