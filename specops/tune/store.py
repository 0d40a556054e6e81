"""Where tune runs keep their points: ``$SPECOPS_HOME/tune/<run-id>/``.

- ``run.json``: what the run was asked to do (options, model, workload), written once at the start;
  a resumed run reads it back so ``--resume RUN_ID`` needs no other flags.
- ``points.jsonl``: one :class:`PointResult` per line, appended and fsync'ed as each point finishes,
  so a run killed at any moment loses at most the point in flight. A torn last line (killed during
  the write) is ignored on read.

(The registry has no table for tune points yet; this file is the store until it does.)
"""

from __future__ import annotations

import json
import os
import secrets
from datetime import datetime, timezone
from pathlib import Path

from pydantic import ValidationError

from specops.errors import InputError, NotFoundError, did_you_mean
from specops.settings import specops_home
from specops.tune.types import PointResult


def tune_root() -> Path:
    return specops_home() / "tune"


def new_run_id(now: datetime | None = None) -> str:
    now = now or datetime.now(timezone.utc)
    return now.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


class PointStore:
    """Append-only store of one run's points."""

    def __init__(self, run_id: str, root: Path | None = None) -> None:
        if not run_id or "/" in run_id or run_id.startswith("."):
            raise InputError(f'run id "{run_id}" is not valid', "use the id `specops tune` printed")
        self.run_id = run_id
        self.dir = (root or tune_root()) / run_id
        self.points_path = self.dir / "points.jsonl"
        self.meta_path = self.dir / "run.json"

    # --- run metadata -----------------------------------------------------------------------------
    def create(self, meta: dict) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        if not self.meta_path.exists():
            self.meta_path.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")

    def exists(self) -> bool:
        return self.meta_path.is_file()

    def meta(self) -> dict:
        if not self.exists():
            known = list_runs(self.dir.parent)
            raise NotFoundError(f'no tune run "{self.run_id}".{did_you_mean(self.run_id, known)}',
                                "see the run ids under $SPECOPS_HOME/tune/ (or start a new run without --resume)")
        return json.loads(self.meta_path.read_text(encoding="utf-8"))

    # --- points -----------------------------------------------------------------------------------
    def append(self, result: PointResult) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        line = result.model_dump_json() + "\n"
        with open(self.points_path, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())

    def load(self) -> list[PointResult]:
        if not self.points_path.is_file():
            return []
        out = []
        for line in self.points_path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            try:
                out.append(PointResult.model_validate_json(line))
            except ValidationError:
                continue  # a torn last line from a killed run: that point is measured again
        return out

    def done_keys(self) -> set[str]:
        return {r.point.key for r in self.load()}


def list_runs(root: Path | None = None) -> list[str]:
    root = root or tune_root()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "run.json").is_file())
