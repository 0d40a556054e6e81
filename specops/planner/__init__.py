"""The planner: decision tree + performance model behind `specops recommend`.

    from specops.planner import RecommendRequest, recommend
    plan = recommend(RecommendRequest(model="llama-3.1-8b-instruct", gpu="H100"))

Inputs are explicit: ``recommend(request, catalogs=..., priors=..., calibration=...)``; defaults are
the shipped playbooks (catalogs, published priors, decision tree) and the vLLM engine profile.
"""

from __future__ import annotations

from specops.planner.catalog import Catalogs, load_catalogs
from specops.planner.perfmodel import EAGER_PROFILE, VLLM_PROFILE, EngineProfile
from specops.planner.priors import AcceptancePrior, Priors, calibrate, default_priors, load_published
from specops.planner.recommend import recommend
from specops.planner.render import slug, to_deployment
from specops.planner.types import MeasuredAcceptance, Plan, RecommendRequest

__all__ = [
    "AcceptancePrior", "Catalogs", "EAGER_PROFILE", "EngineProfile", "MeasuredAcceptance", "Plan", "Priors",
    "RecommendRequest", "VLLM_PROFILE", "calibrate", "default_priors", "load_catalogs", "load_published",
    "recommend", "slug", "to_deployment",
]
