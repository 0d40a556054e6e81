"""What `specops heal` calls: the closed loop on a local deployment (specops.heal), with the backend
parameters given as JSON text and the registry opened for the run."""

from __future__ import annotations

from pathlib import Path

from specops.api.retrain import parse_params
from specops.heal import HealOutcome
from specops.registry import open_registry


def heal(deployment: str, *, data: str | Path | None = None, from_traffic: bool = False,
         params: str | dict | None = None, heldout: int = 24, min_gain: float = 0.05, floor: float = 0.0,
         max_tokens: int = 48, handover: str = "restart", dry_run: bool = False, reason: str | None = None,
         alpha: float = 0.05, budget: int | None = None, db: str | None = None, progress=None) -> HealOutcome:
    """Retrain the stale draft of ``deployment``, validate it, canary it against the incumbent, promote or
    roll back (see specops.heal.run)."""
    from specops.heal import heal as run

    extra = params if isinstance(params, dict) else parse_params(params)
    with open_registry(db) as reg:
        return run(deployment, data=data, from_traffic=from_traffic, params=extra, heldout=heldout,
                   min_gain=min_gain, floor=floor, max_tokens=max_tokens, handover=handover, dry_run=dry_run,
                   reason=reason, alpha=alpha, budget=budget, registry=reg, progress=progress)


def canary_watch(canary: str, *, namespace: str | None = None, prometheus_url: str | None = None,
                 window_s: int | None = None, alpha: float | None = None, min_gain: float | None = None,
                 budget: int | None = None, timeout_s: float = 600, db: str | None = None, progress=None):
    """Drive a Kubernetes canary's windows through the sequential test; promote or roll back
    (specops.heal.kubecanary)."""
    from specops.heal.kubecanary import watch_canary

    with open_registry(db) as reg:
        return watch_canary(canary, registry=reg, namespace=namespace, prometheus_url=prometheus_url,
                            window_s=window_s, alpha=alpha, min_gain=min_gain, budget=budget, timeout_s=timeout_s,
                            progress=progress)
