"""Checklists, profiles and results: the data model of ``specops validate`` and ``specops gate``.

A checklist (``playbooks/checklists/<stage>.yaml``) is a list of checks; each check names a kind
(what evaluates it), a threshold (an operator and either a literal or a *profile* number) and a
severity. Profiles (``playbooks/profiles.yaml``) hold every number, so the same checklist runs on an
H100 fleet and on the tiny CPU test models with thresholds honest for each.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

from pydantic import Field, field_validator, model_validator

from specops.models import Strict

Kind = Literal["metric", "benchmark", "lineage", "config", "output_equality", "record"]
Op = Literal[">", ">=", "<", "<=", "=="]
Status = Literal["pass", "warn", "fail", "error", "skipped"]
"""A check's outcome (not its severity): pass; warn (passed, with something named to watch for); fail;
error = could not evaluate (never a pass); skipped (by the profile). Shown to people with
:func:`specops.models.status_word`."""
CheckSeverity = Literal["error", "warning", "info"]
Statistic = Literal["p50", "p5", "mean", "min", "latest"]

# What each kind can measure (the evaluator implements exactly these).
METRICS: dict[str, tuple[str, ...]] = {
    "metric": ("per_token_alpha", "position0_acceptance", "acceptance_rate", "mean_acceptance_length",
               "spec_counters_present"),
    "benchmark": ("tpot_speedup", "long_output_tested", "crosscheck_ok"),
    "lineage": ("draft_matches_target",),
    "config": ("fallback_in_place", "gamma_within_profile", "metrics_enabled", "no_known_bugs"),
    "output_equality": ("greedy_tokens_identical",),
    "record": ("baseline_recorded", "recent_acceptance_review", "retrain_plan", "training_data_recorded",
               "offline_acceptance_recorded", "validation_passed_recently"),
}
PERFORMANCE_FLOOR = "performance_floor"
CHECK_ID = re.compile(r"^[a-z][a-z0-9]*(\.[a-z0-9][a-z0-9-]*)+$")


_Strict = Strict


class Profile(_Strict):
    """The numbers one class of deployment is held to."""

    description: str = Field(description="What deployments this profile is for, and why its numbers.")
    acceptance_p50_min: float = Field(ge=0, le=1, description="Per-token α P50 floor (seed 001: 0.70).")
    acceptance_p5_min: float = Field(ge=0, le=1, description="Per-token α P5 floor (seed 001: 0.50).")
    position0_min: float = Field(ge=0, le=1, description="Floor for position-0 acceptance (P50 over windows).")
    tpot_speedup_min: float = Field(gt=0, description="TPOT without / with speculation must reach this.")
    draft_cost_ratio: float = Field(ge=0, le=2, description="c = draft step / target step cost, for the "
                                    "fallback speedup model (Leviathan et al. 2023 §3) when the planner has none.")
    gamma_max: int = Field(ge=1, le=16, description="Largest γ this profile accepts.")
    window_s: float = Field(gt=0, description="Seconds of history the metric checks read.")
    windows: int = Field(ge=1, le=240, description="Sub-windows the history is cut into (P50/P5 are over them).")
    min_windows: int = Field(ge=1, description="Fewer non-empty sub-windows than this: cannot evaluate.")
    min_drafts: int = Field(ge=1, description="Fewer drafts in the whole history than this: cannot evaluate.")
    equality_prompts: int = Field(ge=1, le=64, description="Prompts for the greedy output-equality check.")
    equality_max_tokens: int = Field(ge=1, le=4096, description="Tokens generated per equality prompt.")
    review_max_age_days: float = Field(gt=0, description="The acceptance review must be younger than this.")
    long_output_tokens: int = Field(ge=1, description="What counts as a long output (seed 001: > 4K tokens).")
    gpu: str | None = Field(None, description="GPU (catalog name) for the planner's performance model; without "
                            "one the floor uses the draft_cost_ratio model.")
    batch: int = Field(1, ge=1, description="Concurrency the performance floor is computed at.")
    context_len: int = Field(2048, ge=1, description="Prompt length the performance floor assumes.")
    output_len: int = Field(512, ge=1, description="Output length the performance floor assumes.")
    skip: dict[str, str] = Field(default_factory=dict, description="Check id -> why this profile skips it "
                                 "(shown as skipped, never as a pass).")

    @model_validator(mode="after")
    def _cross(self) -> Profile:
        if self.acceptance_p5_min > self.acceptance_p50_min:
            raise ValueError("acceptance_p5_min is above acceptance_p50_min. To fix: P5 must be the lower floor")
        if self.min_windows > self.windows:
            raise ValueError("min_windows is larger than windows. To fix: lower min_windows or raise windows")
        return self


NUMERIC_PROFILE_FIELDS = tuple(n for n, f in Profile.model_fields.items()
                               if f.annotation in (float, int))


class Profiles(_Strict):
    """playbooks/profiles.yaml."""

    profiles: dict[str, Profile] = Field(description="Profile name -> numbers.")


class Threshold(_Strict):
    """``op`` against a literal ``value`` or a profile number (``profile: acceptance_p50_min``), or the
    performance model's floor (``profile: performance_floor``)."""

    op: Op = Field(description="Comparison: observed OP threshold must hold for a pass.")
    value: float | None = Field(None, description="A literal number (booleans: 1 = true).")
    profile: str | None = Field(None, description="Name of a profile number, or performance_floor.")

    @model_validator(mode="after")
    def _one(self) -> Threshold:
        if (self.value is None) == (self.profile is None):
            raise ValueError("a threshold needs exactly one of value or profile. To fix: e.g. "
                             "`threshold: {op: '>=', profile: acceptance_p50_min}`")
        if self.profile is not None and self.profile not in NUMERIC_PROFILE_FIELDS + (PERFORMANCE_FLOOR,):
            from specops.errors import did_you_mean

            hint = did_you_mean(self.profile, NUMERIC_PROFILE_FIELDS + (PERFORMANCE_FLOOR,))
            raise ValueError(f'unknown profile number "{self.profile}".{hint} To fix: use one of '
                             + ", ".join(NUMERIC_PROFILE_FIELDS + (PERFORMANCE_FLOOR,)))
        return self


class Check(_Strict):
    """One executable checklist item."""

    id: str = Field(description="Stable id, stage.name (e.g. deploy.acceptance-p50).")
    description: str = Field(description="What is checked, for people.")
    source: str = Field(description="Where the rule comes from (seed, issue or URL).")
    kind: Kind = Field(description="metric, benchmark, lineage, config, output_equality or record.")
    measure: str = Field(description="What the kind measures (see specops.checks.types.METRICS).")
    statistic: Statistic = Field("latest", description="For series: p50, p5, mean, min or latest.")
    threshold: Threshold | None = Field(None, description="Pass condition; none for yes/no measures.")
    severity: CheckSeverity = Field("error", description="error: a failure fails the run; warning/info: reported.")
    fix: str = Field(description="The `To fix:` text shown when the check fails.")

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not CHECK_ID.match(v):
            raise ValueError(f'check id "{v}" is not stage.name. To fix: e.g. deploy.acceptance-p50')
        return v

    @field_validator("measure")
    @classmethod
    def _measure_known(cls, v: str, info) -> str:
        kind = info.data.get("kind")
        known = METRICS.get(kind, ())
        if kind and v not in known:
            from specops.errors import did_you_mean

            raise ValueError(f'kind {kind} cannot measure "{v}".{did_you_mean(v, known)} '
                             f"To fix: use one of {', '.join(known)}")
        return v

    @model_validator(mode="after")
    def _measure(self) -> Check:
        numeric = self.measure in NUMERIC_MEASURES
        if numeric and self.threshold is None:
            raise ValueError(f"{self.measure} is a number and needs a threshold. To fix: add "
                             "`threshold: {op: '>=', profile: ...}`")
        if not numeric and self.threshold is not None:
            raise ValueError(f"{self.measure} is yes/no and takes no threshold. To fix: remove `threshold`")
        return self


NUMERIC_MEASURES = ("per_token_alpha", "position0_acceptance", "acceptance_rate", "mean_acceptance_length",
                    "tpot_speedup")


class Checklist(_Strict):
    """playbooks/checklists/<stage>.yaml."""

    name: Literal["train", "deploy", "ops"] = Field(description="Stage.")
    description: str = Field(description="What the stage's checklist is for.")
    checks: list[Check] = Field(min_length=1, description="The checks, in the order they run.")

    @model_validator(mode="after")
    def _unique(self) -> Checklist:
        seen: set[str] = set()
        for c in self.checks:
            if c.id in seen:
                raise ValueError(f'check id "{c.id}" appears twice. To fix: give each check its own id')
            if not c.id.startswith(self.name + "."):
                raise ValueError(f'check id "{c.id}" does not start with "{self.name}.". To fix: rename it')
            seen.add(c.id)
        return self


class CheckResult(_Strict):
    """The outcome of one check (rendered like a Finding everywhere)."""

    id: str
    description: str
    kind: Kind
    severity: CheckSeverity
    source: str
    status: Status = Field(description="pass, warn (passed; something to watch for), fail, error (could not "
                           "evaluate) or skipped (by the profile).")
    message: str = Field(description="What was observed, in words.")
    fix: str | None = Field(None, description="`To fix:` text for fail/error/skipped.")
    observed: float | bool | None = Field(None, description="The number (or yes/no) observed.")
    threshold: float | None = Field(None, description="The number it was compared with.")
    threshold_source: str | None = Field(None, description="Where the threshold comes from.")
    op: Op | None = None
    evidence: dict = Field(default_factory=dict, description="Numbers and names behind the result.")
    seconds: float = Field(0.0, description="How long the check took.")

    def to_finding(self):
        from specops.models import Finding

        severity = ("info" if self.status in ("pass", "skipped") else "warning" if self.status == "warn"
                    else "error" if self.status == "error" else self.severity)
        return Finding(code=self.id, severity=severity, message=f"{self.status}: {self.message}", fix=self.fix,
                       evidence={"status": self.status, "kind": self.kind, "observed": self.observed,
                                 "threshold": self.threshold, "op": self.op,
                                 "threshold_source": self.threshold_source, **self.evidence})


class ValidationReport(_Strict):
    """One checklist run against one deployment."""

    checklist: str
    deployment: str
    profile: str
    started_at: datetime
    finished_at: datetime
    results: list[CheckResult]
    data: dict = Field(default_factory=dict, description="Series behind the plots (per position, over time, "
                       "TPOT by concurrency).")
    recorded_run_id: int | None = Field(None, description="Validation run id in the registry.")

    @property
    def exit_code(self) -> int:
        """1 when a check (severity error) ran and failed: the verdict is known whatever else could not be
        evaluated; else 2 when any check could not be evaluated, or when no check ran at all (every one
        skipped: nothing was looked at, which is not a pass); else 0."""
        if any(r.status == "fail" and r.severity == "error" for r in self.results):
            return 1
        if any(r.status == "error" for r in self.results):
            return 2
        if not any(r.status in ("pass", "warn", "fail") for r in self.results):
            return 2
        return 0

    @property
    def verdict(self) -> str:
        """pass, fail or "could not evaluate" (the exit code in words)."""
        return {0: "pass", 1: "fail"}.get(self.exit_code, "could not evaluate")

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    def counts(self) -> dict[str, int]:
        out = {"pass": 0, "warn": 0, "fail": 0, "error": 0, "skipped": 0}
        for r in self.results:
            out[r.status] += 1
        return out
