"""What `specops retrain` calls: retrain a deployment's draft, register it with its lineage, check it
on held-out prompts (specops.retrain.driver), with the backend parameters given as JSON text."""

from __future__ import annotations

from pathlib import Path

from specops.errors import unknown
from specops.registry import open_registry
from specops.retrain.types import BACKENDS


def parse_params(text: str | None) -> dict:
    """Backend parameters from ``--params`` JSON text ({} when none); anything but an object is an InputError."""
    from specops.jsonfile import JsonObject, parse_json_text

    fix = "pass a JSON object, e.g. '{\"steps\": 300}'"
    if not text:
        return {}
    return JsonObject.of(parse_json_text(text, "--params", fix=fix), "--params", fix=fix).data


def retrain(deployment: str, *, backend: str = "local", data: str | Path | None = None, from_traffic: bool = False,
            params: str | dict | None = None, heldout: int = 8, floor: float = 0.0, min_gain: float = 0.0,
            reason: str | None = None, dry_run: bool = False, db: str | None = None, progress=None):
    """Retrain the draft of ``deployment`` (a RetrainOutcome); ``params`` as a dict or JSON text."""
    from specops.retrain.driver import retrain as run

    extra = params if isinstance(params, dict) else parse_params(params)
    if backend not in BACKENDS:
        raise unknown("retraining backend", backend, BACKENDS)
    with open_registry(db) as reg:
        return run(deployment, backend=backend, data=data, from_traffic=from_traffic, registry=reg, params=extra,
                   heldout=heldout, floor=floor, min_gain=min_gain, reason=reason, dry_run=dry_run, progress=progress)
