"""Shared machinery of the GPU backends: input files + an ordered list of argv steps, run as local
processes (argv lists, no shell) or rendered as a Kubernetes Job (:mod:`specops.retrain.job`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from pydantic import Field

from specops.errors import EngineError
from specops.models import Strict


class Pipeline(Strict):
    """What a GPU backend plans: files under ``<work_dir>/input`` and the steps that use them."""


    files: dict[str, str] = Field(description="File name -> content, written to <work_dir>/input/.")
    commands: list[list[str]] = Field(description="argv of every step, in order.")
    output_dir: str = Field(description="Where the final draft (Hugging Face layout) appears.")


def write_inputs(pipe: Pipeline, work_dir: str | Path) -> Path:
    inp = Path(work_dir) / "input"
    inp.mkdir(parents=True, exist_ok=True)
    for name, text in pipe.files.items():
        (inp / name).write_text(text, encoding="utf-8")
    return inp


def run_steps(pipe: Pipeline, work_dir: str | Path, env: dict[str, str] | None = None) -> None:
    """Run the steps in order in ``work_dir``; stdout/stderr of each go to ``<work_dir>/logs/step-N.log``.
    The first failing step stops the pipeline with its exit code and log path."""
    write_inputs(pipe, work_dir)
    logs = Path(work_dir) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, **(env or {})}
    for i, argv in enumerate(pipe.commands, 1):
        log = logs / f"step-{i}.log"
        with log.open("w") as fh:
            try:
                rc = subprocess.run(argv, cwd=str(work_dir), env=full_env, stdout=fh, stderr=subprocess.STDOUT,
                                    check=False).returncode
            except FileNotFoundError:
                raise EngineError(f"step {i} could not start: {argv[0]} is not installed here",
                                  "install the trainer (see docs/retrain.md), or run the pipeline as a "
                                  "Kubernetes Job (specops.retrain.job.render_job, docs/retrain.md)") from None
        if rc != 0:
            raise EngineError(f"step {i} ({' '.join(argv[:3])} ...) exited with {rc}; see {log}",
                              "read the log; these steps need a GPU host with the trainer installed")


class PipelineBackend:
    """Shared behaviour of backends that run an external trainer as a sequence of processes
    (speculators, SpecForge): subclasses define ``pipeline(ctx)`` and ``result(ctx, pipe, dry_run)``."""

    def pipeline(self, ctx) -> Pipeline:  # pragma: no cover - abstract
        raise NotImplementedError

    def result(self, ctx, pipe: Pipeline, dry_run: bool = False):  # pragma: no cover - abstract
        raise NotImplementedError

    def plan(self, ctx) -> list[list[str]]:
        return self.pipeline(ctx).commands

    def run(self, ctx, on_step=None):
        """Run the steps as local processes (a GPU host with the trainer installed)."""
        pipe = self.pipeline(ctx)
        run_steps(pipe, ctx.work_dir)
        return self.result(ctx, pipe)
