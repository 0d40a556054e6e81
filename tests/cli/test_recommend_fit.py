"""Fit advice that can be followed (issue 41): GPU counts that exist, whole nodes with vLLM's multi-node
flags, no fp8 for a checkpoint that ships FP8 or a GPU without FP8; each fix is followed here."""

import re


def _fix(r) -> str:
    assert r.returncode == 2, (r.stdout, r.stderr)
    return r.stderr.split("To fix: ", 1)[1]


def test_weights_that_do_not_fit_get_a_gpu_count_that_exists_and_it_works(cli):
    fix = _fix(cli("recommend", "--model", "deepseek-ai/DeepSeek-V3", "--gpu", "H100"))
    assert "fp8" not in fix  # DeepSeek-V3 ships FP8
    gpus = re.search(r"--gpus (\d+) \(2 nodes × 8 GPUs, pipeline parallel\)", fix).group(1)
    r = cli("recommend", "--model", "deepseek-ai/DeepSeek-V3", "--gpu", "H100", "--gpus", gpus)  # the fix, followed
    assert r.returncode == 0, r.stderr
    assert ("launch: vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8 --pipeline-parallel-size 2 "
            "--distributed-executor-backend ray") in r.stdout and "2 nodes: start a Ray cluster of 2 nodes" in r.stdout
    import pytest

    from specops.api.recommend import build_request, deployment_yaml, recommend_with_defaults
    from specops.errors import InputError

    plan = recommend_with_defaults(build_request(model="deepseek-ai/DeepSeek-V3", gpu="H100", gpus=int(gpus)))
    assert plan.vllm.nodes == 2 and plan.tensor_parallel_size == 8 and plan.gpus == 16
    with pytest.raises(InputError, match="starts vLLM on one machine"):
        deployment_yaml(plan)


def test_a_count_that_does_not_split_is_refused_with_counts_that_do(cli):
    fix = _fix(cli("recommend", "--model", "deepseek-ai/DeepSeek-V3", "--gpu", "H100", "--gpus", "9"))
    assert "--gpus 1, 2, 4, 8, 16 (2 nodes" in fix
    fix = _fix(cli("recommend", "--model", "llama-3.1-8b-instruct", "--gpu", "H100", "--gpus", "7"))
    assert re.search(r"--gpus 1, 2, 4, 8\b", fix)


def test_a_gpu_without_fp8_is_offered_what_it_runs(cli):
    fix = _fix(cli("recommend", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "T4"))
    assert "--quantization fp8" not in fix and "--quantization awq" in fix and "--gpus 2" in fix
    from specops.api.recommend import build_request, recommend_with_defaults

    plan = recommend_with_defaults(build_request(model="meta-llama/Llama-3.1-8B-Instruct", gpu="T4",
                                                 quantization="awq", method="eagle3"))  # the fix, with a head
    assert plan.memory.fits and plan.memory.draft_gib > 0 and plan.draft  # memory decides: both fit 16 GB
