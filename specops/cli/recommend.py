"""`specops recommend`: method, γ and KV dtype for a model on given GPUs, with the exact vLLM launch.

Imports only typer at module level (keeps `specops --help` fast); specops.api.recommend loads in the body.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

import typer

OUTPUTS = ("table", "json", "yaml", "deployment")


def register(app: typer.Typer) -> None:
    import inspect

    from specops.api.recommend import gpu_names_for_help

    gpu_option = inspect.signature(recommend_command).parameters["gpu"].default
    gpu_option.help = gpu_option.help.replace("GPU_NAMES", gpu_names_for_help())  # the catalog's names, read cheaply
    app.command("recommend", help="Recommend a speculative-decoding method, γ and KV dtype, with a predicted "
                "speedup, the decision path, and the exact `vllm serve` command. Docs: docs/recommend.md.")(
        recommend_command)


def recommend_command(
    model: str = typer.Option(..., "--model", help="Catalog name, Hugging Face id, or local model folder."),
    params_b: float = typer.Option(None, "--params-b", help="Parameters in billions (needed for unknown hub ids)."),
    active_params_b: float = typer.Option(None, "--active-params-b", help="Parameters active per token in "
                                          "billions: makes an unknown model (with --params-b) a mixture of experts."),
    quantization: str = typer.Option(None, "--quantization", help="Weights: fp8, int8, awq, gptq or nvfp4."),
    gpu: str = typer.Option(None, "--gpu", help="GPU: GPU_NAMES; or the name nvidia-smi / rocm-smi "
                            "prints (e.g. \"NVIDIA A100 80GB PCIe\"). Default: SPECOPS_GPU / config.yaml."),
    gpus: int = typer.Option(1, "--gpus", "--tp", "--tensor-parallel-size",
                             help="GPUs per replica (vLLM's --tensor-parallel-size; over 8, nodes of 8 with pipeline "
                             "parallelism)."),
    tpot_ms: float = typer.Option(None, "--tpot-ms", help="Target time per output token in ms."),
    task: str = typer.Option("chat", "--task", help="code, math, chat, creative, translation, summarization, rag, "
                             "agentic."),
    context_len: int = typer.Option(None, "--context-len", help="Prompt/context tokens per request (default 4096)."),
    output_len: int = typer.Option(256, "--output-len", help="Generated tokens per request."),
    temperature: float = typer.Option(0.0, "--temperature", help="Sampling temperature."),
    batch_size: int = typer.Option(None, "--batch-size", help="Concurrent requests (default 1)."),
    qps: float = typer.Option(None, "--qps", help="Request rate instead of --batch-size: the batch becomes the "
                              "concurrency it keeps in flight (Little's law with the predicted latency)."),
    kv_cache_dtype: str = typer.Option(None, "--kv-cache-dtype", help="Pin the KV cache dtype (auto, fp8, "
                                       "turboquant_k8v4, ...; checked against the vLLM version). Default: the least "
                                       "compressed that fits the batch."),
    engine: str = typer.Option("vllm", "--engine", help="Engine whose step-time profile predicts: vllm, sglang, "
                               "tensorrt-llm, hf (the rendered launch stays vLLM)."),
    vllm_version: str = typer.Option(None, "--vllm-version", help="vLLM release (default SPECOPS_VLLM_VERSION, "
                                     "config.yaml, else 0.33.0)."),
    objective: str = typer.Option("latency", "--objective", help="latency (per-request speedup) or throughput "
                                  "(tokens/s meeting the TPOT target)."),
    method: str = typer.Option(None, "--method", help="Pin a method: eagle3, eagle, mtp, draft_model, ngram, "
                               "suffix, dflash, medusa (vLLM ≤ 0.32), none."),
    num_speculative_tokens: int = typer.Option(None, "--num-speculative-tokens", help="Pin γ (1-16)."),
    draft: str = typer.Option(None, "--draft", help="Pin a draft: hub id or local folder."),
    parallel_drafting: bool = typer.Option(False, "--parallel-drafting", help="P-EAGLE: eagle3 with all γ drafts "
                                           "in one pass (renders parallel_drafting: true; vLLM >= 0.16.0; pins "
                                           "--method eagle3; not modelled: the prediction is sequential EAGLE-3's)."),
    output: str = typer.Option("table", "--output", "-o", help="table, json, yaml, or deployment (a DeploymentSpec "
                               "YAML for `specops deploy`)."),
    name: str = typer.Option(None, "--name", help="Deployment name for --output deployment (default: from the model)."),
    allow_uncertain: bool = typer.Option(False, "--allow-uncertain", help="Keep the cost model's pick "
                                         "(the best predicted speedup) whatever its chance of a gain, with a warning."),
    min_p_gain: float = typer.Option(None, "--min-p-gain", help="Risk level, 0-1: choose only candidates whose "
                                     "chance of a speedup above 1 is at least this (default 0.8; see "
                                     "docs/recommend.md)."),
    adaptive_verification: bool = typer.Option(False, "--adaptive-verification", help="Render vLLM 0.33's "
                                               "enable_adaptive_verification where the capability rows allow it "
                                               "(not modelled: docs/monitor.md)."),
    calibration: str = typer.Option(None, "--calibration", help="Use a calibration stored by `specops tune` "
                                    "(default: the newest one for this model on this hardware)."),
    sweep: str = typer.Option(None, "--sweep", help="Plan at each value of one input: batch=1,8,64,256, gamma=1,3,5, "
                              "context=1024,8192,32768 or qps=1,4,16; one table (and with -o json a `points` list)."),
    plot: str = typer.Option(None, "--plot", help="With --sweep: write the speedup (with its range) against the swept "
                             "input and the break-even line to FILE.svg or FILE.html."),
    gpus_available: int = typer.Option(None, "--gpus-available", help="Capacity: lay out a pool of N GPUs for "
                                       "--qps within --tpot-slo/--ttft-slo, with and without speculation "
                                       "(docs/capacity.md)."),
    tpot_slo: float = typer.Option(None, "--tpot-slo", help="With --gpus-available: TPOT every request meets "
                                   "under the load (ms)."),
    ttft_slo: float = typer.Option(None, "--ttft-slo", help="With --gpus-available: TTFT under the load (ms)."),
    keda: bool = typer.Option(False, "--keda", help="With --gpus-available -o deployment: autoscale with a KEDA "
                              "ScaledObject (Prometheus trigger) instead of a HorizontalPodAutoscaler."),
    explain: bool = typer.Option(False, "--explain", help="Show the whole decision path (every rule, its input and "
                                 "outcome) and every alternative, not just the pick and why."),
) -> None:
    from specops.cli.output import check_format, check_writable, emit

    fmt = check_format(output, OUTPUTS)
    if plot is not None:
        _check_plot(plot, sweep, check_writable)
    with _no_pydantic_plugins():
        from specops.api.recommend import build_request, deployment_yaml, recommend_with_defaults

        values = dict(model=model, params_b=params_b, active_params_b=active_params_b, quantization=quantization,
                      gpu=gpu, gpus=gpus, tpot_ms=tpot_ms, task=task, context_len=context_len, output_len=output_len,
                      temperature=temperature, batch_size=batch_size, vllm_version=vllm_version,
                      objective=objective, method=method, num_speculative_tokens=num_speculative_tokens,
                      draft=draft, allow_uncertain=allow_uncertain or None, min_p_gain=min_p_gain, qps=qps,
                      engine=engine, parallel_drafting=parallel_drafting or None, kv_cache_dtype=kv_cache_dtype,
                      adaptive_verification=adaptive_verification or None)
        if gpus_available is not None or tpot_slo is not None or ttft_slo is not None or keda:
            from specops.cli.capacity_view import run_capacity

            run_capacity(values, gpus_available, tpot_slo, ttft_slo, keda, fmt, name, sweep, calibration)
            return
        if sweep is not None:
            _sweep(values, sweep, fmt, plot, calibration)
            return
        plan = recommend_with_defaults(build_request(**values), calibration=calibration)
        if fmt == "deployment":
            typer.echo(deployment_yaml(plan, name), nl=False)
            return
        from specops.cli.plan_view import print_plan

        emit(plan, fmt, lambda p: print_plan(p, explain=explain))


def _check_plot(plot: str, sweep: str | None, check_writable) -> None:
    from specops.errors import InputError

    if sweep is None:
        raise InputError("--plot draws a sweep", "add --sweep, e.g. --sweep batch=1,8,64,256 --plot speedup.svg")
    if not plot.lower().endswith((".svg", ".html", ".htm")):
        raise InputError(f'--plot "{plot[:120]}" is neither .svg nor .html', "name the file FILE.svg or FILE.html")
    check_writable(plot, "--plot")


def _sweep(values: dict, sweep: str, fmt: str, plot: str | None, calibration: str | None) -> None:
    from specops.api.recommend import sweep as run_sweep
    from specops.api.recommend import sweep_plot
    from specops.cli.output import emit
    from specops.errors import InputError

    if fmt == "deployment":
        raise InputError("--sweep makes one plan per value, and a deployment is one plan",
                         "drop --sweep and give the value to deploy (e.g. --batch-size 8) with -o deployment")
    result = run_sweep(values, sweep, calibration=calibration)
    if plot is not None:
        from pathlib import Path

        Path(plot).write_text(sweep_plot(result, html=not plot.lower().endswith(".svg")), encoding="utf-8")
    from specops.cli.plan_view import print_sweep

    emit(result, fmt, lambda s: print_sweep(s, plot))


@contextmanager
def _no_pydantic_plugins():
    """Pydantic looks for plugins (an entry-point scan of every installed package: 15-45 ms in a vLLM
    environment) when the first model class is built; the planner uses none, so while it loads and runs
    the scan is skipped, as typer does while it builds its parameter adapters. The setting is restored after."""
    before = os.environ.get("PYDANTIC_DISABLE_PLUGINS")
    if before is None:
        os.environ["PYDANTIC_DISABLE_PLUGINS"] = "__all__"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYDANTIC_DISABLE_PLUGINS", None)
