"""Expert parallelism and data-parallel attention in the capacity search and the rendered launch (issue 44).

Nothing is faked: the shipped catalogs and step-cost model, the real argv renderer, the real DeploymentSpec and the
real Kubernetes object renderer (no cluster: the objects are checked as rendered). The flags checked are vLLM
0.33.0's own (vllm-0.33.0 wheel, vllm/engine/arg_utils.py: ``--data-parallel-size``/``-dp``,
``--enable-expert-parallel``/``-ep``; vllm/config/parallel.py: "MoE layers will be sharded according to the product
of the tensor, prefill-context, and data parallel sizes").
"""

import pytest

from specops.errors import InputError

DEEPSEEK = "deepseek-ai/DeepSeek-V3"
QWEN_MOE = "Qwen/Qwen3-30B-A3B"
PIN = "0123456789abcdef0123456789abcdef01234567"


def _plan(**values):
    from specops.api.recommend import build_request, recommend_with_defaults

    return recommend_with_defaults(build_request(**values), use_registry=False)


def _after(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


@pytest.fixture(scope="module")
def dp_plan():
    return _plan(model=DEEPSEEK, gpu="H200", gpus=8, data_parallel_size=8, context_len=8192, output_len=1024,
                 method="none", batch_size=64)


def test_data_parallel_attention_renders_dp_and_ep_with_one_gpu_a_rank(dp_plan):
    argv = dp_plan.vllm.argv
    assert _after(argv, "--data-parallel-size") == "8"
    assert "--enable-expert-parallel" in argv
    assert "--tensor-parallel-size" not in argv  # TP 1 a rank: the flag's default
    assert dp_plan.tensor_parallel_size == 1 and dp_plan.gpus == 8


def test_the_deployment_spec_carries_the_flags_and_the_gpus_to_local_and_kubernetes(dp_plan):
    from specops.engines.argv import render_argv
    from specops.k8s.render import render_objects
    from specops.planner.render import to_deployment

    spec = to_deployment(dp_plan, name="deepseek")
    assert spec.engine.extra_args == ["--data-parallel-size", "8", "--enable-expert-parallel"]
    assert spec.kubernetes.gpus_per_replica == 8
    local = render_argv(spec.launch_config(), entrypoint="console")
    assert _after(local, "--data-parallel-size") == "8" and "--enable-expert-parallel" in local
    pinned = spec.model_copy(update={"target": spec.target.model_copy(update={"revision": PIN}),
                                     "platform": "kubernetes"})
    deploy = next(o for o in render_objects(pinned) if o["kind"] == "Deployment")
    box = deploy["spec"]["template"]["spec"]["containers"][0]
    assert _after(box["args"], "--data-parallel-size") == "8" and "--enable-expert-parallel" in box["args"]
    assert box["resources"]["limits"]["nvidia.com/gpu"] in (8, "8")


def test_a_moe_model_under_tensor_parallelism_renders_expert_parallel_beside_tp():
    plan = _plan(model=QWEN_MOE, gpu="H100", gpus=2, expert_parallel=True, method="none")
    assert _after(plan.vllm.argv, "--tensor-parallel-size") == "2"
    assert "--enable-expert-parallel" in plan.vllm.argv and "--data-parallel-size" not in plan.vllm.argv
    plain = _plan(model=QWEN_MOE, gpu="H100", gpus=2, method="none")
    assert "--enable-expert-parallel" not in plain.vllm.argv


@pytest.mark.parametrize("values,match", [
    (dict(model="meta-llama/Llama-3.1-8B-Instruct", gpu="H100", gpus=2, data_parallel_size=2), "not a mixture"),
    (dict(model=DEEPSEEK, gpu="H200", gpus=8, data_parallel_size=4), "one GPU a rank"),
])
def test_a_data_parallel_layout_the_model_cannot_run_is_one_clear_line(values, match):
    with pytest.raises(InputError, match=match) as err:
        _plan(**values)
    assert "To fix:" in str(err.value) and "\n" not in str(err.value)


def test_data_parallel_attention_keeps_one_kv_copy_and_every_ranks_dense_weights():
    """MLA's latent is replicated on every TP rank (vLLM); with data-parallel attention each rank caches only its
    own sequences, and holds the dense (non-expert) weights whole."""
    from specops.planner.catalog import load_catalogs
    from specops.planner.moe import expert_split
    from specops.planner.perfmodel import VLLM_PROFILE, Setup, memory_estimate

    cat = load_catalogs()
    m, gpu = cat.model(DEEPSEEK), cat.gpu("H200")
    tp = memory_estimate(Setup(m, gpu, 8, VLLM_PROFILE), None, seq_tokens=9216, kv_dtype="auto")
    dp = memory_estimate(Setup(m, gpu, 8, VLLM_PROFILE, True), None, seq_tokens=9216, kv_dtype="auto")
    assert tp.kv_per_seq_gib == pytest.approx(8 * dp.kv_per_seq_gib)
    per_token = (m.kv_lora_rank + m.kv_rope_dim) * m.layers * 2  # 576 bf16 values a layer
    assert dp.kv_per_seq_gib * 2**30 == pytest.approx(per_token * 9216)
    dense_gib = expert_split(m)[0] * m.weight_bits / 8 / 2**30
    assert dp.weights_gib - tp.weights_gib == pytest.approx(7 * dense_gib)
    assert dp.max_batch() > 5 * tp.max_batch()


def test_the_search_tries_data_parallel_layouts_for_moe_and_the_chosen_launch_carries_ep():
    from specops.api.capacity import capacity

    ans = capacity(dict(model=DEEPSEEK, gpu="H200", context_len=8192, output_len=1024, engine="sglang"),
                   gpus_available=8, qps=0.5, tpot_slo_ms=40.0)
    layouts = {(r.gpus_per_replica, r.data_parallel_size) for r in ans.rows}
    assert (8, 8) in layouts and (8, 1) in layouts
    c = ans.chosen
    argv = ans.plan.vllm.argv
    assert c.expert_parallel and "--enable-expert-parallel" in argv
    if c.data_parallel_size > 1:
        assert _after(argv, "--data-parallel-size") == str(c.data_parallel_size)
    else:
        assert _after(argv, "--tensor-parallel-size") == str(c.tensor_parallel_size)


def test_under_data_parallel_attention_one_requests_prefill_runs_on_one_rank():
    """A request waits for its own prefill on one rank: TTFT is ``ranks`` times the replica-share prefill time
    (never the optimistic share itself); the decode's stall is test_capacity_chunked.py's."""
    from specops.planner.load import loaded

    one = loaded(2.0, prefill_ms=100.0, tpot_ms=20.0, output_len=100)
    dp = loaded(2.0, prefill_ms=100.0, tpot_ms=20.0, output_len=100, ranks=8)
    assert dp.ttft_ms == pytest.approx(8 * one.ttft_ms)
    assert dp.latency_s > one.latency_s
