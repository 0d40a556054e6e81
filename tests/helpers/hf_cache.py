"""A Hugging Face cache folder as `hf download` leaves it (``models--org--name/refs/main`` holding the commit,
``snapshots/<commit>/``), for tests of what specops reads from the user's cache. Only the layout is built,
no weights: what is read (the ref, config.json) is real files in the real layout."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def commit_of(model: str) -> str:
    return hashlib.sha1(model.encode()).hexdigest()


def hf_cache(root: Path, *models: str, config: dict | None = None) -> dict[str, str]:
    """Cache ``models`` under ``root``; returns the environment that points the hub client at it."""
    for model in models:
        repo = root / "hub" / ("models--" + model.replace("/", "--"))
        commit = commit_of(model)
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / "main").write_text(commit)
        snap = repo / "snapshots" / commit
        snap.mkdir(parents=True, exist_ok=True)
        if config is not None:
            (snap / "config.json").write_text(json.dumps(config))
    return {"HF_HOME": str(root), "HF_HUB_CACHE": str(root / "hub")}
