"""The ``speculators`` backend (vllm-project/speculators 0.9.0): an EAGLE-3 / EAGLE-3.1 head for the target.

Needs GPUs (a vLLM server of the target and the trainer); tests check the rendered argv and Job only.
Steps, with the flags read from the 0.9.0 wheel's CLI (typer commands in ``speculators/cli/`` and the
schema-generated argparse flags of ``speculators/train/config/schema.py``):

1. ``speculators regenerate-responses --endpoint <vLLM>/v1/chat/completions --dataset <prompts.jsonl>
   --max-tokens N --sampling-params '{"temperature": 0}' --outfile responses.jsonl``: the target's own
   answers to recent prompts (on-policy); the output rows carry ``input_ids`` and ``loss_mask``;
2. ``speculators prepare-data --model <target> --data responses.jsonl --output data``: no
   ``--render-endpoint`` needed because the rows are already tokenised;
3. ``speculators generate-offline-data --model <target> --endpoint <hidden-states vLLM>/v1
   --preprocessed-data data``: hidden states into ``data/hidden_states``, from a vLLM server launched
   for hidden-state extraction (speculators' ``scripts/launch_vllm.py``, not shipped in the wheel);
4. ``torchrun --standalone --nproc_per_node G -m speculators.train --speculator-type eagle3
   --verifier-name-or-path <target> --data-path data --save-path checkpoints --save-best`` plus
   ``--fc-norm --norm-output`` for EAGLE-3.1 (``--fc-norm`` is a store-true flag, ``--norm-output`` a
   ``--x/--no-x`` flag whose eagle3 default is already true) and either ``--from-pretrained
   <incumbent>`` (warm start) or ``--num-layers`` (mutually exclusive in 0.9.0);
5. the result, ``checkpoints/checkpoint_best``, is already in speculators format (config.json with
   ``speculators_config``), so ``speculators convert`` is only needed for an incumbent from the
   original EAGLE repo: :func:`convert_command` renders it (``convert <ckpt> --algorithm eagle3
   --verifier <id> --output-path <dir>``).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import Field

from specops.engines.client import CHAT, route
from specops.models import Strict
from specops.retrain.backends import TrainContext, package_versions
from specops.retrain.pipeline import Pipeline, PipelineBackend
from specops.retrain.prompts import data_sha256
from specops.retrain.types import TrainResult, params_of


class SpeculatorsParams(Strict):
    """Knobs of the speculators pipeline."""


    endpoint: str = Field(default="http://127.0.0.1:8000", description="The target's vLLM server (base URL).")
    hidden_states_endpoint: str | None = Field(
        default=None, description="vLLM server launched for hidden-state extraction (default: endpoint).")
    served_model_name: str | None = Field(default=None, description="--model for regenerate-responses.")
    max_tokens: int = Field(default=2048, ge=1, description="Response length per prompt.")
    seq_length: int = Field(default=8192, ge=128, description="prepare-data --seq-length / train --total-seq-len.")
    eagle_generation: str = Field(default="3.1", pattern=r"^3(\.1)?$", description="3 or 3.1 (fc_norm, norm_output).")
    num_layers: int = Field(default=1, ge=1, le=16, description="Draft decoder layers (fresh heads only).")
    epochs: int = Field(default=10, ge=1, description="Training epochs.")
    lr: float | None = Field(default=None, gt=0, description="Learning rate (speculators default 1e-3).")
    draft_vocab_size: int | None = Field(default=None, ge=1, description="Reduced draft vocab (needs token freqs).")
    gpus: int = Field(default=1, ge=1, le=64, description="torchrun --nproc_per_node.")
    seed: int = Field(default=0, description="Seed for every step.")
    warm_start: bool = Field(default=True, description="--from-pretrained the incumbent when it is an eagle3 head.")


def _is_speculators_eagle3(path: str | None) -> bool:
    if not path or not (Path(path) / "config.json").is_file():
        return False
    from specops.modelconfig import read_model_config

    cfg = read_model_config(path).data
    return cfg.get("speculators_model_type") == "eagle3"


def convert_command(checkpoint: str, verifier: str, output_path: str, norm_before_residual: bool = False) -> list[str]:
    """``speculators convert`` for an EAGLE-3 checkpoint from the original research repo."""
    argv = ["speculators", "convert", checkpoint, "--algorithm", "eagle3", "--verifier", verifier,
            "--output-path", output_path]
    if norm_before_residual:
        argv += ["--algorithm-kwargs", json.dumps({"norm_before_residual": True})]
    return argv


class SpeculatorsBackend(PipelineBackend):
    name = "speculators"
    method = "eagle3"

    def pipeline(self, ctx: TrainContext) -> Pipeline:
        p = params_of(SpeculatorsParams, ctx.params)
        work = ctx.work_dir
        inp, data, ckpt = f"{work}/input", f"{work}/data", f"{work}/checkpoints"
        hs = (p.hidden_states_endpoint or p.endpoint).rstrip("/")
        regen = ["speculators", "regenerate-responses", "--endpoint", route(p.endpoint, CHAT),
                 "--dataset", f"{inp}/prompts.jsonl", "--max-tokens", str(p.max_tokens),
                 "--sampling-params", json.dumps({"temperature": 0}), "--outfile", f"{work}/responses.jsonl",
                 "--seed", str(p.seed)]
        if p.served_model_name:
            regen += ["--model", p.served_model_name]
        prep = ["speculators", "prepare-data", "--model", ctx.target_dir, "--data", f"{work}/responses.jsonl",
                "--output", data, "--seq-length", str(p.seq_length), "--seed", str(p.seed)]
        if p.draft_vocab_size:
            prep.append("--no-skip-token-freq")
        offline = ["speculators", "generate-offline-data", "--model", ctx.target_dir, "--endpoint", hs + "/v1",
                   "--preprocessed-data", data, "--validate-outputs", "--fail-on-error"]
        train = ["torchrun", "--standalone", f"--nproc_per_node={p.gpus}", "-m", "speculators.train",
                 "--speculator-type", "eagle3", "--verifier-name-or-path", ctx.target_dir, "--data-path", data,
                 "--save-path", ckpt, "--save-best", "--epochs", str(p.epochs), "--total-seq-len", str(p.seq_length),
                 "--seed", str(p.seed)]
        if p.warm_start and _is_speculators_eagle3(ctx.incumbent_dir):
            train += ["--from-pretrained", str(ctx.incumbent_dir)]
        else:
            train += ["--num-layers", str(p.num_layers)]
        if p.eagle_generation == "3.1":
            train += ["--fc-norm", "--norm-output"]
        if p.lr:
            train += ["--lr", str(p.lr)]
        if p.draft_vocab_size:
            train += ["--draft-vocab-size", str(p.draft_vocab_size)]
        lines = "".join(json.dumps({"messages": [{"role": "user", "content": t}]}, ensure_ascii=False) + "\n"
                        for t in ctx.prompts)
        return Pipeline(files={"prompts.jsonl": lines}, commands=[regen, prep, offline, train],
                        output_dir=f"{ckpt}/checkpoint_best")


    def result(self, ctx: TrainContext, pipe: Pipeline, dry_run: bool = False) -> TrainResult:
        p = params_of(SpeculatorsParams, ctx.params)
        return TrainResult(backend="speculators", output_dir=pipe.output_dir, commands=pipe.commands,
                           data_sha256=data_sha256(ctx.prompts),
                           trained_on=f"{len(ctx.prompts)} prompts from {ctx.data_source}, target responses "
                                      f"(temperature 0, {p.max_tokens} tokens) + hidden states",
                           packages=package_versions("specops", "speculators", "vllm", "torch", "transformers"),
                           method=self.method, initialised_from=ctx.incumbent_dir if "--from-pretrained" in
                           pipe.commands[-1] else None, dry_run=dry_run)
