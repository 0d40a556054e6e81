"""Where tune runs keep their points: the registry (``tune_run`` and ``tune_point`` tables).

- The run row holds what the run was asked to do (options, hardware, engine version), written once
  at the start; ``--resume RUN_ID`` reads it back, so a resumed run needs no other flags.
- Each finished point is one row, committed before the next point starts: a run killed at any moment
  loses at most the point in flight, and a resumed run never measures a stored point again.
- Engine logs are the tune deployment's (``specops logs tune-<run id>``).

Runs made before the registry had these tables kept ``run.json`` and ``points.jsonl`` in
``$SPECOPS_HOME/tune/<run-id>/``; the first time such a run is read (``--resume``, ``--list``) it is imported into the registry
(points and all), and the files are left as they were.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timezone
from pathlib import Path

from pydantic import ValidationError

from specops.errors import InputError
from specops.settings import specops_home
from specops.tune.types import PointResult


def tune_root() -> Path:
    return specops_home() / "tune"


def new_run_id(now: datetime | None = None) -> str:
    now = now or datetime.now(timezone.utc)
    return now.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def _registry(registry=None):
    if registry is not None:
        return registry
    from specops.registry import open_registry

    return open_registry()


class PointStore:
    """One run's points in the registry (append-only)."""

    def __init__(self, run_id: str, registry=None, root: Path | None = None) -> None:
        if not run_id or "/" in run_id or run_id.startswith(".") or len(run_id) > 100:
            raise InputError(f'run id "{run_id}" is not valid', "use the id `specops tune` printed")
        self.run_id = run_id
        self.registry = _registry(registry)
        self.dir = (root or tune_root()) / run_id  # where a file-based run from an older version lives

    # --- run metadata -----------------------------------------------------------------------------
    def create(self, meta: dict) -> None:
        """Record the run (``meta["options"]`` and the rest); an existing run id is refused."""
        rest = {k: v for k, v in meta.items() if k != "options"}
        self.registry.create_tune_run(self.run_id, options=meta.get("options") or {}, meta=rest)

    def exists(self) -> bool:
        return self.registry.has_tune_run(self.run_id) or import_legacy_run(self.dir, self.registry)

    def meta(self) -> dict:
        """``{"options": ..., **meta}`` of the run (NotFoundError with did-you-mean when unknown)."""
        self.exists()  # imports a file-based run on first read
        run = self.registry.get_tune_run(self.run_id)
        return {"options": run.options, **(run.meta or {})}

    # --- points -----------------------------------------------------------------------------------
    def append(self, result: PointResult) -> None:
        self.registry.add_tune_point(self.run_id, key=result.point.key, status=result.status,
                                     result=result.model_dump(mode="json"))

    def load(self) -> list[PointResult]:
        if not self.exists():
            return []
        out = []
        for row in self.registry.tune_points(self.run_id):
            try:
                out.append(PointResult.model_validate(row.result))
            except ValidationError:
                continue  # a row written by an incompatible version: that point is measured again
        return out

    def done_keys(self) -> set[str]:
        return {r.point.key for r in self.load()}


def import_legacy_run(folder: Path, registry) -> bool:
    """Import a file-based run (``run.json`` + ``points.jsonl``) into the registry; False if there is none.

    A torn last line (a run killed while writing) is skipped, as the file store did."""
    meta_path = folder / "run.json"
    if not meta_path.is_file():
        return False
    from specops.jsonfile import load_json_object

    meta = load_json_object(meta_path, fix="fix or remove that run folder")
    created = meta.number("created", 0, 4_102_444_800, None)  # seconds since 1970, before 2100
    options = meta.obj("options")
    when = datetime.fromtimestamp(created, timezone.utc) if created is not None else None
    rest = {k: v for k, v in meta.data.items() if k != "options"}
    if not registry.has_tune_run(folder.name):
        registry.create_tune_run(folder.name, options=options.data if options else {}, meta=rest, created_at=when)
    have = {p.key for p in registry.tune_points(folder.name)}
    points = folder / "points.jsonl"
    lines = points.read_text(encoding="utf-8").splitlines() if points.is_file() else []
    for line in lines:
        if not line.strip():
            continue
        try:
            r = PointResult.model_validate_json(line)
        except ValidationError:
            continue
        if r.point.key not in have:
            registry.add_tune_point(folder.name, key=r.point.key, status=r.status, result=r.model_dump(mode="json"))
            have.add(r.point.key)
    return True


def list_runs(registry=None, root: Path | None = None) -> list:
    """Tune runs in the registry, newest first (file-based runs under ``root`` are imported first)."""
    registry = _registry(registry)
    root = root or tune_root()
    if root.is_dir():
        for p in sorted(root.iterdir()):
            if (p / "run.json").is_file() and not registry.has_tune_run(p.name):
                import_legacy_run(p, registry)
    return registry.tune_runs()
