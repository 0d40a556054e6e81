"""What `specops deployment register|list|show|remove` calls.

Adopt an engine specops did not start: record it in the registry (status ``adopted``) so that bench,
metrics, validate and monitor work on it like on any deployment.

Registration probes the engine once (``/v1/models`` and ``/metrics``): it fills in the served model name
when there is exactly one, reads γ from the per-position spec counters, and refuses an unreachable URL
unless ``check=False``. The API key is referred to by environment variable name; its value is never
stored.
"""

from __future__ import annotations

import os
import re

from specops.errors import InputError
from specops.metrics.scrape import base_url
from specops.models import check_deployment_name

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def probe(endpoint: str, api_key_env: str | None = None, timeout: float = 10.0) -> dict:
    """What the engine says about itself: served models (with max_model_len) and spec counters."""
    from specops.engines.client import VllmClient
    from specops.metrics.scrape import scrape

    headers = {}
    if api_key_env and os.environ.get(api_key_env):
        headers["Authorization"] = f"Bearer {os.environ[api_key_env]}"
    models = [m["id"] for m in VllmClient(endpoint, headers).models(deadline_s=timeout)]
    snap = scrape(endpoint, timeout=timeout)
    # γ from the per-position series; none when they are incomplete (specops.metrics.parse drops them then)
    ks = {g: (max(v.accepted_per_pos) + 1 if v.accepted_per_pos else None) for g, v in snap.groups.items()}
    spec = {g: v.has_spec for g, v in snap.groups.items()}
    return {"models": models, "k": ks, "speculation": spec, "metrics": snap.vllm_series > 0}


def adopt(name: str, endpoint: str, *, served_name: str | None = None, target: str | None = None,
          draft: str | None = None, method: str | None = None, api_key_env: str | None = None,
          check: bool = True, reg=None, db: str | None = None):
    """Record (or update) an adopted deployment; returns (DeploymentPublic, notes)."""
    from specops.registry import open_registry

    check_deployment_name(name)
    if method is not None:
        method = _known_method(method)
    if api_key_env and not ENV_NAME.match(api_key_env):
        raise InputError(f'--api-key-env "{api_key_env}" is not an environment variable name',
                         "pass the NAME of the variable (e.g. VLLM_API_KEY), never the key itself")
    endpoint = base_url(endpoint)
    reg = reg or open_registry(db)
    existing = {d.name: d for d in reg.list_deployments()}.get(name)
    if existing and existing.status != "adopted":
        raise InputError(f'deployment "{name}" exists and was started by specops ({existing.platform}, '
                         f"{existing.status})", "choose another name for the adopted engine")
    notes: list[str] = []
    k = None
    if check:
        info = probe(endpoint, api_key_env)
        if served_name is None:
            if len(info["models"]) != 1:
                raise InputError(f"{endpoint} serves {len(info['models'])} models ({', '.join(info['models'])})",
                                 "pass --served-name with the one to adopt")
            served_name = info["models"][0]
        elif served_name not in info["models"]:
            from specops.errors import did_you_mean

            raise InputError(f'{endpoint} does not serve "{served_name}".{did_you_mean(served_name, info["models"])}',
                             f"use one of: {', '.join(info['models'])}")
        if not info["metrics"]:
            notes.append("the engine exports no vllm:* metrics (--disable-log-stats?): it cannot be measured")
        elif not info["speculation"].get(served_name, False):
            notes.append("the engine exports no spec-decode counters: speculation looks off")
        k = info["k"].get(served_name)
    else:
        notes.append("not probed (--no-check): endpoint and served name recorded as given")
    row = reg.upsert_deployment(name, platform="external", status="adopted", actor="specops deployment register",
                                target_ref=target, draft_ref=draft, method=method, num_speculative_tokens=k,
                                endpoint=endpoint, served_model_name=served_name, api_key_env=api_key_env)
    return row, notes


def _known_method(method: str) -> str:
    """``method`` as vLLM names it, or an InputError with did-you-mean (never free text in the registry)."""
    from specops.errors import unknown
    from specops.speculation import METHODS, canonical

    m = canonical(method)
    known = tuple(name for name, info in METHODS.items() if info.family != "tooling")
    if m not in known:
        raise unknown("method", method[:80], known, fix="use --method " + "|".join(known))
    return m


def remove(name: str, reg=None, db: str | None = None) -> str:
    """Forget an adopted deployment (measurement and event history is kept)."""
    from specops.registry import open_registry

    reg = reg or open_registry(db)
    d = reg.get_deployment(name)
    if d.status not in ("adopted", "stopped", "failed"):
        raise InputError(f'deployment "{name}" is {d.status} ({d.platform}); removing it would orphan a '
                         "running engine", "stop it first (specops stop NAME), then remove it")
    remover = getattr(reg, "remove_deployment", None)
    if remover is not None:
        remover(name)
        return "removed"
    reg.set_deployment_status(name, "stopped", actor="specops deployment remove", reason="removed by user",
                              pid=None)
    reg.record_event("deployment.removed", name, f"{name} removed (history kept)", actor="specops deployment remove")
    return "retired"


def list_deployments(reg=None, db: str | None = None) -> list:
    """Every registered deployment (started by specops or adopted)."""
    from specops.registry import open_registry

    return (reg or open_registry(db)).list_deployments()


def get_deployment(name: str, reg=None, db: str | None = None):
    """One deployment's record (NotFoundError with did-you-mean when absent)."""
    from specops.registry import open_registry

    return (reg or open_registry(db)).get_deployment(name)
