"""Executable on-call runbooks (``playbooks/runbooks/*.yaml``).

A runbook is a list of diagnostic steps — ``query`` (a named measurement), ``lineage_check``,
``fingerprint_check``, ``restart_probe`` (only where the deployment allows it) — each producing
findings, then the recommended next action: the first ``next_actions`` entry whose ``if_any`` codes
were found (or the default). The steps' implementations are injected (``StepImplementations``), so
the same runner serves the CLI, tests and other callers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from pydantic import Field, model_validator

from specops.drift.policy import FINDING_CODES
from specops.errors import did_you_mean, unknown
from specops.models import Finding, Strict

StepKind = Literal["query", "lineage_check", "fingerprint_check", "restart_probe"]
QUERIES = ("acceptance", "acceptance_by_label", "per_position", "tpot_vs_baseline", "kv_usage", "load",
           "uptime", "long_context", "collapse", "draft_weight_events", "kv_connector", "k0_schedule", "method_match")
RUNBOOK_CODES = FINDING_CODES + (
    "STALE_DRAFT", "LINEAGE_OK", "FINGERPRINT_MISMATCH", "FINGERPRINT_OK", "RESTART_RECOVERED",
    "RESTART_NO_CHANGE", "SLOWER_THAN_BASELINE", "KV_PRESSURE", "PREEMPTIONS", "HIGH_BATCH_COLLAPSE",
    "LONG_CONTEXT_DROP", "QUERY_OK", "COLLAPSE_STALE_WEIGHTS", "COLLAPSE_KV_WITHOUT_DRAFT_KV", "COLLAPSE_STALE_AFTER_K0",
    "COLLAPSE_METHOD_MISMATCH")


class Step(Strict):
    """One diagnostic step."""


    id: str = Field(description="Step id, unique in the runbook.")
    kind: StepKind = Field(description="query | lineage_check | fingerprint_check | restart_probe.")
    title: str = Field(description="What on-call reads as the step's heading.")
    query: str | None = Field(None, description=f"query steps: one of {', '.join(QUERIES)}.")
    explain: str = Field("", description="What the step tells you and how to read it.")
    skip_if_any: list[str] = Field(default_factory=list, description="Skip when earlier steps found these codes.")

    @model_validator(mode="after")
    def _check(self) -> Step:
        if self.kind == "query":
            if self.query not in QUERIES:
                raise ValueError(f'query step "{self.id}" needs query: one of {", ".join(QUERIES)}'
                                 f"{did_you_mean(self.query or '', QUERIES)} To fix: name a known query")
        elif self.query is not None:
            raise ValueError(f'step "{self.id}" is a {self.kind}; "query" applies to query steps only. '
                             "To fix: remove the query key")
        _codes(self.skip_if_any)
        return self


class NextAction(Strict):
    """A recommendation, chosen when any of ``if_any`` was found (no ``if_any``: the default)."""


    if_any: list[str] = Field(default_factory=list, description="Finding codes that select it.")
    recommend: str = Field(description="What to do next, for a person.")
    command: str | None = Field(None, description="A command to run, if there is one.")

    @model_validator(mode="after")
    def _check(self) -> NextAction:
        _codes(self.if_any)
        return self


def _codes(codes: list[str]) -> None:
    for c in codes:
        if c not in RUNBOOK_CODES:
            raise ValueError(f'unknown finding code "{c}".{did_you_mean(c, RUNBOOK_CODES)} '
                             "To fix: use a code the steps produce (see docs/monitor.md)")


class Runbook(Strict):
    """An on-call runbook."""


    name: str = Field(description="Runbook name (the file name without .yaml).")
    title: str = Field(description="One-line title.")
    summary: str = Field(description="When to use it and what it establishes.")
    triggers: list[str] = Field(default_factory=list, description="Monitor findings that point here.")
    steps: list[Step] = Field(min_length=1, description="Diagnostic steps, in order.")
    next_actions: list[NextAction] = Field(min_length=1, description="Recommendations; the last should be a default.")

    @model_validator(mode="after")
    def _check(self) -> Runbook:
        _codes(self.triggers)
        ids = [s.id for s in self.steps]
        dup = {i for i in ids if ids.count(i) > 1}
        if dup:
            raise ValueError(f"duplicate step ids: {', '.join(sorted(dup))} To fix: give each step its own id")
        if self.next_actions[-1].if_any:
            raise ValueError("the last next_actions entry must be the default (no if_any). "
                             "To fix: add a final entry without if_any")
        return self


class StepImplementations(Protocol):
    """The real diagnostics, injected. Each returns findings (may raise SpecopsError)."""

    def query(self, deployment: str, name: str) -> list[Finding]: ...
    def lineage_check(self, deployment: str) -> list[Finding]: ...
    def fingerprint_check(self, deployment: str) -> list[Finding]: ...
    def restart_probe(self, deployment: str) -> list[Finding]: ...


@dataclass
class RunbookContext:
    """What a runbook run may do: the step implementations, and whether restarts are allowed."""

    steps: StepImplementations
    allow_restart: bool = False


class StepResult(Strict):
    id: str
    kind: StepKind
    title: str
    status: Literal["ran", "skipped", "error"]
    detail: str = ""
    findings: list[Finding] = Field(default_factory=list)


class RunbookResult(Strict):
    runbook: str
    deployment: str
    steps: list[StepResult]
    findings: list[Finding]
    next_action: NextAction

    @property
    def unevaluated(self) -> list[StepResult]:
        """Steps that could not look at what they judge (status ``error``)."""
        return [s for s in self.steps if s.status == "error"]

    @property
    def verdict(self) -> str:
        """"could not evaluate" when any step could not look (the next action rests on part of the
        evidence), else "pass" (the runbook ran; what it found is in the findings)."""
        return "could not evaluate" if self.unevaluated else "pass"

    @property
    def exit_code(self) -> int:
        return 2 if self.unevaluated else 0


def runbook_dir() -> Path:
    from specops.playbooks import playbook_path

    return playbook_path("runbooks")


def list_runbooks() -> list[str]:
    return sorted(p.stem for p in runbook_dir().glob("*.yaml"))


def load_runbook(name_or_path: str | Path) -> Runbook:
    from specops.yamlfile import load_model

    p = Path(name_or_path)
    if p.suffix not in (".yaml", ".yml"):
        p = runbook_dir() / f"{name_or_path}.yaml"
        if not p.is_file():
            raise unknown("runbook", str(name_or_path), list_runbooks())
    return load_model(p, Runbook)


def run_runbook(name: str | Runbook, deployment: str, context: RunbookContext) -> RunbookResult:
    """Run the steps in order, collect findings, pick the recommended next action."""
    from specops.errors import SpecopsError

    book = name if isinstance(name, Runbook) else load_runbook(name)
    impl, results, found = context.steps, [], []
    for step in book.steps:
        seen = {f.code for f in found}
        hit = sorted(seen.intersection(step.skip_if_any))
        if hit:
            results.append(StepResult(id=step.id, kind=step.kind, title=step.title, status="skipped",
                                      detail=f"already found {', '.join(hit)}"))
            continue
        if step.kind == "restart_probe" and not context.allow_restart:
            results.append(StepResult(id=step.id, kind=step.kind, title=step.title, status="skipped",
                                      detail="restart probes are not allowed on this deployment"))
            continue
        try:
            if step.kind == "query":
                fs = impl.query(deployment, step.query or "")
            else:
                fs = getattr(impl, step.kind)(deployment)
        except SpecopsError as exc:
            results.append(StepResult(id=step.id, kind=step.kind, title=step.title, status="error",
                                      detail=exc.one_line()))
            continue
        results.append(StepResult(id=step.id, kind=step.kind, title=step.title, status="ran", findings=fs))
        found += fs
    codes = {f.code for f in found}
    chosen = next(a for a in book.next_actions if not a.if_any or codes.intersection(a.if_any))
    return RunbookResult(runbook=book.name, deployment=deployment, steps=results, findings=found,
                         next_action=chosen)


def render_markdown(book: Runbook) -> str:
    """A runbook for on-call reading (docs/monitor.md is generated from these)."""
    lines = [f"### {book.name}: {book.title}", "", book.summary.strip(), ""]
    if book.triggers:
        lines += [f"Raised by: {', '.join(f'`{t}`' for t in book.triggers)}.", ""]
    lines.append(f"Run: `specops runbook run {book.name} --deployment NAME`")
    lines.append("")
    for i, s in enumerate(book.steps, 1):
        what = f"query `{s.query}`" if s.kind == "query" else s.kind.replace("_", " ")
        extra = " (only where the deployment allows restarts)" if s.kind == "restart_probe" else ""
        skip = f" Skipped when {', '.join(f'`{c}`' for c in s.skip_if_any)} was already found." if s.skip_if_any else ""
        lines.append(f"{i}. **{s.title}** — {what}{extra}. {s.explain.strip()}{skip}".rstrip())
    lines += ["", "Next action:", ""]
    for a in book.next_actions:
        cond = f"if {', '.join(f'`{c}`' for c in a.if_any)}" if a.if_any else "otherwise"
        cmd = f" Run: `{a.command}`" if a.command else ""
        lines.append(f"- {cond}: {a.recommend.strip()}{cmd}")
    return "\n".join(lines) + "\n"
