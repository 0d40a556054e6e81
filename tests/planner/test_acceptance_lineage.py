"""Draft models that are released siblings of their target (the ``lineage`` effect, planner/acceptance_fit.py).

Issues 37/38: the draft-model runs at scale (Llama-3.1-70B/405B with Llama-3.2-1B/3B and 3.1-8B drafts, AMD's vLLM
blog and NVIDIA's TensorRT-LLM blog) publish speedups that prove τ above what the model gave them, because it learned
draft-model acceptance from old pairs (T5-small, Vicuna-68M, LaMDA). Every figure here is held out: the AMD and
NVIDIA rows publish only a speedup (``lower-bound-only``, never fitted), and the sibling rows that are fitted are
predicted with their own source left out. Nothing is faked: the shipped table and the real fit.
"""

from __future__ import annotations

import math

import pytest

from specops.planner import acceptance as acc


@pytest.fixture(scope="module")
def rows():
    return acc.load_rows()


def test_a_released_sibling_is_told_apart_from_old_and_distilled_drafts():
    sib = ("draft_model", "sibling")
    assert acc.lineage_key("draft_model", "meta-llama/Llama-3.2-1B-Instruct", "llama3", 1.24) == sib
    assert acc.lineage_key("draft_model", "Qwen/Qwen3-0.6B", "qwen3", None) == sib  # size read from the name
    assert acc.lineage_key("draft_model", "double7/vicuna-68m", "llama2", 0.068) is None  # a distilled toy draft
    assert acc.lineage_key("draft_model", "T5-small 77M", "t5", 0.077) is None
    assert acc.lineage_key("draft_model", "LaMDA 8B", "", 8.0) is None  # no family the data names
    assert acc.lineage_key("draft_model", "Qwen/Qwen2.5-0.5B-Instruct", "llama3", 0.5) is None  # another family
    assert acc.lineage_key("eagle3", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "llama3", 0.85) is None


def test_sibling_rows_are_predicted_with_their_own_source_held_out(rows):
    """A607 (vllm-qaic: Llama-3.1-8B-Instruct with Llama-3.2-1B-Instruct, γ=3, accepted/drafted 0.63, τ 2.89) and A073
    (llama.cpp #5877: the same pair at γ=5, τ 4.6), each predicted by a fit without its source. Without the lineage
    effect they were 2.53 and 2.70 (|ln| 0.13 and 0.53)."""
    scored = {s.row.id: s for s in acc.cross_validate(rows) if s.predicted}
    assert abs(scored["A607"].log_error) < 0.05, scored["A607"]
    assert scored["A073"].log_error < 0.45, scored["A073"]  # still under-predicted: llama.cpp's rate is per drafted token


def test_draft_models_at_scale_are_no_longer_predicted_far_below_what_their_speedup_proves(rows):
    """A speedup S at γ=5 proves τ ≥ S (a verification costs at least one target step). These rows are never fitted,
    so the shipped fit predicts them held out. On main: AMD 70B/1B 2.57 (S 2.31, the cost half needs τ 3.5), NVIDIA
    405B/3B 2.54 (S 3.61); main's code on this table (row A607 names the 1B draft): 2.81 and 2.58."""
    model = acc.fit(rows)
    pred = {r.id: tau for r, tau in acc.lower_bounds(model, rows)}
    assert pred["A279"] > 2.9  # AMD 70B + Llama-3.2-1B-Instruct
    assert pred["A287"] > 2.9  # NVIDIA 405B + Llama-3.2-3B-Instruct
    assert all(pred[i] >= 2.6 for i in ("A279", "A280", "A281", "A282", "A283", "A284", "A286", "A287", "A288"))


def test_a_request_naming_a_sibling_draft_gets_the_effect_and_the_old_pairs_do_not(rows):
    """The request path (estimate: what recommend prices) applies the same key as the fit."""
    model = acc.fit(rows)
    target = "meta-llama/Llama-3.1-70B-Instruct"
    sib = acc.estimate(model, "draft_model", task="chat", draft="meta-llama/Llama-3.2-1B-Instruct", target=target,
                       draft_ratio=1.24 / 70)
    unnamed = acc.estimate(model, "draft_model", task="chat", target=target, draft_ratio=1.24 / 70)
    assert sib.tau(5) - unnamed.tau(5) > 0.25
    assert math.isclose(model.effects["lineage"][("draft_model", "sibling")], sib_effect(model), rel_tol=1e-9)
    old = acc.estimate(model, "draft_model", task="chat", draft="double7/vicuna-68m", target="lmsys/vicuna-13b-v1.3",
                       draft_ratio=0.068 / 13)
    old_unnamed = acc.estimate(model, "draft_model", task="chat", target="lmsys/vicuna-13b-v1.3", draft_ratio=0.068 / 13)
    assert old.tau(5) - old_unnamed.tau(5) < 0.25  # only its own rows' source effects, no lineage


def sib_effect(model: acc.AcceptanceModel) -> float:
    """The fitted lineage effect, read back through a request's logit (the effect is the only key that differs)."""
    keys = {"method": "draft_model", "lineage": ("draft_model", "sibling")}
    return model.logit(keys, {}) - model.logit({"method": "draft_model"}, {})
