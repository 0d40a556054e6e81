"""Predictions carry their evidence: every shipped row is cross-validated without its source, and the
plan's range comes from those residuals (how: tests/planner/test_uncertainty.py). Real shipped data and
the real model; nothing is faked."""

from __future__ import annotations

import math

import pytest

from specops.planner import RecommendRequest, recommend
from specops.planner.evidence import batch_range, cross_validate
from specops.planner.priors import load_published


def test_every_shipped_row_with_a_speedup_and_gamma_is_cross_validated_without_its_source():
    rows = load_published()
    res = cross_validate(rows)
    assert len(res) >= 80 and len({r.row.source for r in res}) >= 25
    assert {batch_range(r.row.batch) for r in res} == {"1-2", "3-16", "17-64", "65+"}
    assert all(math.isfinite(r.log_ratio) for r in res)


def _plan(**kw):
    return recommend(RecommendRequest(model="llama-3.1-8b-instruct", gpu="H100", **kw))


def test_a_well_published_case_speculates_with_its_range_and_sources():
    plan = _plan()
    p = plan.predicted
    assert plan.method == "eagle3" and 1.0 <= p.speedup_low <= p.speedup_high and p.evidence_near
    assert "published rows" in p.evidence
    assert plan.decision_path[-1].rule == "evidence" and plan.decision_path[-1].outcome.startswith("keep eagle3")
    assert 0.8 <= p.p_gain <= 1 and p.expected_speedup > 1 and p.range_level == 0.8
    assert p.range_width == pytest.approx(p.speedup_high / p.speedup_low, abs=0.01)
    assert all(a.speedup_low is None or a.speedup_low <= a.speedup_high for a in plan.alternatives)


def test_the_shipped_calibration_is_computed_once():
    from specops.planner.uncertainty import default_calibration

    assert default_calibration() is default_calibration()


def test_the_residuals_are_the_shipped_predictors_with_the_acceptance_model_fitted_without_the_source():
    """The ranges are calibrated on the predictor recommend ships: each fold's priors carry the acceptance model,
    and that model was fitted without the held-out publication's acceptance rows (EAGLE-3 paper: 'eagle3-paper')."""
    from specops.planner.acceptance import load_rows
    from specops.planner.evidence import acceptance_without, fit_priors

    rows = load_published()
    source = next(r.source for r in rows if r.source.startswith("EAGLE-3"))
    priors = fit_priors(rows, exclude_source=source)
    everything = load_rows()
    own = [r for r in everything if r.source_id == "eagle3-paper"]
    assert priors.acceptance is acceptance_without([source]) and len(own) >= 20
    assert priors.acceptance.rows_fitted < acceptance_without([]).rows_fitted
    assert "eagle3-paper" not in priors.acceptance.effects["source"]
    assert "eagle3-paper" in acceptance_without([]).effects["source"]
    nested = fit_priors(rows, exclude_source=source, held_out=[next(r.source for r in rows if r.source.startswith("EAGLE (Li"))])
    assert not {"eagle3-paper", "eagle1-paper"} & set(nested.acceptance.effects["source"])
    prior = priors.lookup("eagle3", task="chat", target="llama-3.1-8b-instruct")
    assert prior.source.startswith("acceptance model") and prior.evidence is not None


def test_a_distilled_dense_student_is_not_read_as_its_moe_teacher():
    """DeepSeek-R1-Distill-LLaMA 8B is a dense Llama; DeepSeek-V3/R1 and Qwen3-30B-A3B are MoE by name."""
    from specops.planner.evidence import looks_moe

    assert not looks_moe("DeepSeek-R1-Distill-LLaMA 8B")
    assert not looks_moe("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B")
    assert all(looks_moe(n) for n in ("DeepSeek V3", "DeepSeek-R1-FP4", "Qwen/Qwen3-30B-A3B", "openai/gpt-oss-120b"))
