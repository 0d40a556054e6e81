"""The seeds' cases, each pinned: the recommender must come out as a careful engineer expects."""

from specops.planner import RecommendRequest, recommend


def plan_for(catalogs, priors, **kw):
    return recommend(RecommendRequest(**kw), catalogs=catalogs, priors=priors)


def test_70b_on_four_a100_with_30ms_target_for_code_picks_eagle3_with_gamma_5_to_8(catalogs, priors):
    plan = plan_for(catalogs, priors, model="meta-llama/Llama-3.3-70B-Instruct", gpu="A100-80GB", gpus=4,
                    tpot_ms=30, task="code")
    assert plan.method == "eagle3"
    assert 5 <= plan.num_speculative_tokens <= 8
    assert plan.predicted.meets_tpot_target is True
    assert "--tensor-parallel-size" in plan.vllm.argv
    assert plan.vllm.speculative_config["method"] == "eagle3"


def test_8b_on_h100_gamma_shrinks_as_batch_grows(catalogs, priors):
    gammas = []
    for batch in (1, 8, 16):
        plan = plan_for(catalogs, priors, model="llama-3.1-8b-instruct", gpu="H100", batch_size=batch, context_len=256,
                        output_len=256)
        gammas.append(plan.predicted.num_speculative_tokens_at_batch)
    big = plan_for(catalogs, priors, model="llama-3.1-8b-instruct", gpu="H100", batch_size=128, context_len=256,
                   output_len=256)
    gammas.append(big.predicted.num_speculative_tokens_at_batch)
    assert gammas == sorted(gammas, reverse=True)
    assert gammas[-1] < gammas[0]


def test_8b_on_a100_schedule_turns_speculation_off_where_verification_is_compute_bound(catalogs, priors):
    plan = plan_for(catalogs, priors, model="llama-3.1-8b-instruct", gpu="A100-80GB", batch_size=64, context_len=256,
                    output_len=256, allow_uncertain=True)  # the schedule's shape, whatever the evidence says
    schedule = plan.num_speculative_tokens_per_batch_size
    assert schedule is not None and schedule[0][0] == 1
    ks = [k for _, _, k in schedule]
    assert ks == sorted(ks, reverse=True)
    at_512 = next(k for lo, hi, k in schedule if lo <= 512 <= hi)
    assert at_512 == 0
    assert plan.num_speculative_tokens == max(ks)
    assert plan.vllm.speculative_config["num_speculative_tokens_per_batch_size"] == [list(r) for r in schedule]


def test_8b_on_h100_ships_no_schedule_whose_own_cost_outweighs_its_gain(catalogs, priors):
    """On an H100 one γ stays above 1 far enough that the schedule's cost (vllm#49548: every step slower,
    K=0 ranges included) is not worth its K=0 ranges: no schedule, and the path says why."""
    plan = plan_for(catalogs, priors, model="llama-3.1-8b-instruct", gpu="H100", batch_size=64, context_len=256,
                    output_len=256, allow_uncertain=True)
    assert plan.method == "eagle3" and plan.num_speculative_tokens_per_batch_size is None
    step = next(s for s in plan.decision_path if s.rule == "cost_model")
    assert "no schedule" in step.outcome and "vllm#49548" in step.outcome
    assert "num_speculative_tokens_per_batch_size" not in plan.vllm.speculative_config


def test_8b_on_h100_at_batch_512_short_context_does_not_speculate(catalogs, priors):
    plan = plan_for(catalogs, priors, model="llama-3.1-8b-instruct", gpu="H100", batch_size=512, context_len=256,
                    output_len=256)
    assert plan.method == "none"
    assert "--speculative-config" not in plan.vllm.argv


def test_100k_context_on_a_model_without_mtp_has_no_eagle_or_draft_model(catalogs, priors):
    plan = plan_for(catalogs, priors, model="llama-3.1-8b-instruct", gpu="H100", context_len=100_000)
    assert plan.method in ("none", "ngram", "suffix")
    assert all(a.method not in ("eagle3", "eagle", "draft_model") for a in plan.alternatives)
    step = next(s for s in plan.decision_path if s.rule == "context_length")
    assert "over 64K" in step.outcome


def test_temperature_above_one_means_off_or_gamma_at_most_3(catalogs, priors):
    plan = plan_for(catalogs, priors, model="llama-3.1-8b-instruct", gpu="H100", temperature=1.3)
    assert plan.method == "none" or plan.num_speculative_tokens <= 3
    assert all((a.num_speculative_tokens or 0) <= 3 for a in plan.alternatives)


def test_on_a_16gb_gpu_memory_not_the_gpu_class_decides_which_drafts_compete(catalogs, priors):
    # issue 41: an AWQ 8B target (4 GiB) and a 1.5 GB EAGLE-3 head fit a 16 GB T4, so EAGLE-3 is ranked
    plan = plan_for(catalogs, priors, model="llama-3.1-8b-instruct", gpu="T4", quantization="awq")
    ranked = {plan.method} | {a.method for a in plan.alternatives}
    assert "eagle3" in ranked
    step = next(s for s in plan.decision_path if s.rule == "hardware")
    assert "memory check" in step.outcome
    pinned = plan_for(catalogs, priors, model="llama-3.1-8b-instruct", gpu="T4", quantization="awq", method="eagle3")
    assert pinned.memory.fits and pinned.memory.draft_gib > 0


def test_changing_an_acceptance_prior_changes_the_chosen_gamma(catalogs, priors):
    kw = dict(model="llama-3.1-8b-instruct", gpu="H100", task="chat", method="eagle3")
    low = plan_for(catalogs, priors.override("eagle3", "chat", 0.55), **kw)
    high = plan_for(catalogs, priors.override("eagle3", "chat", 0.92), **kw)
    assert high.num_speculative_tokens > low.num_speculative_tokens
    assert "override" in high.predicted.acceptance_prior_source
    assert high.predicted.alpha > low.predicted.alpha


def test_a_higher_prior_can_flip_the_method_without_pinning(catalogs, priors):
    kw = dict(model="llama-3.1-8b-instruct", gpu="H100", task="chat")
    weak = plan_for(catalogs, priors.override("eagle3", "chat", 0.3), **kw)
    strong = plan_for(catalogs, priors.override("eagle3", "chat", 0.9), **kw)
    assert weak.method != "eagle3"
    assert strong.method == "eagle3"
