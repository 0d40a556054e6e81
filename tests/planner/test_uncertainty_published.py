"""Published runs of (nearly) the requested configuration as evidence (specops.planner.published_runs, issue 38).

The shipped calibration, catalogs, priors and performance model, and the published row vLLM PR #32887 measured
(gpt-oss-120b + EAGLE-3 on one B200 at batch 8: 1.25x, playbooks/data/heldout_2026-12.csv); synthetic residual
points only where a property needs a run of known size (each test says which). Nothing is faked."""

from __future__ import annotations

import math

import pytest

from specops.planner import RecommendRequest, recommend
from specops.planner.published_runs import query_for
from specops.planner.uncertainty import RangeCalibration, ResidualPoint, Stratum, assess, default_calibration

REQUEST = RecommendRequest(model="openai/gpt-oss-120b", gpu="B200", batch_size=8)
PR = "32887"


def _evidence_step(plan):
    return next(s for s in plan.decision_path if s.rule == "evidence")


def test_a_published_gain_of_this_very_configuration_is_picked_in_sample_and_named():
    """In-sample (the shipped calibration holds vLLM PR #32887's row): the measured 1.25x lifts eagle3 over the bar
    the model alone refuses it at, and the path and the JSON name the run."""
    plan = recommend(REQUEST)
    assert plan.method == "eagle3"
    step = _evidence_step(plan).outcome
    assert f"PR #{PR}" in step and "published: eagle3 1.25x at batch 8 on B200" in step
    rows = plan.predicted.evidence_rows
    assert rows and any(PR in r for r in rows)
    ev = plan.predicted
    assert ev.p_gain >= 0.80 and ev.expected_speedup > 1.0


def test_with_its_source_held_out_the_prediction_is_the_models_and_says_so():
    """The same request with PR #32887's rows left out of the calibration: no other source measured this target on
    a B200, so the figures are the model's alone and the path says no published run is near."""
    full = default_calibration()
    held = RangeCalibration([p for p in full.points if PR not in p.source])
    plan = recommend(REQUEST, residuals=held)
    assert plan.predicted.evidence_rows in ([], None)
    step = _evidence_step(plan).outcome
    assert PR not in step
    assert "no published run near this configuration" in step


SERVING_HEAD_MOE = Stratum("serving", "head", "moe", "3-16")


def _background(n: int = 30) -> list[ResidualPoint]:
    """Synthetic: 30 sources of other targets with residuals spread ±0.3 around 0 (no run of the test's target)."""
    return [ResidualPoint(f"bg{i}", (i % 7 - 3) * 0.1, SERVING_HEAD_MOE, speedup=1.5, tau=2.0, method="eagle3",
                          target="other-model", gpu="H100", batch=8, batch_known=True, published=1.5)
            for i in range(n)]


def _run(source: str, published: float, *, batch: int = 8, gpu: str = "B200") -> ResidualPoint:
    """Synthetic: a run the model (its source held out) predicted at 1.1x, published at ``published``."""
    return ResidualPoint(source, math.log(published / 1.1), SERVING_HEAD_MOE, speedup=1.1, tau=2.0, method="eagle3",
                         target="openai/gpt-oss-120b", gpu=gpu, batch=batch, batch_known=True, published=published,
                         cite_full=f"{source} (synthetic)")


QUERY = query_for(names=["openai/gpt-oss-120b", "gpt-oss-120b"], method="eagle3", gpu="B200", engine="serving",
                  batch=8)


def test_the_update_moves_toward_the_runs_more_the_more_sources_and_never_past_the_ceiling():
    """Synthetic runs (a point prediction of 1.1x, runs at 1.6x, τ 1.7 with a ceiling of 1.8): one source moves the
    expected speedup up, three move it further; a run far above τ pulls the range up to the ceiling and no further."""
    alone = assess(1.1, 1.7, SERVING_HEAD_MOE, RangeCalibration(_background()), tau_high=1.8, method="eagle3",
                   query=QUERY)
    assert alone.evidence_rows == [] and "no published run near this configuration" in alone.line()
    one = assess(1.1, 1.7, SERVING_HEAD_MOE, RangeCalibration(_background() + [_run("a", 1.6)]), tau_high=1.8,
                 method="eagle3", query=QUERY)
    three = assess(1.1, 1.7, SERVING_HEAD_MOE,
                   RangeCalibration(_background() + [_run(s, 1.6) for s in "abc"]), tau_high=1.8, method="eagle3",
                   query=QUERY)
    assert alone.expected_speedup < one.expected_speedup < three.expected_speedup <= 1.6 + 1e-9
    assert alone.p_gain < one.p_gain <= three.p_gain
    assert alone.model_p_gain is None and one.model_p_gain is not None and one.model_p_gain < one.p_gain
    assert "published: eagle3 1.60x at batch 8 on B200" in one.line()
    far = assess(1.1, 1.7, SERVING_HEAD_MOE, RangeCalibration(_background() + [_run(s, 5.0) for s in "abcdef"]),
                 tau_high=1.8, method="eagle3", query=QUERY)
    assert far.speedup_high <= far.tau_high + 1e-9 and far.expected_speedup <= far.tau_high + 1e-9
    assert far.speedup_high == pytest.approx(1.8, abs=2e-3)  # pulled to the ceiling, not past it


def test_a_run_on_another_gpu_class_another_method_or_a_far_batch_is_not_near():
    """Synthetic runs that differ in one respect each: none moves the prediction."""
    far_batch = _run("a", 1.6, batch=64)
    other_gpu = _run("b", 1.6, gpu="A100-80GB")
    other_method = ResidualPoint("c", 0.0, SERVING_HEAD_MOE, speedup=1.6, tau=2.0, method="mtp",
                                 target="openai/gpt-oss-120b", gpu="B200", batch=8, batch_known=True, published=1.6)
    u = assess(1.1, 1.7, SERVING_HEAD_MOE, RangeCalibration(_background() + [far_batch, other_gpu, other_method]),
               tau_high=1.8, method="eagle3", query=QUERY)
    assert u.evidence_rows == []


def test_a_run_at_another_batch_moves_the_prediction_by_the_models_error_there_not_by_its_speedup():
    """Synthetic: a run at batch 32 published 1.6x where the model (its source held out) also predicted 1.6x - the
    model was right there. A request at batch 8 predicted at 1.1x is not pulled toward 1.6x (the speedup changes with
    batch; the model's error is what carries over): its expected speedup moves less than 2%, and its range narrows."""
    exact = ResidualPoint("a", 0.0, SERVING_HEAD_MOE, speedup=1.6, tau=2.0, method="eagle3", target="openai/gpt-oss-120b",
                          gpu="B200", batch=32, batch_known=True, published=1.6)
    alone = assess(1.1, 1.7, SERVING_HEAD_MOE, RangeCalibration(_background()), tau_high=1.8, method="eagle3",
                   query=QUERY)
    moved = assess(1.1, 1.7, SERVING_HEAD_MOE, RangeCalibration(_background() + [exact]), tau_high=1.8,
                   method="eagle3", query=QUERY)
    assert moved.evidence_rows and "batch 32" in moved.evidence_rows[0]
    assert abs(math.log(moved.expected_speedup / alone.expected_speedup)) < 0.02
    assert moved.width < alone.width


# --- the replication floor (specops.planner.replications) -------------------------------------------------------------

def test_one_authors_repeat_is_not_a_replication():
    """The shipped rows: vLLM issue #20780 and PR #16937 are one author's runs of Llama-3.1-8B + EAGLE on an H100 at
    batch 1. Kept apart they form a "pair" that agrees to 0.04 in ln; merged (the estimate's default) they are one
    source, and that configuration has no independent pair at the strict key."""
    from specops.planner import replications as rp

    rows = rp.replication_rows()
    eagle1 = ("llama-3.1-8b", "eagle", "1x H100", "serving", 1, False)
    apart = {c.key: c for c in rp.replications(rows, independent=False)}
    assert eagle1 in apart and {"vllm issue #20780", "vllm pr #16937"} <= set(apart[eagle1].means)
    assert max(d for _, _, d in apart[eagle1].pairs()) < 0.05
    merged = {c.key for c in rp.replications(rows)}
    assert eagle1 not in merged


def test_published_spellings_of_one_target_pair_up():
    """A paper's, an issue's and a hub id's names of one model, and a quantization suffix, give one target."""
    from specops.planner.replications import canonical_target

    names = ["meta-llama/Llama-3.1-8B-Instruct", "LLaMA-Instruct 3.1 8B", "llama3.1-8b", "Llama-3.1-8B-Instruct-FP8"]
    assert {canonical_target(n) for n in names} == {"llama-3.1-8b"}
    assert canonical_target("DeepSeek-R1 (FP4)") == canonical_target("deepseek-r1-fp4") == "deepseek-r1"
    assert canonical_target("Qwen3-8B") != canonical_target("Qwen3-30B-A3B")


def test_sigma_rep_pools_configurations_and_the_floor_is_the_normal_80_percent_range():
    """Synthetic source means (no rows): two configurations whose sources differ by 0.2 and 0.4 in ln pool to
    σ² = (0.2²/2 + 0.4²/2) / 2; three sources at 0, 0.3, 0.6 give their sample variance 0.09. The floor of an 80%
    range for σ = 0.184 is 1.60 (the issue's figure)."""
    from specops.planner.replications import Replication, bootstrap, sigma_rep, width_floor

    def rep(*vals):
        return Replication(("t", "m", "g", "serving", 1, False), {f"s{i}": v for i, v in enumerate(vals)},
                           {f"s{i}": frozenset({"chat"}) for i in range(len(vals))})

    assert sigma_rep([rep(0.0, 0.2), rep(1.0, 1.4)]) == pytest.approx(math.sqrt((0.02 + 0.08) / 2))
    assert sigma_rep([rep(0.0, 0.3, 0.6)]) == pytest.approx(0.3)
    assert sigma_rep([]) is None and bootstrap([]) is None
    lo, hi = bootstrap([rep(0.0, 0.2), rep(1.0, 1.4)])
    assert lo == pytest.approx(math.sqrt(0.02)) and hi == pytest.approx(math.sqrt(0.08))
    assert width_floor(0.184) == pytest.approx(1.60, abs=0.005)


def test_the_shipped_between_source_sd_is_the_measured_replication_spread():
    """BETWEEN_SOURCE_SD is σ_rep of independent organisations' serving runs of one configuration (the any-gpu key,
    6 configurations of the shipped rows): within 0.01 of it and inside its bootstrap 80% interval. One protocol on
    independent machines (the community table at the strict key) disagrees less, so the shipped noise is above it.
    (It was 0.20, from two strict pairs, one of them a single author's repeat.)"""
    from specops.planner import replications as rp
    from specops.planner.published_runs import BETWEEN_SOURCE_SD

    rows = rp.replication_rows()
    serving = [c for c in rp.replications(rows, level="any-gpu") if c.engine == "serving"]
    assert len(serving) >= 5
    assert abs(rp.serving_sigma(rows) - BETWEEN_SOURCE_SD) <= 0.01
    lo, hi = rp.bootstrap(serving)
    assert lo <= BETWEEN_SOURCE_SD <= hi
    assert rp.sigma_rep(rp.replications(rows, level="strict")) < BETWEEN_SOURCE_SD


def test_community_contributors_on_one_card_are_one_configuration():
    """The Qwen3.8-27B MTP community table: nine contributors on one RTX 5090 (a card the catalog does not hold) are
    one strict configuration with nine sources; two cards in tensor split are another configuration than one."""
    from specops.planner import replications as rp

    assert (rp.gpu_name("1x RTX 5090 32GB"), rp.gpu_count("1x RTX 5090 32GB")) == ("RTX 5090", 1)
    assert (rp.gpu_name("2x RTX 5060 Ti 16GB (tensor split)"), rp.gpu_count("2x RTX 5060 Ti 16GB")) == ("RTX 5060 TI", 2)
    assert rp.gpu_name("8x H200 (TP8)") == "H200" and rp.gpu_name("not stated") == ""
    configs = {c.key: c for c in rp.replications(rp.replication_rows())}
    rtx5090 = configs[("qwen-3.8-27b", "mtp", "1x RTX 5090", "native", 1, False)]  # llama.cpp: a native runtime
    assert len(rtx5090.means) == 9 and all("community table @" in s for s in rtx5090.means)


def test_every_replication_row_cites_where_its_number_stands():
    """playbooks/data/replications_2026-12.csv and the community table's rows: each names its source, a URL and the
    place in it, and a speedup."""
    import csv

    from specops.planner.replications import COMMUNITY_FILE, REPLICATIONS_FILE
    from specops.playbooks import playbook_path

    rows = []
    for name in (REPLICATIONS_FILE, COMMUNITY_FILE):
        with open(playbook_path("data", name), newline="", encoding="utf-8") as f:
            rows += list(csv.DictReader(f))
    assert rows
    for r in rows:
        assert r["source"] and r["url"].startswith("https://") and r["location"], r
        assert float(r["speedup"]) > 0


def test_one_authors_two_sources_are_one_observation_in_the_update():
    """vLLM issue #20780 and PR #16937 are one author's runs of one setup: two runs of theirs move the prediction as
    one source does (their mean, one noise), not as two independent sources, which would shrink the range twice."""
    from specops.planner.published_runs import Run, update

    logs, weights = [-0.3, 0.0, 0.3], [1.0, 1.0, 1.0]
    a = Run("vllm issue #20780", 1.6, 0.20, 1, "H100", "eagle3", 0.24, "vllm issue #20780")
    b = Run("vllm pr #16937", 1.6, 0.20, 1, "H100", "eagle3", 0.24, "vllm PR #16937")
    other = Run("eagle-3", 1.6, 0.20, 1, "H100", "eagle3", 0.24, "EAGLE-3")
    assert update(logs, weights, [a, b]) == pytest.approx(update(logs, weights, [a]))
    assert update(logs, weights, [a, other])[2] < update(logs, weights, [a])[2]  # a second author narrows it
