"""The catalog's NVFP4 checkpoints launch themselves; what has none is predicted at its precision with the launch
withheld (planner.recommend.resolve, planner.render); every missing artifact is named at once."""

import pytest

from specops.errors import CheckpointMissing, FitError, InputError
from specops.planner.catalog import QUANT_BITS
from specops.planner.recommend import recommend, resolve
from specops.planner.render import to_deployment
from specops.planner.types import RecommendRequest


def _fitting(catalogs, priors, **kw):
    for gpus in (1, 2, 4, 8):
        try:
            return recommend(RecommendRequest(gpus=gpus, **kw), catalogs=catalogs, priors=priors)
        except (FitError, InputError):  # too few GPUs for the weights, or heads that do not split
            continue
    raise AssertionError(f"no GPU count of 8 or fewer serves {kw}")


def test_every_nvfp4_checkpoint_of_the_catalog_is_launched_at_its_bits(catalogs, priors):
    ckpts = [(m, c) for m in catalogs.models for c in m.checkpoints if c.quantization == "nvfp4"]
    assert len(ckpts) >= 5
    for model, ckpt in ckpts:
        assert "NVFP4" in ckpt.source and "@" in ckpt.source  # where it is read from, at which commit
        plan = _fitting(catalogs, priors, model=model.id, gpu="B200", quantization="nvfp4", method="none")
        assert plan.model == ckpt.id and plan.vllm.argv[2] == ckpt.id and not plan.vllm.withheld
        bits = plan.memory.weights_gib * 2 ** 30 * 8 / (model.params_b * 1e9)
        assert bits == pytest.approx(QUANT_BITS["nvfp4"], rel=0.05)


def test_resolve_refuses_a_missing_checkpoint_unless_asked_to_withhold(catalogs):
    from specops.planner.perfmodel import engine_profile

    req = RecommendRequest(model="deepseek-ai/DeepSeek-V3", gpu="B200", gpus=8, quantization="nvfp4")
    with pytest.raises(CheckpointMissing):  # what other callers (fit advice, evidence) rely on
        resolve(req, catalogs, engine_profile("vllm"))
    withheld: list = []
    model, _, _ = resolve(req, catalogs, engine_profile("vllm"), withheld)
    assert model.id == "deepseek-ai/DeepSeek-V3" and model.weight_bits == QUANT_BITS["nvfp4"]
    assert "no nvfp4 checkpoint known" in model.source and [w.artifact for w in withheld] == ["checkpoint"]


def test_two_missing_artifacts_are_named_together(catalogs, priors):
    plan = recommend(RecommendRequest(model="acme/Foo-8B", params_b=8, gpu="L40S", quantization="awq",
                                      method="eagle3"), catalogs=catalogs, priors=priors)
    assert sorted(w.artifact for w in plan.vllm.withheld) == ["checkpoint", "draft"]
    assert plan.vllm.argv == [] and plan.predicted.speedup_low is not None
    with pytest.raises(InputError) as exc:
        to_deployment(plan)
    line = exc.value.one_line()
    assert "pass --draft HUB_ID_OR_FOLDER" in line and "point --model at an awq checkpoint" in line
