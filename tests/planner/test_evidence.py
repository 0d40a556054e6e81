"""Predictions carry their evidence: the range from cross-validated residuals of similar published
rows (playbooks/data), the warning when none is near, and no speculation when the lower end is below 1.
Real shipped data and the real model; nothing is faked."""

from __future__ import annotations

import math

import pytest

from specops.planner import RecommendRequest, recommend
from specops.planner.evidence import Residual, batch_range, cross_validate, default_residuals, interval
from specops.planner.priors import load_published, parse_row


def _residual(method: str, batch: int, log_ratio: float, engine: str = "vllm") -> Residual:
    row = parse_row({"source": f"src-{method}-{batch}-{log_ratio}", "location": "t", "target_model": "Llama-3.1-8B",
                     "params_b": "8", "method": method, "gamma_or_tree": "k=3", "task": "chat", "temperature": "0",
                     "batch_size": str(batch), "hardware": "1x H100", "tau": "", "acceptance_rate": "",
                     "speedup": "1.5", "notes": f"engine={engine}"})
    return Residual(row, 1.5 / math.exp(log_ratio), log_ratio, "hopper+", False)


def test_the_range_comes_from_the_most_similar_rows_and_relaxes_when_there_are_too_few():
    res = [_residual("eagle3", 1, x) for x in (-0.1, 0.0, 0.1)] + [_residual("eagle3", 64, x) for x in (-0.6, -0.5)]
    near = interval(2.0, method="eagle3", batch=1, gpu="H100", moe=False, residuals=res)
    assert near.near and near.rows == 3 and near.matched_on.startswith("method, batch range, dense/MoE and GPU class")
    assert near.speedup_low == pytest.approx(2.0 * math.exp(-0.2), rel=1e-3)
    far = interval(2.0, method="eagle3", batch=64, gpu="H100", moe=False, residuals=res)  # 2 rows at batch 64
    assert not far.near and far.matched_on.startswith("method") and far.rows == 5
    assert "no published row is near" in far.line()


def test_serving_engine_rows_are_preferred_over_paper_harnesses():
    res = [_residual("eagle3", 1, x, "hf") for x in (0.9, 1.0, 1.1)] + \
          [_residual("eagle3", 1, x, "sglang") for x in (-0.05, 0.0, 0.05)]
    ev = interval(2.0, method="eagle3", batch=1, gpu="H100", moe=False, residuals=res)
    assert "(serving engines)" in ev.matched_on and ev.speedup_high < 2.5


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
    assert all(a.speedup_low is None or a.speedup_low <= a.speedup_high for a in plan.alternatives)


def test_at_high_batch_a_range_below_1_means_no_speculation_unless_allowed():
    plan = _plan(batch_size=256)  # no eagle3 row of a serving engine above batch 64: the range extrapolates
    assert plan.method == "none" and plan.num_speculative_tokens is None
    step = plan.decision_path[-1]
    assert step.rule == "evidence" and "below 1" in step.outcome and "--allow-uncertain" in step.outcome
    allowed = _plan(batch_size=256, allow_uncertain=True)
    assert allowed.method != "none" and allowed.predicted.speedup_low < 1
    assert any("may be slower than no speculation" in w for w in allowed.warnings)


def test_shipped_residuals_are_computed_once():
    assert default_residuals() is default_residuals()
