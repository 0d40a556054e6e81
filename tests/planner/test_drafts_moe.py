"""Issue 18: acceptance that depends on the draft, MoE verification that touches more experts, and head
methods ranked by their own published acceptance.

Each property is a function returning its violations (empty = holds), so bench/planner_bench.py prints
the same checks. Nothing is faked: the shipped catalogs, published rows (playbooks/data) and profiles.
"""

from __future__ import annotations

import math
from functools import lru_cache

import pytest

from specops.errors import InputError
from specops.planner import RecommendRequest, recommend
from specops.planner.catalog import generic_model, load_catalogs
from specops.planner.evidence import cross_validate, load_baselines, predict_baseline
from specops.planner.perfmodel import VLLM_PROFILE, DraftSpec, Setup, draft_ms, experts_touched, forward_ms
from specops.planner.priors import DRAFT_REF_RATIO, default_priors


@lru_cache(maxsize=1)
def _residuals():
    return tuple(cross_validate())


def _rows(source_part: str, target_part: str = ""):
    return [r for r in _residuals() if source_part in r.row.source and target_part in r.row.target.lower()]


def bigger_drafts_accept_more() -> list[str]:
    """draft_model α0 rises with the draft's size relative to the target (the published draft-size slope)."""
    pri = default_priors()
    alphas = [pri.lookup("draft_model", task="chat", draft_ratio=r).alpha0 for r in (0.005, DRAFT_REF_RATIO, 0.3)]
    return [] if alphas[0] < alphas[1] < alphas[2] and pri.draft_slope > 0 else [f"α0 by size {alphas}"]


def draft_size_tradeoff_follows_leviathan() -> list[str]:
    """Leviathan et al. Table 2 (T5-XXL, WMT EnDe, T=0): T5-large (800M) accepts more than T5-small (77M)
    (α 0.82 vs 0.75) but is slower (1.7x vs 3.4x). Each row predicted with its own source left out."""
    rows = [r for r in _rows("Leviathan") if r.row.temperature == 0 and r.row.task == "translation"]
    small = next(r for r in rows if r.row.draft_params_b and r.row.draft_params_b < 0.1)
    large = next(r for r in rows if r.row.draft_params_b and r.row.draft_params_b > 0.5)
    bad = []
    if not small.predicted > large.predicted:
        bad.append(f"predicted small {small.predicted:.2f}x <= large {large.predicted:.2f}x (published 3.4 > 1.7)")
    return bad


def draft_cost_matches_published() -> list[str]:
    """A separate draft LM's forward over the target's (Leviathan's c) within e^±0.25 of Liu et al. 2026's
    vLLM figures (37.5% at 8B, 12.5% at 70B; playbooks/data/draft_costs_2026-12.csv), and a deeper draft of
    the same size costs more per token."""
    from specops.planner.evidence import load_draft_costs, predict_draft_cost

    bad = [f"{r.target}: predicted c {predict_draft_cost(r):.3f}, published {r.cost_ratio}"
           for r in load_draft_costs() if abs(math.log(predict_draft_cost(r) / r.cost_ratio)) > 0.25]
    cat = load_catalogs()
    s = Setup(cat.model("llama-3.1-8b-instruct"), cat.gpu("H100"), 1, VLLM_PROFILE)
    shallow, deep = generic_model("d", 1.0), generic_model("d", 1.0).model_copy(update={"layers": 32})
    cost = [draft_ms(s, DraftSpec("draft_model", "d", 1.0, model=m), gamma=3, batch=1, kv_len=1024, kv_dtype="auto")
            for m in (shallow, deep)]
    return bad + ([] if cost[1] > cost[0] else [f"32-layer draft {cost[1]:.2f} ms <= 16-layer {cost[0]:.2f} ms"])


def named_drafts_use_their_own_rows() -> list[str]:
    """A draft that published rows name gets their acceptance, not the method's pool."""
    pri = default_priors()
    own = pri.lookup("eagle3", task="chat", draft="zhuyksir/EAGLE3-Qwen3-30B-A3B-DenseHead")
    pool = pri.lookup("eagle3", task="chat")
    bad = []
    if "published for this draft" not in own.source and "rows name this draft" not in own.source:
        bad.append(f"source {own.source!r}")
    if not own.alpha0 < pool.alpha0:
        bad.append(f"DenseHead α0 {own.alpha0:.2f} not below the EAGLE-3 pool's {pool.alpha0:.2f} (τ 1.86 at γ=3)")
    return bad


def experts_touched_grows_and_saturates() -> list[str]:
    """E·(1−(1−k/E)^n): k at one token, rising with tokens, never above E; 0 for dense models."""
    cat = load_catalogs()
    m = cat.model("qwen3-30b-a3b")
    seq = [experts_touched(m, n) for n in (1, 2, 4, 16, 256, 10_000)]
    bad = []
    if abs(seq[0] - m.experts_per_token) > 1e-9:
        bad.append(f"one token touches {seq[0]}")
    if any(b <= a for a, b in zip(seq[:-2], seq[1:-1], strict=True)) or seq[-1] > m.experts + 1e-9:
        bad.append(f"sequence {seq}")
    if experts_touched(cat.model("llama-3.1-8b-instruct"), 4) != 0:
        bad.append("dense model touches experts")
    return bad


def moe_verification_costs_more_than_dense() -> list[str]:
    """Verifying 4 tokens costs a MoE target relatively more than a dense one of the same active size."""
    cat = load_catalogs()
    gpu = cat.gpu("H100")

    def ratio(model):
        s = Setup(model, gpu, 1, VLLM_PROFILE)
        one = forward_ms(s, batch=1, tokens_per_seq=1, kv_len=1024, kv_dtype="auto")
        return forward_ms(s, batch=1, tokens_per_seq=4, kv_len=1024, kv_dtype="auto") / one

    moe, dense = ratio(generic_model("moe", 30, 3)), ratio(generic_model("dense", 3))
    return [] if moe > dense * 1.2 else [f"verify/base MoE {moe:.2f} vs dense {dense:.2f}"]


def moe_baselines_match_published() -> list[str]:
    """Baseline TPOTs of MoE targets within e^±0.25 of the published ones (rows marked use=yes)."""
    bad = []
    for row in load_baselines():
        if not row.use or row.tpot_ms is None:
            continue
        pred = predict_baseline(row)
        if pred is None or abs(math.log(pred / row.tpot_ms)) > 0.25:
            bad.append(f"{row.target} on {row.gpus}x {row.gpu} ({row.engine}): predicted {pred}, published {row.tpot_ms}")
    return bad


def qwen3_moe_eagle3_slowdown_is_predicted() -> list[str]:
    """SpecForge #339: Qwen3-30B-A3B + EAGLE-3 on 2×H100 (SGLang) is 0.75-0.93x; predicted with the source
    left out, every row below 1.1x (the issue saw 1.45x)."""
    rows = _rows("SpecForge issue #339", "qwen3-30b-a3b")
    return [f"b{r.row.batch}: published {r.row.speedup:.2f}x predicted {r.predicted:.2f}x"
            for r in rows if r.predicted >= 1.1] + ([] if rows else ["no SpecForge rows"])


def qwen3_moe_slowdown_at_published_tau() -> list[str]:
    """The cost half of SpecForge #339 (issue 37): the issue states SGLang's acceptance length for every row (1.99,
    1.86, 2.27); with that τ and the step cost the model predicts with the source held out (τ / predicted speedup),
    every row is within e^±0.25 of its published speedup - the cost model alone is within the band, the acceptance
    half is not (bench/stepcost_bench.py, 'SpecForge #339')."""
    from specops.planner.stepcost import tau_cost_split

    splits = [(r, tau_cost_split(r)) for r in _rows("SpecForge issue #339", "qwen3-30b-a3b")]
    bad = [f"b{r.row.batch}: no published τ" for r, s in splits if s is None]
    bad += [f"b{r.row.batch}: at the published τ {s.published_tau} predicted {s.speedup_at_published_tau:.2f}x, "
            f"published {s.published_speedup:.2f}x" for r, s in splits
            if s is not None and abs(math.log(s.speedup_at_published_tau / s.published_speedup)) > 0.25]
    return bad + ([] if splits else ["no SpecForge rows"])


def moe_step_cost_grows_with_tokens_as_published() -> list[str]:
    """SGLang EAGLE-3 on Qwen3-30B-A3B at batch 1 (SpecForge #339 on TP2, AngelSlim #163 on TP4;
    playbooks/data/moe_spec_steps_2026-12.csv): from the fewest to the most tokens verified (4 to 60/64), the
    published step cost (acceptance length x base / speculative throughput) grows by the factor the model's
    verification + drafting grows, within e^±0.25."""
    from specops.planner.moe_steps import cost_growth, load_spec_steps

    rows = load_spec_steps()
    bad = []
    for src in dict.fromkeys(r.source for r in rows):
        g = cost_growth([r for r in rows if r.source == src and r.batch == 1])
        if g is None or abs(math.log(g[1] / g[0])) > 0.25:
            bad.append(f"{src[:40]}: step cost growth published {g[0]:.2f}x, model {g[1]:.2f}x" if g else src)
    return bad


SPEC_BENCH = "Spec-Bench leaderboard"


def spec_bench_ranks_heads_by_their_own_acceptance() -> list[str]:
    """Spec-Bench (Vicuna-13B, one A100, HF harness, each method's default tree): EAGLE-3 3.02x > EAGLE-2
    2.46x > Medusa 1.80x. The leaderboard states no tree, so each method runs the tree its own authors
    publish for Vicuna-13B (EAGLE-3 Table 1: Medusa's default tree, 60 tokens over 4 levels, one head pass;
    EAGLE-2 depth 6 / 50 tokens; EAGLE-3 depth 8 / 50 tokens) on one A100, with the priors calibrated
    without any Spec-Bench row: the ranking must come out the same, each within e^±0.25 of Spec-Bench."""
    import dataclasses

    from specops.planner.evidence import predict_row
    from specops.planner.priors import calibrate, load_published

    rows = load_published()
    pri, cat = calibrate([r for r in rows if not r.source.startswith(SPEC_BENCH)]), load_catalogs()
    published = {"eagle3": 3.02, "eagle": 2.46, "medusa": 1.80}
    speed = {}
    for r in rows:
        if (r.source.startswith("EAGLE-3 (Li") and r.target == "Vicuna 13B v1.3" and r.task == "chat"
                and r.temperature == 0 and r.batch == 1 and r.method in published and r.structure == "tree"):
            e, _ = predict_row(dataclasses.replace(r, hardware="1x A100 80GB"), pri, cat)
            speed[r.method] = e.speedup
    if set(speed) != set(published):
        return [f"tree rows found for {sorted(speed)}"]
    order = sorted(speed, key=speed.get, reverse=True)
    bad = [] if order == ["eagle3", "eagle", "medusa"] else [
        "predicted order " + " > ".join(f"{m} {speed[m]:.2f}x" for m in order)]
    return bad + [f"{m}: predicted {speed[m]:.2f}x, Spec-Bench {published[m]:.2f}x" for m in published
                  if abs(math.log(speed[m] / published[m])) > 0.25]


def vllm_chains_rank_heads_like_spec_bench() -> list[str]:
    """The same ranking for vLLM chains (recommend with each method pinned, vLLM 0.32 where Medusa runs):
    no published chain row exists for Medusa or EAGLE-2 on any target: their chain α0 comes from their trees, read by
    the trees' size (acceptance_tree)."""
    speed = {}
    for method in ("eagle3", "eagle", "medusa"):
        plan = recommend(RecommendRequest(model="vicuna-13b", gpu="A100-80GB", engine="hf", context_len=512,
                                          method=method, vllm_version="0.32.0", allow_uncertain=True))
        speed[method] = plan.predicted.speedup
    order = sorted(speed, key=speed.get, reverse=True)
    return [] if order == ["eagle3", "eagle", "medusa"] else [
        "predicted order " + " > ".join(f"{m} {speed[m]:.2f}x" for m in order)]


def head_acceptance_ranks_like_spec_bench() -> list[str]:
    """Each head method's own published α0 (tree rows, where all three have them) ranks EAGLE-3 > EAGLE > Medusa."""
    pri = default_priors()
    a = {m: pri.lookup(m, task="chat", structure="tree").alpha0 for m in ("eagle3", "eagle", "medusa")}
    srcs = [pri.lookup(m, task="chat", structure="tree").source for m in a]
    bad = [s for s in srcs if "borrowed" in s]
    return bad + ([] if a["eagle3"] > a["eagle"] > a["medusa"] else [f"tree α0 {a}"])


def medusa_acceptance_is_its_own() -> list[str]:
    pri = default_priors()
    src = pri.lookup("medusa", task="chat").source
    own = src.startswith("published") or (src.startswith("acceptance model") and " medusa rows in all" in src)
    return [] if "borrowed" not in src and own else [src]


PROPERTIES = [bigger_drafts_accept_more, draft_size_tradeoff_follows_leviathan, draft_cost_matches_published,
              named_drafts_use_their_own_rows,
              experts_touched_grows_and_saturates, moe_verification_costs_more_than_dense,
              moe_baselines_match_published, qwen3_moe_eagle3_slowdown_is_predicted, qwen3_moe_slowdown_at_published_tau,
              moe_step_cost_grows_with_tokens_as_published,
              head_acceptance_ranks_like_spec_bench, medusa_acceptance_is_its_own,
              spec_bench_ranks_heads_by_their_own_acceptance, vllm_chains_rank_heads_like_spec_bench]
KNOWN_FAILING = {qwen3_moe_eagle3_slowdown_is_predicted: (
    "acceptance and cost each miss about half (issue 37, 2026-12-03, after the tree-size term; bench/stepcost_bench.py "
    "'SpecForge #339'): held out, the rows are predicted 1.44x (batch 1, 4-token tree), 1.27x (batch 4, chain of 3) "
    "and 1.12x (batch 4, 8-token tree) against 0.93x, 0.79x and 0.75x. The issue states SGLang's acceptance length, "
    "1.99, 1.86 and 2.27; the acceptance model, with no row of this source left, gives τ 2.50, 2.50 and 2.80 (ln "
    "+0.23, +0.30, +0.21). The cost half is ln +0.21, +0.18, +0.19 (the model's step cost 1.74, 1.97, 2.50 against "
    "the 2.14, 2.35, 3.01 the published figures imply), about 0.1 of it the decode step this source's own base rows "
    "find over-priced at batch 1-4. With the published τ the model gives 1.14x, 0.95x, 0.91x "
    "(qwen3_moe_slowdown_at_published_tau). Raising the MoE verification cost is not supported: other MoE sources at "
    "batch 1-4 that state τ (Mixtral, DeepSeek-V3/R1 MTP, Llama-4-Scout n-gram) find the model's cost already too "
    "high (median ln -0.11), and the same target's published step grows less with the tokens verified than the "
    "model's (moe_step_cost_grows_with_tokens_as_published)"),
    moe_step_cost_grows_with_tokens_as_published: (
    "SGLang EAGLE-3 on Qwen3-30B-A3B at batch 1, 4 to 60/64 tokens verified: the published step cost grows 1.71x "
    "(SpecForge #339, TP2) and 1.33x (AngelSlim #163, TP4), the model's 2.86x and 2.39x: its routed-expert reads "
    "grow from 24 to ~122 experts per layer and dominate, while the published 4-token step already costs 2.1-2.6x a "
    "decode step (the model 1.6-1.7x). A fixed cost of a speculative step that the model does not have, and a "
    "gentler growth with tokens; letting tree siblings share experts (same parent context) flattens the model's "
    "growth (1.76x / 1.62x at full sharing) but leaves every row under-priced by ln +0.1 to +0.5, and no SGLang "
    "per-step overhead that other sources support closes the 4-token gap (issue 37, 2026-12-03)")}
# vllm_chains_rank_heads_like_spec_bench holds since trees are priced by their size (acceptance_tree, j38v): Medusa's
# chain α0 is no longer its 63-node tree's τ read as a chain of 4 (predicted EAGLE-3 2.26x > EAGLE 2.06x > Medusa 1.48x)


# a known failure still runs its property (strict: the day it holds, the xfail fails and says so)
@pytest.mark.parametrize("prop", [pytest.param(p, marks=pytest.mark.xfail(
    strict=True, raises=AssertionError, reason=KNOWN_FAILING[p])) if p in KNOWN_FAILING else p
    for p in PROPERTIES], ids=lambda p: p.__name__)
def test_property(prop):
    assert prop() == []


def test_decision_path_names_moe():
    plan = recommend(RecommendRequest(model="Qwen/Qwen3-30B-A3B", gpu="H100", gpus=2, engine="sglang"))
    step = next(s for s in plan.decision_path if s.rule == "model_size")
    assert "MoE target" in step.outcome and "experts" in step.outcome and "3.3B active" in step.input


def test_dense_decision_path_says_nothing_of_moe():
    plan = recommend(RecommendRequest(model="llama-3.1-8b-instruct", gpu="H100"))
    assert "MoE" not in next(s for s in plan.decision_path if s.rule == "model_size").outcome


def test_active_params_make_an_unknown_model_moe():
    cat = load_catalogs()
    m = cat.model("org/unknown-moe", params_b=30, active_params_b=3)
    assert m.is_moe and m.active_b == 3 and "assumed" in m.source
    dense = recommend(RecommendRequest(model="org/unknown", params_b=30, gpu="H100"))
    moe = recommend(RecommendRequest(model="org/unknown", params_b=30, active_params_b=3, gpu="H100"))
    assert moe.predicted.baseline_tpot_ms < dense.predicted.baseline_tpot_ms


@pytest.mark.parametrize("kwargs", [dict(params_b=3, active_params_b=30), dict(active_params_b=3)])
def test_bad_active_params_are_input_errors(kwargs):
    with pytest.raises(InputError):
        load_catalogs().model("org/unknown-moe", **kwargs)


def test_pinned_dense_head_draft_on_qwen3_moe_is_not_a_big_win():
    # 1.12x at γ=1 with SGLang's per-step head cost (head_spec_overhead_ms); 1.25x without it (published 0.72-0.93x)
    plan = recommend(RecommendRequest(model="Qwen/Qwen3-30B-A3B", gpu="H100", gpus=2, engine="sglang",
                                      draft="zhuyksir/EAGLE3-Qwen3-30B-A3B-DenseHead", allow_uncertain=True))
    assert plan.predicted.speedup < 1.2
    src = plan.predicted.acceptance_prior_source
    assert "published for this draft" in src or "rows name this draft" in src
