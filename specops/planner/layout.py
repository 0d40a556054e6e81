"""How many GPUs a replica may use, and how they are laid out: tensor parallelism inside a node, pipeline
stages across nodes (vLLM's documented multi-node layout: `--tensor-parallel-size` GPUs per node,
`--pipeline-parallel-size` nodes, over a Ray cluster; vLLM's examples/online_serving/multi-node-serving.sh).

Tensor-parallel sizes must divide the attention heads, and divide the KV heads or be a multiple of them
(vllm/config/model.py verify_with_parallel_config). Over one node (8 GPUs) a count is valid when it is a
whole number of nodes whose 8 GPUs form a valid tensor-parallel group. Issue 44's capacity search reuses
:func:`gpu_counts`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specops.planner.types import ModelSpec

GPUS_PER_NODE = 8


def tensor_parallel_sizes(model: ModelSpec, limit: int = 64) -> list[int]:
    """Tensor-parallel sizes vLLM accepts for ``model`` (up to ``limit``)."""
    return [t for t in range(1, limit + 1) if model.heads % t == 0
            and (model.kv_heads % t == 0 if model.kv_heads >= t else t % model.kv_heads == 0)]


def gpu_counts(model: ModelSpec, limit: int = 64) -> list[int]:
    """GPU counts a replica of ``model`` can use: a valid TP size within a node, or whole nodes of 8."""
    inside = [t for t in tensor_parallel_sizes(model, GPUS_PER_NODE)]
    nodes = [GPUS_PER_NODE * n for n in range(2, limit // GPUS_PER_NODE + 1)] if GPUS_PER_NODE in inside else []
    return inside + nodes


def layout(gpus: int) -> tuple[int, int]:
    """(tensor_parallel_size, pipeline_parallel_size) for ``gpus`` valid GPUs: one node, or nodes of 8."""
    return (gpus, 1) if gpus <= GPUS_PER_NODE else (GPUS_PER_NODE, gpus // GPUS_PER_NODE)


def describe(gpus: int) -> str:
    """``--gpus N`` as a layout, e.g. "16 (2 nodes × 8 GPUs, pipeline parallel)"."""
    tp, pp = layout(gpus)
    return f"{gpus}" if pp == 1 else f"{gpus} ({pp} nodes × {tp} GPUs, pipeline parallel)"


def data_parallel_counts(model: ModelSpec) -> list[int]:
    """GPU counts a replica of a mixture-of-experts ``model`` can run with attention data parallel and the experts
    expert parallel (vLLM 0.33 ``--data-parallel-size N --enable-expert-parallel``: "MoE layers will be sharded
    according to the product of the tensor ... and data parallel sizes", vllm/config/parallel.py): 2..8 ranks of
    one node whose count divides the routed experts. Dense models: none (more replicas serve them)."""
    if not model.is_moe:
        return []
    return [g for g in range(2, GPUS_PER_NODE + 1) if model.experts % g == 0]


def check_data_parallel(model: ModelSpec, request) -> None:
    """A data-parallel request (``data_parallel_size`` > 1) is one the layouts above allow."""
    from specops.errors import InputError

    dp = request.data_parallel_size
    if dp != request.gpus:
        raise InputError(f"data parallel size {dp} with {request.gpus} GPUs: specops prices data-parallel attention "
                         "with one GPU a rank (TP 1)", f"use {request.gpus} data-parallel ranks, or 1")
    if dp not in data_parallel_counts(model):
        what = "is not a mixture of experts" if not model.is_moe else f"has {model.experts} experts"
        raise InputError(f"{model.id} {what}: {dp} data-parallel ranks with expert parallelism do not apply",
                         f"use data parallel 1 (tensor parallel over the GPUs), or one of "
                         f"{data_parallel_counts(model) or 'none'}")


def smallest_at_least(model: ModelSpec, need: int) -> int | None:
    """The smallest GPU count a replica can use that is at least ``need`` (None: over 64)."""
    return next((g for g in gpu_counts(model) if g >= need), None)


def fit_advice(setup, request, catalogs) -> str:
    """What makes the weights fit, each fix checked before it is offered: the fewest GPUs a replica can use
    that hold them (whole nodes over 8), and a quantization the model does not already have (fp8 on the fly
    where the GPU has FP8, a catalog AWQ checkpoint) that holds them on the GPUs asked for."""
    from specops.errors import SpecopsError
    from specops.planner.perfmodel import Setup, memory_estimate

    model, gpu, profile = setup.model, setup.gpu, setup.profile

    def holds(spec, gpus: int) -> bool:
        mem = memory_estimate(Setup(spec, gpu, gpus, profile), None, seq_tokens=1, kv_dtype="auto")
        return mem.weights_gib <= mem.available_gib

    fixes = []
    more = next((g for g in gpu_counts(model) if g > request.gpus and holds(model, g)), None)
    if more is not None:
        fixes.append(f"--gpus {describe(more)}")
    if not request.quantization and model.weight_bits > 8.5:  # a checkpoint that ships FP8 gets no fp8 advice
        for q in (("fp8",) if gpu.fp8_tflops else ()) + ("awq",):
            try:
                spec = catalogs.model(request.model, params_b=request.params_b, quantization=q,
                                      active_params_b=request.active_params_b)
            except SpecopsError:
                continue
            if holds(spec, request.gpus):
                fixes.append(f"--quantization {q}")
    return ("use " + " or ".join(fixes)) if fixes else f"use a GPU with more memory than {gpu.name}'s {gpu.memory_gib:g} GB"
