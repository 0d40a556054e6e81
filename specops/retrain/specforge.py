"""The ``specforge`` backend (SGLang's SpecForge 0.2.0): an EAGLE-3 head, exported to Hugging Face layout.

Needs GPUs (an SGLang capture server and the trainer); tests check the rendered config, argv and Job.
Read from the 0.2.0 wheel (``specforge/cli.py``, ``specforge/config/schema.py``):

- ``specforge train -c run.yaml`` is the one training entry point; the YAML is a validated
  ``Config`` (``model``, ``data``, ``training``, ``deployment``, ``output_dir``, ``run_id``). Online
  training from raw conversations (``data.train_data_path``) requires
  ``deployment.mode: disaggregated`` with ``backend: mooncake``; ``managed_local`` makes specforge
  start the SGLang capture server and Mooncake itself on one node (trainer and capture GPUs
  disjoint, ``training.role: auto``);
- ``specforge export --to hf --checkpoint <output_dir> --draft-config <json> --output-dir <dir>
  --embedding-source <target>``: the run's ``{run_id}-latest`` checkpoint as an HF folder (the
  draft checkpoint omits the frozen embedding, so the target supplies it).

The conversations are the target's own answers (``python -m specops.retrain.respond``, temperature 0,
against the deployment's server), since SpecForge captures hidden states of given text and does not
regenerate it. The draft config is derived from the target's config.json (one Llama decoder layer,
``LlamaForCausalLMEagle3``, the target's hidden size and vocab).
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from pydantic import Field

from specops.errors import InputError
from specops.models import Strict
from specops.retrain.backends import TrainContext, package_versions
from specops.retrain.pipeline import Pipeline, PipelineBackend
from specops.retrain.prompts import data_sha256
from specops.retrain.types import TrainResult, params_of


class SpecForgeParams(Strict):
    """Knobs of the SpecForge pipeline."""


    endpoint: str = Field(default="http://127.0.0.1:8000", description="The target's OpenAI-compatible server.")
    served_model_name: str = Field(default="target", description="Model name to ask the server for.")
    api_key_env: str | None = Field(default=None, description="Env var NAME holding the server's API key.")
    max_tokens: int = Field(default=2048, ge=1, description="Response length per prompt.")
    max_length: int = Field(default=2048, ge=128, description="data.max_length.")
    chat_template: str = Field(default="llama3", description="data.chat_template (SpecForge template name).")
    epochs: int = Field(default=1, ge=1, description="training.num_epochs.")
    lr: float = Field(default=1e-4, gt=0, description="training.learning_rate.")
    trainer_gpus: list[str] = Field(default_factory=lambda: ["1"], min_length=1, description="Trainer CUDA ordinals.")
    capture_gpus: list[str] = Field(default_factory=lambda: ["0"], min_length=1, description="Capture-server ordinals.")
    capture_port: int = Field(default=30000, gt=0, le=65535, description="Capture server port.")
    seed: int = Field(default=42, description="training.seed.")
    python: str = Field(default="python", description="Interpreter with specops installed (for the respond step).")


def draft_config(target_dir: str) -> dict:
    """An EAGLE-3 draft config (one Llama layer) shaped after the target's config.json."""
    path = Path(target_dir) / "config.json"
    if not path.is_file():
        raise InputError(f"the specforge backend needs the target's config.json ({path} is missing)",
                         "register the target from a local folder (or a mounted copy of the hub snapshot)")
    from specops.modelconfig import read_model_config

    t = read_model_config(path.parent).data
    keys = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "vocab_size",
            "max_position_embeddings", "rms_norm_eps", "rope_theta", "bos_token_id", "eos_token_id", "hidden_act")
    cfg = {k: t[k] for k in keys if k in t}
    cfg.update({"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "num_hidden_layers": 1,
                "tie_word_embeddings": False, "torch_dtype": "bfloat16", "draft_vocab_size": t.get("vocab_size")})
    cfg.setdefault("hidden_act", "silu")
    return cfg


def run_config(ctx: TrainContext, p: SpecForgeParams) -> dict:
    work = ctx.work_dir
    return {
        "run_id": "specops-" + ctx.deployment,
        "output_dir": f"{work}/output",
        "model": {"target_model_path": ctx.target_dir, "draft_model_config": f"{work}/input/draft-config.json",
                  "torch_dtype": "bfloat16"},
        "data": {"train_data_path": f"{work}/conversations.jsonl", "max_length": p.max_length,
                 "chat_template": p.chat_template, "cache_dir": f"{work}/cache"},
        "training": {"strategy": "eagle3", "num_epochs": p.epochs, "learning_rate": p.lr, "seed": p.seed,
                     "role": "auto"},
        "deployment": {"mode": "disaggregated", "disaggregated": {
            "control_dir": f"{work}/control", "backend": "mooncake",
            "managed_local": {"trainer_cuda_visible_devices": list(p.trainer_gpus),
                              "capture_servers": [{"port": p.capture_port, "cuda_visible_devices": list(p.capture_gpus),
                                                   "tp_size": len(p.capture_gpus)}]}}},
    }


class SpecForgeBackend(PipelineBackend):
    name = "specforge"
    method = "eagle3"

    def pipeline(self, ctx: TrainContext) -> Pipeline:
        p = params_of(SpecForgeParams, ctx.params)
        work, inp = ctx.work_dir, f"{ctx.work_dir}/input"
        respond = [p.python, "-m", "specops.retrain.respond",
                   "--endpoint", p.endpoint, "--model", p.served_model_name, "--prompts", f"{inp}/prompts.jsonl",
                   "--out", f"{work}/conversations.jsonl", "--max-tokens", str(p.max_tokens)]
        if p.api_key_env:
            respond += ["--api-key-env", p.api_key_env]
        train = ["specforge", "train", "-c", f"{inp}/run.yaml"]
        export = ["specforge", "export", "--to", "hf", "--checkpoint", f"{work}/output", "--draft-config",
                  f"{inp}/draft-config.json", "--output-dir", f"{work}/draft", "--embedding-source", ctx.target_dir]
        prompts = "".join(json.dumps({"prompt": t}, ensure_ascii=False) + "\n" for t in ctx.prompts)
        files = {"prompts.jsonl": prompts, "run.yaml": yaml.safe_dump(run_config(ctx, p), sort_keys=False),
                 "draft-config.json": json.dumps(draft_config(ctx.target_dir), indent=2) + "\n"}
        return Pipeline(files=files, commands=[respond, train, export], output_dir=f"{work}/draft")


    def result(self, ctx: TrainContext, pipe: Pipeline, dry_run: bool = False) -> TrainResult:
        p = params_of(SpecForgeParams, ctx.params)
        return TrainResult(backend="specforge", output_dir=pipe.output_dir, commands=pipe.commands,
                           data_sha256=data_sha256(ctx.prompts),
                           trained_on=f"{len(ctx.prompts)} prompts from {ctx.data_source}, target answers "
                                      f"(temperature 0, {p.max_tokens} tokens)",
                           packages=package_versions("specops", "specforge", "sglang", "torch", "transformers"),
                           method=self.method, dry_run=dry_run)
