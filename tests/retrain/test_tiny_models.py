"""The real distillation on the committed tiny models: target-v2 (target-v1 fine-tuned on prose) makes
draft-v1 stale; the local backend distils a new draft from target-v2's own greedy continuations and
its held-out acceptance recovers by a clear margin. CPU: ≈1-2 min on an idle 2-core machine."""

from __future__ import annotations

import pytest

from specops.retrain.driver import retrain
from specops.retrain.prompts import write_prompts
from tests.retrain.conftest import register_stale_case
from tests.retrain.minimodels import prose_prompts

# Fewer prompts/steps than the reference recipe (48 prompts x 64 tokens, 300 steps), same method.
PARAMS = {"steps": 150, "threads": 1, "max_new_tokens": 48, "batch_size": 16, "lr": 2e-3}


@pytest.mark.slow
def test_local_distillation_restores_acceptance_of_the_stale_tiny_draft(tiny_models, tmp_path):
    from specops.registry import open_registry

    with open_registry() as reg:
        register_stale_case(reg, tiny_models["target-v1"], tiny_models["draft-v1"], tiny_models["target-v2"])
        prompts = prose_prompts(32, offset=1000, stride=600) + prose_prompts(8, offset=21000, stride=1400)
        data = write_prompts(prompts, tmp_path / "prompts.jsonl")
        out = retrain("chat", data=data, registry=reg, params=PARAMS, heldout=8, min_gain=0.15,
                      reason="acceptance drop after target-v2")
        c = out.comparison
        print(f"tiny models, held-out prose: stale draft-v1 {c.incumbent_acceptance.acceptance_rate:.3f} -> "
              f"distilled {c.candidate_acceptance.acceptance_rate:.3f}; per position "
              f"{c.candidate_acceptance.per_position}; {out.result.metrics}")
        assert c.candidate_acceptance.acceptance_rate >= c.incumbent_acceptance.acceptance_rate + 0.15
        assert out.decision.action == "promote"
        assert reg.get_draft(out.draft).target == "tiny@v2"
        assert reg.check_lineage("tiny@v2", out.draft).ok and not reg.check_lineage("tiny@v2", "tiny-draft@v1").ok
