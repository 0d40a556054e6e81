"""Ranges, P(gain), expected speedup and the pick rule (specops.planner.uncertainty).

Synthetic residual points where a property needs a residual distribution of known shape (each test
says which); the shipped calibration, catalogs, priors and performance model everywhere else. Nothing
is faked."""

from __future__ import annotations

import math
import re

import pytest

from specops.planner import RecommendRequest, recommend
from specops.planner.acceptance import Z80
from specops.planner.catalog import generic_model
from specops.planner.perfmodel import DraftSpec, Setup, engine_profile, evaluate, head_params, memory_estimate
from specops.planner.uncertainty import (
    CEILING_Z,
    DEFAULT_MIN_P_GAIN,
    Judged,
    RangeCalibration,
    ResidualPoint,
    Stratum,
    assess,
    calibration_rows,
    default_calibration,
    pick,
    source_key,
    stratum_of,
    tau_ceiling,
)

SERVING_HEAD = Stratum("serving", "head", "dense", "1-2")
SERVING_LOOKUP = Stratum("serving", "lookup", "dense", "1-2")


def _points(stratum: Stratum, logs, sources=None, prefix="s") -> list[ResidualPoint]:
    return [ResidualPoint(f"{prefix}{i if sources is None else sources[i]}", x, stratum) for i, x in enumerate(logs)]


def test_a_stratum_with_many_sources_is_mostly_its_own_a_thin_one_mostly_its_parents():
    many = _points(SERVING_HEAD, [0.5] * 40, prefix="head")  # 40 sources, all +0.5
    one = _points(SERVING_LOOKUP, [0.5], prefix="look")       # one source, +0.5
    rest = _points(Stratum("serving", "model", "dense", "1-2"), [-0.5] * 40, prefix="model")
    cal = RangeCalibration(many + one + rest, pool=3)
    own = cal.mixture(SERVING_HEAD)
    thin = cal.mixture(SERVING_LOOKUP)
    assert sum(w for r, w in zip(own.logs, own.weights, strict=True) if r == 0.5) > 0.9
    assert sum(w for r, w in zip(thin.logs, thin.weights, strict=True) if r == 0.5) == pytest.approx(0.25 + 0.75 * 41 / 81)  # 1/(1+3) own, 3/4 its parent's
    assert own.own_sources == 40 and thin.own_sources == 1


def test_a_source_with_many_rows_does_not_outvote_many_sources():
    big = _points(SERVING_HEAD, [1.0] * 30, sources=["big"] * 30)
    small = _points(SERVING_HEAD, [0.0] * 10, prefix="small")
    mix = RangeCalibration(big + small, exponent=1.0).mixture(SERVING_HEAD)
    assert mix.quantile(0.5) == 0.0  # the 30 rows of one source weigh as much as one of the ten others


def test_the_range_is_bounded_by_tau_and_by_the_all_rejected_speedup_and_holds_the_point():
    wild = RangeCalibration(_points(SERVING_HEAD, [-3.0, -2.0, 2.0, 3.0] * 5))
    u = assess(1.8, 2.4, SERVING_HEAD, wild)
    assert u.speedup_high == pytest.approx(2.4) and u.speedup_low == pytest.approx(1.8 / 2.4, abs=1e-3)
    biased = RangeCalibration(_points(SERVING_HEAD, [0.3, 0.4, 0.5] * 5))  # every row published above its prediction
    u = assess(1.5, 3.0, SERVING_HEAD, biased)
    assert u.speedup_low == pytest.approx(1.5) and u.speedup_high > 1.5
    assert u.width == pytest.approx(u.speedup_high / 1.5, abs=1e-3)
    assert u.level == 0.8 and u.expected_speedup > 1.5


def test_the_ceiling_is_the_upper_end_of_taus_own_range_where_the_acceptance_model_states_one(priors):
    wild = RangeCalibration(_points(SERVING_HEAD, [-3.0, -2.0, 2.0, 3.0] * 5))
    u = assess(1.8, 2.4, SERVING_HEAD, wild, tau_high=2.9)
    assert u.speedup_high == pytest.approx(2.9) and u.tau == 2.4 and u.tau_high == 2.9
    assert u.speedup_low == pytest.approx(1.8 / 2.4, abs=1e-3)  # the floor stays at the predicted τ
    assert "τ's 95% bound 2.90 (τ 2.40)" in u.line()
    assert assess(1.8, 2.4, SERVING_HEAD, wild, tau_high=2.0).speedup_high == pytest.approx(2.4)  # never below τ
    prior = priors.lookup("eagle3", task="chat", target="meta-llama/Llama-3.1-8B-Instruct")
    lo, hi = prior.evidence.tau_range(3)
    tau = prior.expected_tokens(3)
    assert lo < tau < hi and tau_ceiling(prior, 3, tau, z=Z80) == pytest.approx(hi)  # z 1.28: the 80% range's end


def test_the_ceiling_is_taus_one_sided_95_percent_bound_above_its_80_percent_range(priors):
    """Until 2026-12-03 the ceiling was the upper end of τ's two-sided 80% range (z 1.2816), so an 80% speedup
    range was trimmed twice; it is now τ's one-sided 95% upper bound (CEILING_Z: the acceptance model's held-out
    95th percentile since 2026-12-07, tests/planner/test_uncertainty_ceiling.py), higher, below τ at the acceptance
    model's largest α."""
    from specops.planner.acceptance import MAX_ALPHA
    from specops.speculation import expected_tokens

    assert CEILING_Z >= 1.645  # at least the normal quantile of a one-sided 95% bound
    prior = priors.lookup("eagle3", task="chat", target="meta-llama/Llama-3.1-8B-Instruct")
    tau, (_, hi80) = prior.expected_tokens(3), prior.evidence.tau_range(3)
    ceiling = tau_ceiling(prior, 3, tau)
    assert hi80 + 0.05 < ceiling < expected_tokens(MAX_ALPHA, 3, prior.evidence.decay, MAX_ALPHA)
    assert tau_ceiling(prior, 3, tau, z=CEILING_Z + 0.3) > ceiling > tau_ceiling(prior, 3, tau, z=Z80)
    measured = type(prior)(prior.alpha0, prior.decay, "measured: 100 samples", (0.8, 0.6, 0.4))
    assert tau_ceiling(measured, 3, 2.8) == 2.8  # no spread known: the predicted τ


def test_p_gain_and_expected_speedup_follow_the_residual_distribution():
    exact = RangeCalibration(_points(SERVING_HEAD, [0.0] * 20))
    assert assess(1.5, 3.0, SERVING_HEAD, exact).p_gain == pytest.approx(1.0)
    assert assess(1.0, 3.0, SERVING_HEAD, exact).p_gain == pytest.approx(0.5, abs=0.01)
    half = RangeCalibration(_points(SERVING_HEAD, [-0.5, 0.2] * 10))  # half the rows published at e^-0.5 of the point
    u = assess(1.3, 3.0, SERVING_HEAD, half)
    assert u.p_gain == pytest.approx(0.5, abs=0.02)  # 1.3·e^-0.5 = 0.79 < 1 < 1.3·e^0.2
    assert u.expected_speedup == pytest.approx(0.5 * 1.3 * (math.exp(-0.5) + math.exp(0.2)), abs=0.01)


def test_pick_falls_through_a_refused_candidate_to_the_next_not_to_none():
    cal = RangeCalibration(_points(SERVING_HEAD, [-1.0, 0.3] * 10, prefix="h") + _points(SERVING_LOOKUP, [0.0] * 40, prefix="l"),
                      pool=1)
    risky = Judged("eagle3", 2.0, assess(2.0, 3.0, SERVING_HEAD, cal))
    safe = Judged("ngram", 1.4, assess(1.4, 1.6, SERVING_LOOKUP, cal))
    chosen, refused = pick([risky, safe], min_p_gain=0.8)
    assert risky.p_gain < 0.8 <= safe.p_gain and chosen is safe and refused == [risky]
    assert pick([risky, safe], min_p_gain=0.0)[0] is risky  # no risk level: the best expected speedup
    assert pick([risky], min_p_gain=0.8)[0] is None


def test_sources_are_one_unit_across_files_and_handed_over_duplicates_are_dropped():
    assert source_key("SpecForge issue #339 (Qwen3-30B-A3B throughput degradation)") == \
        source_key("sgl-project/SpecForge issue #339 ('Throughput degradation on Qwen3-30B-A3B')")
    assert source_key("vLLM PR #16937") != source_key("vLLM issue #20780")
    rows = calibration_rows()
    assert len({r.source for r in rows if source_key(r.source) == "specforge issue #339"}) == 1
    scout = [r for r in rows if "scout" in r.target.lower() and r.method == "ngram" and r.batch == 1]
    assert len(scout) == 1  # TensorRT-LLM blog 7, batch 1: in published_2026-12.csv and in the hand-over
    oss = [r for r in rows if r.target == "openai/gpt-oss-120b"]
    assert {r.batch for r in oss} == {1, 8} and all(r.gamma is None and r.engine == "vllm" for r in oss)


MODELS = ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct", "Qwen/Qwen3-30B-A3B",
          "openai/gpt-oss-120b", "deepseek-ai/DeepSeek-V3", "Qwen/Qwen3-8B")
GPUS = ("H100", "A100-80GB", "L40S", "B200", "MI300X", "RTX4090")


def _drafts(model):
    yield DraftSpec("ngram", None, 0.0)
    yield DraftSpec("eagle3", None, head_params(model, "eagle3") / 1e9, "3")
    arch = generic_model("draft", max(0.1, model.params_b / 16))
    yield DraftSpec("draft_model", "draft", arch.params_b, model=arch)
    if model.mtp_layers:
        yield DraftSpec("mtp", None, head_params(model, "mtp") / 1e9)


def test_no_range_over_the_catalog_grid_leaves_its_physics(catalogs, priors):
    """Every model × GPU × batch × method × γ the shipped model predicts: lower ≤ point ≤ upper ≤ the upper end of
    τ's own 80% range (the acceptance model's) and lower ≥ the all-rejected speedup S/τ, with the shipped
    calibration."""
    cal, checked, bad = default_calibration(), 0, []
    for name in MODELS:
        model = catalogs.model(name)
        for gpu_name in GPUS:
            gpu = catalogs.gpu(gpu_name)
            tp = next((t for t in (1, 2, 4, 8) if memory_estimate(Setup(model, gpu, t, engine_profile("vllm")), None,
                                                                   seq_tokens=4352, kv_dtype="auto").max_batch() >= 1),
                      None)
            if tp is None:
                continue
            setup = Setup(model, gpu, tp, engine_profile("vllm"))
            for draft in _drafts(model):
                prior = priors.lookup(draft.method, task="chat")
                for batch in (1, 4, 16, 64, 256):
                    for gamma in (1, 3, 6):
                        e = evaluate(setup, draft, prior, gamma=gamma, kv_dtype="auto", batch=batch, context_len=4096,
                                     output_len=256)
                        s = stratum_of(engine="vllm", method=draft.method, kind=model.kind(), moe=model.is_moe,
                                       batch=e.effective_batch)
                        u = assess(e.speedup, e.tau, s, cal, tau_high=tau_ceiling(prior, gamma, e.tau))
                        checked += 1
                        if not (e.speedup / e.tau - 1e-9 <= u.speedup_low <= round(e.speedup, 3) <= u.speedup_high
                                <= u.tau_high + 1e-9 <= tau_ceiling(prior, gamma, e.tau) + 2e-3 and 0 <= u.p_gain <= 1):
                            bad.append((name, gpu_name, draft.method, batch, gamma, e.speedup, e.tau, u.speedup_range))
    assert checked > 1000 and not bad, bad[:3]


def test_the_plan_carries_the_numbers_names_the_rule_and_a_strict_bar_refuses_every_candidate():
    plan = recommend(RecommendRequest(model="meta-llama/Llama-3.1-8B-Instruct", gpu="A100-80GB", batch_size=1))
    step = plan.decision_path[-1]
    p = plan.predicted
    assert step.rule == "evidence" and f"P(gain) ≥ {DEFAULT_MIN_P_GAIN:.2f}" in step.input
    assert plan.method != "none" and p.p_gain >= DEFAULT_MIN_P_GAIN and p.expected_speedup > 1
    ceiling = float(re.search(r"τ's 95% bound ([\d.]+)", p.evidence).group(1))  # the range's ceiling, as the line says
    assert p.speedup_low <= p.speedup + 0.005 and p.speedup_high <= ceiling + 0.005
    assert p.mean_acceptance_length < p.acceptance.mean_acceptance_length_high < ceiling  # above τ's 80% range
    assert all(a.p_gain is None or (0 <= a.p_gain <= 1 and a.expected_speedup > 0) for a in plan.alternatives)
    strict = recommend(RecommendRequest(model="meta-llama/Llama-3.1-8B-Instruct", gpu="A100-80GB", min_p_gain=0.999))
    assert strict.method == "none" and "refused (below the bar)" in strict.decision_path[-1].outcome
    assert "--min-p-gain" in strict.decision_path[-1].outcome


def test_a_pinned_method_below_the_bar_is_kept_with_a_warning():
    plan = recommend(RecommendRequest(model="meta-llama/Llama-3.1-8B-Instruct", gpu="H100", batch_size=256,
                                      method="eagle3", min_p_gain=0.99))
    assert plan.method == "eagle3" and any("may be slower than no speculation" in w for w in plan.warnings)
    assert plan.decision_path[-1].outcome.startswith("keep eagle3 (--method pins it")


def test_a_prediction_with_no_published_row_near_it_says_it_extrapolates():
    """No serving-engine row runs a separate draft model on a MoE target: the range leans on coarser strata."""
    plan = recommend(RecommendRequest(model="Qwen/Qwen3-30B-A3B", gpu="H100", method="draft_model"))
    assert plan.predicted.evidence_near is False and "range extrapolates" in plan.predicted.evidence
    assert any(w.startswith("no published row is near draft_model") for w in plan.warnings)


def test_recommend_falls_through_a_refused_method_to_the_next_and_names_both():
    """A calibration (synthetic: every trained-head row published at e^-1 or e^+0.3 of its prediction, every
    lookup and draft-model row exact) under which EAGLE-3's chance of a gain is below the bar: the plan is the
    next method that clears it, and the path names the rule, the refused candidate and its numbers."""
    pts = [ResidualPoint(f"h{i}", -1.0 if i % 2 else 0.3, Stratum("serving", "head", "dense", "1-2")) for i in range(40)]
    pts += [ResidualPoint(f"l{i}", 0.0, Stratum("serving", fam, "dense", "1-2")) for i in range(40) for fam in ("lookup", "model")]
    plan = recommend(RecommendRequest(model="meta-llama/Llama-3.1-8B-Instruct", gpu="A100-80GB"),
                     residuals=RangeCalibration(pts, pool=1))
    step = plan.decision_path[-1]
    assert plan.method in ("ngram", "draft_model", "suffix") and plan.predicted.p_gain >= DEFAULT_MIN_P_GAIN
    assert "over the best by point, eagle3" in step.outcome and "does not qualify: P(gain) 0." in step.outcome
    assert "refused (below the bar): eagle3" in step.outcome
