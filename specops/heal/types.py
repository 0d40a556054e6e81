"""Data types of the heal capability: one engine measurement, a canary, one step, one heal run."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from specops.heal.sequential import Verdict
from specops.models import Strict
from specops.retrain.types import Comparison, Decision, DraftAcceptance

Handover = Literal["restart", "adopt"]


_Model = Strict


class EngineAcceptance(_Model):
    """Acceptance one running engine showed on a prompt set: deltas of its own spec-decode counters."""

    deployment: str = Field(description="Deployment measured.")
    endpoint: str = Field(description="Base URL measured.")
    draft: str | None = Field(description="Draft NAME@VERSION it served.")
    acceptance: DraftAcceptance = Field(description="accepted / drafted tokens and per-position rates from /metrics.")
    seconds: float = Field(description="Wall time of the prompt set (noisy on CPU; never asserted).")


class CanaryResult(_Model):
    """Incumbent and candidate measured one after the other, through the engine, on the same prompts."""

    deployment: str = Field(description="The deployment being healed (the incumbent).")
    canary: str = Field(description="Name of the canary deployment (the same spec with the candidate draft).")
    canary_endpoint: str = Field(description="Base URL of the canary engine.")
    canary_running: bool = Field(description="The canary engine is still running (promotion may adopt it).")
    candidate: str = Field(description="Candidate draft NAME@VERSION.")
    target: str = Field(description="Target NAME@VERSION both engines serve.")
    incumbent: EngineAcceptance | None = Field(description="The incumbent engine (None: it was not serving).")
    candidate_run: EngineAcceptance = Field(description="The canary engine.")
    comparison: Comparison = Field(description="The two acceptances as retrain's Comparison.")
    decision: Decision = Field(description="promote or rollback, with the reason.")
    started_in_s: float | None = Field(None, description="Seconds the canary engine took to become healthy.")
    verdict: Verdict | None = Field(None, description="The sequential test's verdict (None: a point comparison).")
    canary_test_id: int | None = Field(None, description="Registry row of the test (table canary_test).")
    traffic: str | None = Field(None, description="Where the test's samples came from (replayed prompts, locally).")


class HealStep(_Model):
    """One step of a heal run, as recorded in the event log (kind ``heal.step``)."""

    step: Literal["resolve-target", "retrain", "train-validation", "canary", "promote", "rollback"] = Field(
        description="Which step.")
    status: Literal["ok", "failed", "skipped"] = Field(description="How it ended.")
    detail: str = Field(description="What happened, in one line.")
    seconds: float = Field(description="Wall time of the step.")


class HealOutcome(_Model):
    """What one heal run did."""

    deployment: str = Field(description="Deployment healed.")
    status: Literal["promoted", "rolled-back", "dry-run"] = Field(description="The end state.")
    live_target: str | None = Field(None, description="Target NAME@VERSION the deployment serves.")
    incumbent_draft: str | None = Field(None, description="Draft served before.")
    candidate_draft: str | None = Field(None, description="Draft trained by this run.")
    serving_draft: str | None = Field(None, description="Draft the deployment serves now.")
    endpoint: str | None = Field(None, description="Where the deployment serves now.")
    retrain_job: int | None = Field(None, description="Retraining job id.")
    steps: list[HealStep] = Field(default_factory=list, description="Steps in order.")
    canary: CanaryResult | None = Field(None, description="The engine canary, when it ran.")
    reason: str = Field("", description="Why it ended this way.")
    plan: list[str] = Field(default_factory=list, description="Dry run: what would run.")
    seconds: float = Field(0.0, description="Wall time of the whole run.")
