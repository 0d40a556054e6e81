"""The backend protocol and the ``local`` backend adapter.

A backend turns a :class:`TrainContext` (target folder, incumbent draft, training prompts, a work
folder) into a draft folder: ``plan`` gives the exact argv of every step (what lineage records and
what ``--dry-run`` prints), ``run`` runs them. ``local`` runs in-process on CPU; ``speculators`` and
``specforge`` (see their modules) run their real pipelines as local processes or a Kubernetes Job.
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from pydantic import Field

from specops.errors import InputError, unknown
from specops.models import Strict
from specops.retrain.prompts import data_sha256, write_prompts
from specops.retrain.types import BACKENDS, TrainResult, params_of

StepCallback = Callable[[int, float], None]


class TrainContext(Strict):
    """Everything a backend needs for one run (paths absolute)."""


    deployment: str = Field(description="Deployment being healed.")
    target_dir: str = Field(description="Target folder (or hub id for the GPU backends).")
    target_ref: str = Field(description="Target NAME@VERSION.")
    incumbent_dir: str | None = Field(default=None, description="Incumbent draft folder, if any.")
    prompts: list[str] = Field(description="Training prompts (held-out prompts excluded).")
    data_source: str = Field(description="Where the prompts came from (file path or 'traffic').")
    work_dir: str = Field(description="Folder for this job's files.")
    params: dict = Field(default_factory=dict, description="Backend parameters.")

    @property
    def out_dir(self) -> Path:
        return Path(self.work_dir) / "draft"


class Backend(Protocol):
    name: str
    method: str

    def plan(self, ctx: TrainContext) -> list[list[str]]:
        """The exact argv of every step, in order."""

    def run(self, ctx: TrainContext, on_step: StepCallback | None = None) -> TrainResult:
        """Run the steps; the produced draft is in ``result.output_dir``."""


def package_versions(*names: str) -> dict[str, str]:
    out = {"python": sys.version.split()[0]}
    for n in names:
        try:
            out[n] = importlib.metadata.version(n)
        except importlib.metadata.PackageNotFoundError:
            out[n] = "not installed"
    return out


class LocalBackend:
    """In-process distillation (:mod:`specops.retrain.local`); the recorded command is the equivalent
    ``python -m specops.retrain.local ...`` invocation, which runs the very same function."""

    name = "local"
    method = "draft_model"

    def _files(self, ctx: TrainContext) -> tuple[Path, Path]:
        work = Path(ctx.work_dir)
        return work / "train-prompts.jsonl", work / "local-params.json"

    def plan(self, ctx: TrainContext) -> list[list[str]]:
        from specops.retrain.local import LocalParams

        params_of(LocalParams, ctx.params)  # validate early, dry runs included
        prompts_file, params_file = self._files(ctx)
        argv = [sys.executable, "-m", "specops.retrain.local", "--target", ctx.target_dir, "--prompts",
                str(prompts_file), "--out", str(ctx.out_dir), "--params", str(params_file)]
        if ctx.incumbent_dir:
            argv += ["--incumbent", ctx.incumbent_dir]
        return [argv]

    def run(self, ctx: TrainContext, on_step: StepCallback | None = None) -> TrainResult:
        from specops.retrain.local import LocalParams, distill

        params = params_of(LocalParams, ctx.params)
        prompts_file, params_file = self._files(ctx)
        write_prompts(ctx.prompts, prompts_file)
        params_file.write_text(json.dumps(params.model_dump(), indent=2) + "\n")
        commands = self.plan(ctx)
        metrics = distill(ctx.target_dir, ctx.prompts, ctx.out_dir, incumbent_dir=ctx.incumbent_dir, params=params,
                          on_step=on_step)
        return TrainResult(backend="local", output_dir=str(ctx.out_dir), commands=commands,
                           data_sha256=data_sha256(ctx.prompts),
                           trained_on=f"{len(ctx.prompts)} prompts from {ctx.data_source}, target greedy "
                                      f"continuations of {params.max_new_tokens} tokens",
                           packages=package_versions("specops", "torch", "transformers", "tokenizers"),
                           method=self.method, initialised_from=metrics.get("initialised_from"), metrics=metrics)


def get_backend(name: str, **options) -> Backend:
    if name == "local":
        return LocalBackend()
    if name == "speculators":
        from specops.retrain.speculators import SpeculatorsBackend

        return SpeculatorsBackend(**options)
    if name == "specforge":
        from specops.retrain.specforge import SpecForgeBackend

        return SpecForgeBackend(**options)
    raise unknown("retraining backend", name, BACKENDS)


def require_local_dir(path: str, role: str) -> Path:
    p = Path(path).expanduser()
    if not p.is_dir():
        raise InputError(f"the {role} {path} is not a local folder", f"the local backend needs the {role}'s files "
                         "on this machine; register the local folder, or use --backend speculators/specforge")
    return p.resolve()
