"""The deployment folder, defined once: ``$SPECOPS_HOME/deployments/<name>/`` and what lives in it.

Every module that reads or writes a deployment's files goes through :class:`DeploymentFolder`; no other
module spells a file name of this layout.

    spec.yaml             the spec the engine was started from (``specops deploy``, heal's promotion)
    spec.incumbent.yaml   the spec a promotion replaced (rollback restores it)
    engine.json           the running engine: pid, process start time, port, endpoint
    engine.log            the engine's output (the previous start's is engine.log.1)
    prompts.jsonl         recorded traffic for retraining
    retrain/              retrain runs (job-N/, dry-run/, monitor-*.log)
    heal/                 heal runs (traffic snapshots)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from specops.settings import deployment_dir


@dataclass(frozen=True)
class DeploymentFolder:
    name: str
    root: Path

    @classmethod
    def of(cls, name: str) -> DeploymentFolder:
        """The folder of deployment ``name`` (an InputError for a name that would leave deployments/)."""
        return cls(name, deployment_dir(name))

    @property
    def spec(self) -> Path:
        return self.root / "spec.yaml"

    @property
    def incumbent_spec(self) -> Path:
        return self.root / "spec.incumbent.yaml"

    @property
    def engine_file(self) -> Path:
        return self.root / "engine.json"

    @property
    def log(self) -> Path:
        return self.root / "engine.log"

    @property
    def previous_log(self) -> Path:
        return self.root / "engine.log.1"

    @property
    def traffic(self) -> Path:
        return self.root / "prompts.jsonl"

    @property
    def retrain(self) -> Path:
        return self.root / "retrain"

    @property
    def heal(self) -> Path:
        return self.root / "heal"

    def read_engine(self) -> dict | None:
        """engine.json as written by :meth:`write_engine`; None when absent or unreadable."""
        from specops.errors import ConfigFileError
        from specops.jsonfile import load_json

        try:
            info = load_json(self.engine_file)
        except ConfigFileError:
            return None
        return info if isinstance(info, dict) else None

    def write_engine(self, info: dict) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.engine_file.write_text(json.dumps(info))

    def forget_engine(self) -> None:
        self.engine_file.unlink(missing_ok=True)
