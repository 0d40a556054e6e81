"""Shared data types used across capabilities (defined once).

Capability-specific types live in their packages (``planner.types``, ``engines.spec``, ...).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Severity = Literal["info", "warning", "error"]

Outcome = Literal["pass", "fail", "could not evaluate"]
"""Every verdict is one of these three; "could not evaluate" is never shown or counted as a pass."""

EXIT_CODES: dict[str, int] = {"pass": 0, "fail": 1, "could not evaluate": 2}
"""The CLI's exit code for a verdict (3 is an internal error, 130 an interruption)."""


class Finding(BaseModel):
    """One judgement from a lineage check, a checklist, a detector or a runbook."""

    model_config = ConfigDict(extra="forbid")

    code: str = Field(description="Stable machine-readable code, e.g. STALE_DRAFT.")
    severity: Severity = Field(description="info, warning or error (error = incompatible/failed).")
    message: str = Field(description="What was found.")
    fix: str | None = Field(default=None, description="How to fix it (the `To fix:` text).")
    evidence: dict = Field(default_factory=dict, description="Numbers and names behind the finding.")
    evaluated: bool = Field(True, description="False: what this finding judges could not be looked at (a "
                            "verdict resting on it is \"could not evaluate\", never a pass).")

    def one_line(self) -> str:
        tag = self.severity if self.evaluated else "could not evaluate"
        text = f"[{tag}] {self.code}: {self.message}"
        if self.fix:
            text += f" To fix: {self.fix}"
        return text


def verdict(findings: list[Finding]) -> Outcome:
    """fail when an evaluated finding is an error; else "could not evaluate" when any finding could
    not look; else pass."""
    if any(f.severity == "error" and f.evaluated for f in findings):
        return "fail"
    if any(not f.evaluated for f in findings):
        return "could not evaluate"
    return "pass"
