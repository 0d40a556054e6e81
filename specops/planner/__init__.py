"""The planner: decision tree + performance model behind `specops recommend`.

    from specops.planner import RecommendRequest, recommend
    plan = recommend(RecommendRequest(model="llama-3.1-8b-instruct", gpu="H100"))

Inputs are explicit: ``recommend(request, catalogs=..., priors=..., calibration=...)``; defaults are
the shipped playbooks (catalogs, published priors, decision tree) and the vLLM engine profile.
"""

from __future__ import annotations

_EXPORTS = {
    "Catalogs": "catalog", "load_catalogs": "catalog", "EAGER_PROFILE": "perfmodel", "VLLM_PROFILE": "perfmodel",
    "EngineProfile": "perfmodel", "AcceptancePrior": "priors", "Priors": "priors", "calibrate": "priors",
    "default_priors": "priors", "load_published": "priors", "recommend": "recommend", "slug": "render",
    "to_deployment": "render", "MeasuredAcceptance": "types", "Plan": "types", "RecommendRequest": "types",
}
"""Loaded on first use (PEP 562): importing one submodule (specops.planner.types) does not load the planner."""


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f"specops.planner.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'specops.planner' has no attribute {name!r}")


__all__ = [
    "AcceptancePrior", "Catalogs", "EAGER_PROFILE", "EngineProfile", "MeasuredAcceptance", "Plan", "Priors",
    "RecommendRequest", "VLLM_PROFILE", "calibrate", "default_priors", "load_catalogs", "load_published",
    "recommend", "slug", "to_deployment",
]
