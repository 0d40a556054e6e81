"""Policies as playbooks (``playbooks/policies/*.yaml``): which findings lead to which actions.

Actions are carried out by an injected ``ActionExecutor`` (the caller wires the real redeploy,
restart and retraining); ``ActionRunner`` makes them idempotent (an action runs once per finding
episode, then not again within its cooldown), honours dry-run, retries transient failures after the
delay they ask for, and records every action with its reason in the event sink.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import Field, model_validator

from specops.drift.detectors import DetectionConfig
from specops.drift.gamma import GammaPolicy
from specops.drift.outcomes import Fatal, Retry
from specops.errors import did_you_mean, unknown
from specops.models import Finding, Severity, Strict

log = logging.getLogger("specops.monitor")

FINDING_CODES = (
    "ACCEPTANCE_DROP", "ACCEPTANCE_BELOW_FLOOR", "BELOW_BREAK_EVEN", "ACCEPTANCE_RECOVERED",
    "CHANGED_MODEL", "ENGINE_STATE_SUSPECTED", "ENGINE_STATE_DECAY", "WORKLOAD_DRIFT",
    "DRIFT_CAUSE_UNKNOWN", "GAMMA_CHANGE_PROPOSED", "DEPLOYMENT_UNSEEN", "ACCEPTANCE_COLLAPSE",
    "GAIN_DROP",
)
ActionKind = Literal["notify", "retune_gamma", "disable_speculation", "restart_probe", "open_retraining"]
_RANK = {"info": 0, "warning": 1, "error": 2}


class ActionSpec(Strict):
    """One action of a rule."""


    kind: ActionKind = Field(description="notify | retune_gamma | disable_speculation | restart_probe | open_retraining.")
    webhook_url_env: str | None = Field(
        None, description="notify: environment variable holding a webhook URL (secrets by reference, never inline).")
    cooldown_minutes: float = Field(360, ge=0, description="Do not repeat this action for the same finding within it.")
    heal: bool = Field(False, description="open_retraining: run the whole heal loop (retrain → validate → canary → "
                       "promote or roll back, `specops heal` with its defaults, under the heal's lease) instead of "
                       "only the retraining job; local deployments.")

    @model_validator(mode="after")
    def _heal_only_for_retraining(self) -> ActionSpec:
        if self.heal and self.kind != "open_retraining":
            raise ValueError(f"heal: true is an option of open_retraining, not of {self.kind}. "
                             "To fix: remove it, or use kind: open_retraining")
        return self


class Rule(Strict):
    """Findings (by code, at or above a severity) -> actions, in order."""


    name: str = Field(description="Rule name, shown in the event log.")
    when: list[str] = Field(min_length=1, description="Finding codes that trigger the rule.")
    min_severity: Severity = Field("info", description="Lowest severity that triggers it.")
    actions: list[ActionSpec] = Field(min_length=1, description="Actions to take, in order.")

    @model_validator(mode="after")
    def _known_codes(self) -> Rule:
        for code in self.when:
            if code not in FINDING_CODES:
                raise ValueError(f'unknown finding code "{code}".{did_you_mean(code, FINDING_CODES)} '
                                 f"To fix: use one of {', '.join(FINDING_CODES)}")
        return self


class Policy(Strict):
    """A drift policy: detector settings, γ adaptation and the finding -> action rules."""


    name: str = Field(description="Policy name.")
    description: str = Field("", description="What this policy is for.")
    dry_run: bool = Field(False, description="Record what would happen, do nothing.")
    allow_restart_probe: bool = Field(False, description="Restart probes may run (deployments must allow it too).")
    allow_disable_speculation: bool = Field(False, description="Speculation may be switched off (redeploy).")
    detection: DetectionConfig = Field(default_factory=DetectionConfig, description="Detector settings.")
    gamma: GammaPolicy = Field(default_factory=GammaPolicy, description="Adaptive γ settings.")
    rules: list[Rule] = Field(default_factory=list, description="Finding -> action rules.")

    @model_validator(mode="after")
    def _allowed(self) -> Policy:
        for rule in self.rules:
            for a in rule.actions:
                if a.kind == "restart_probe" and not self.allow_restart_probe:
                    raise ValueError(f'rule "{rule.name}" restarts engines but allow_restart_probe is false. '
                                     "To fix: set allow_restart_probe: true or remove the restart_probe action")
                if a.kind == "disable_speculation" and not self.allow_disable_speculation:
                    raise ValueError(f'rule "{rule.name}" disables speculation but allow_disable_speculation is '
                                     "false. To fix: set allow_disable_speculation: true or remove the action")
                if a.kind == "retune_gamma" and self.gamma.mode != "apply":
                    raise ValueError(f'rule "{rule.name}" retunes γ but gamma.mode is "{self.gamma.mode}". '
                                     'To fix: set gamma.mode: apply, or use notify for proposals')
        return self


def load_policy(name_or_path: str | Path) -> Policy:
    """Load ``playbooks/policies/<name>.yaml`` or a file path; errors name file and line."""
    from specops.playbooks import playbook_path
    from specops.yamlfile import load_model

    p = Path(name_or_path)
    if p.suffix not in (".yaml", ".yml"):
        folder = playbook_path("policies")
        p = folder / f"{name_or_path}.yaml"
        if not p.is_file():
            raise unknown("policy", str(name_or_path), [f.stem for f in folder.glob("*.yaml")])
    return load_model(p, Policy)


class ActionExecutor(Protocol):
    """The real actions, injected by the caller. Each may raise ``Retry`` or ``Fatal``."""

    def notify(self, deployment: str, finding: Finding, webhook_url: str | None) -> None: ...
    def retune_gamma(self, deployment: str, proposal: dict) -> None: ...
    def disable_speculation(self, deployment: str, reason: str) -> None: ...
    def restart_probe(self, deployment: str, reason: str) -> None: ...
    def open_retraining(self, deployment: str, reason: str, heal: bool = False) -> None: ...


class EventSink(Protocol):
    def record(self, deployment: str, kind: str, reason: str, data: dict) -> None: ...


class MemoryEvents:
    """An in-memory event log (the registry's event log is wired by the caller)."""

    def __init__(self) -> None:
        self.events: list[dict] = []

    def record(self, deployment: str, kind: str, reason: str, data: dict) -> None:
        self.events.append({"deployment": deployment, "kind": kind, "reason": reason, "data": data})


class ActionRecord(Strict):
    """One action decision, as the cycle report and the event log show it."""


    at: float
    deployment: str
    action: ActionKind
    finding: str = Field(description="The finding code that triggered it.")
    rule: str
    reason: str = Field(description="The finding's message.")
    outcome: Literal["done", "dry-run", "retry", "failed", "refused"]
    detail: str = ""
    episode: float | str | None = Field(None, description="The finding episode (its `since`) the action belongs to.")
    retry_in_s: float | None = Field(None, description="For a retry: seconds until the next attempt.")


def post_webhook(url: str, payload: dict, timeout: float = 5.0) -> None:
    """POST a JSON notification; transient failures become ``Retry``."""
    from specops.errors import MeasurementError
    from specops.metrics.http import exchange

    try:  # one overall deadline: a webhook that drips its answer cannot hold the monitor's cycle
        code = exchange("POST", url, json=payload, deadline_s=timeout, max_bytes=1024 * 1024).status
    except MeasurementError as exc:
        raise Retry(60, f"webhook unreachable: {exc.message}") from None
    if code >= 500:
        raise Retry(60, f"webhook answered {code}")
    if code >= 400:
        raise Fatal(f"webhook refused the notification ({code})")


class NotifyOnlyExecutor:
    """Logs and posts notifications; every other action is refused (``Fatal``) until wired."""

    def notify(self, deployment: str, finding: Finding, webhook_url: str | None) -> None:
        log.warning("%s %s", deployment, finding.one_line())
        if webhook_url:
            post_webhook(webhook_url, {"deployment": deployment, **finding.model_dump()})

    def _unwired(self, what: str) -> None:
        raise Fatal(f"no {what} action is wired in this monitor")

    def retune_gamma(self, deployment: str, proposal: dict) -> None:
        self._unwired("retune_gamma")

    def disable_speculation(self, deployment: str, reason: str) -> None:
        self._unwired("disable_speculation")

    def restart_probe(self, deployment: str, reason: str) -> None:
        self._unwired("restart_probe")

    def open_retraining(self, deployment: str, reason: str, heal: bool = False) -> None:
        self._unwired("open_retraining")


class ActionRunner:
    """Applies a policy's rules to findings, idempotently."""

    def __init__(self, policy: Policy, executor: ActionExecutor, events: EventSink | None = None,
                 restart_allowed: dict[str, bool] | None = None, env: dict[str, str] | None = None) -> None:
        self.policy, self.executor = policy, executor
        self.events = events or MemoryEvents()
        self.restart_allowed = restart_allowed or {}
        self.env = os.environ if env is None else env
        # (deployment, action, finding code) -> (episode key, last run at, retry not before)
        self.ledger: dict[tuple[str, str, str], tuple[Any, float, float]] = {}

    def apply(self, now: float, deployment: str, findings: Sequence[Finding]) -> list[ActionRecord]:
        out = []
        for f in findings:
            for rule in self.policy.rules:
                if f.code in rule.when and _RANK[f.severity] >= _RANK[rule.min_severity]:
                    for spec in rule.actions:
                        rec = self._one(now, deployment, f, rule, spec)
                        if rec is not None:
                            out.append(rec)
        return out

    def _due(self, key: tuple, episode: Any, now: float, cooldown_s: float) -> bool:
        prev = self.ledger.get(key)
        if prev is None:
            return True
        prev_episode, last, retry_after = prev
        if retry_after > 0:
            return now >= retry_after
        return episode != prev_episode and now - last >= cooldown_s

    def _one(self, now: float, deployment: str, f: Finding, rule: Rule, spec: ActionSpec) -> ActionRecord | None:
        key = (deployment, spec.kind, f.code)
        episode = f.evidence.get("since") or f.evidence.get("at") or f.message
        if not self._due(key, episode, now, spec.cooldown_minutes * 60):
            return None
        rec = dict(at=now, deployment=deployment, action=spec.kind, finding=f.code, rule=rule.name, reason=f.message,
                   episode=episode if isinstance(episode, (int, float, str)) else str(episode))
        if spec.kind == "restart_probe" and not self.restart_allowed.get(deployment, False):
            self.ledger[key] = (episode, now, 0.0)
            return self._record(ActionRecord(**rec, outcome="refused",
                                             detail="this deployment does not allow restart probes"))
        if self.policy.dry_run:
            self.ledger[key] = (episode, now, 0.0)
            return self._record(ActionRecord(**rec, outcome="dry-run", detail="dry run: nothing done"))
        try:
            self._execute(deployment, f, spec)
        except Retry as exc:
            self.ledger[key] = (episode, now, now + exc.delay)
            return self._record(ActionRecord(**rec, outcome="retry", retry_in_s=exc.delay,
                                             detail=f"{exc.reason}; retry in {exc.delay:.0f}s"))
        except Fatal as exc:
            self.ledger[key] = (episode, now, 0.0)
            return self._record(ActionRecord(**rec, outcome="failed", detail=exc.reason))
        self.ledger[key] = (episode, now, 0.0)
        return self._record(ActionRecord(**rec, outcome="done"))

    def _execute(self, deployment: str, f: Finding, spec: ActionSpec) -> None:
        ex = self.executor
        if spec.kind == "notify":
            url = self.env.get(spec.webhook_url_env) if spec.webhook_url_env else None
            ex.notify(deployment, f, url)
        elif spec.kind == "retune_gamma":
            ex.retune_gamma(deployment, f.evidence)
        elif spec.kind == "disable_speculation":
            ex.disable_speculation(deployment, f.message)
        elif spec.kind == "restart_probe":
            ex.restart_probe(deployment, f.message)
        elif spec.heal:  # only then: executors written before the option keep their two-argument call
            ex.open_retraining(deployment, f.message, heal=True)
        else:
            ex.open_retraining(deployment, f.message)

    def _record(self, rec: ActionRecord) -> ActionRecord:
        self.events.record(rec.deployment, f"monitor.{rec.action}", rec.reason, rec.model_dump(mode="json"))
        return rec
