"""The planner: decision tree + performance model behind `specops recommend`.

    from specops.planner import RecommendRequest, recommend
    plan = recommend(RecommendRequest(model="llama-3.1-8b-instruct", gpu="H100"))

Inputs are explicit: ``recommend(request, catalogs=..., priors=..., calibration=...)``; defaults are
the shipped playbooks (catalogs, published priors, decision tree) and the vLLM engine profile.

The names below load on first use (PEP 562): importing one submodule (``specops.planner.types``,
``specops.planner.catalog``) does not import the performance model and the tree.
"""

from __future__ import annotations

import sys
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING

_WHERE = {
    "Catalogs": "catalog", "load_catalogs": "catalog",
    "EAGER_PROFILE": "perfmodel", "VLLM_PROFILE": "perfmodel", "EngineProfile": "perfmodel",
    "AcceptancePrior": "priors", "Priors": "priors", "calibrate": "priors", "default_priors": "priors",
    "load_published": "priors",
    "recommend": "recommend",
    "slug": "render", "to_deployment": "render",
    "MeasuredAcceptance": "types", "Plan": "types", "RecommendRequest": "types",
}

__all__ = [
    "AcceptancePrior", "Catalogs", "EAGER_PROFILE", "EngineProfile", "MeasuredAcceptance", "Plan", "Priors",
    "RecommendRequest", "VLLM_PROFILE", "calibrate", "default_priors", "load_catalogs", "load_published",
    "recommend", "slug", "to_deployment",
]

if TYPE_CHECKING:
    from specops.planner.catalog import Catalogs, load_catalogs
    from specops.planner.perfmodel import EAGER_PROFILE, VLLM_PROFILE, EngineProfile
    from specops.planner.priors import AcceptancePrior, Priors, calibrate, default_priors, load_published
    from specops.planner.recommend import recommend
    from specops.planner.render import slug, to_deployment
    from specops.planner.types import MeasuredAcceptance, Plan, RecommendRequest


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(import_module(f"specops.planner.{_WHERE[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'specops.planner' has no attribute {name!r}")


class _Package(ModuleType):
    """``specops.planner.recommend`` is both a submodule and the function: loading the submodule must not
    replace the package's ``recommend`` (the function), as the eager imports did before."""

    def __setattr__(self, name: str, value) -> None:
        if name == "recommend" and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
