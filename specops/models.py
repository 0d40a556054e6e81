"""Shared data types used across capabilities (defined once).

Capability-specific types live in their packages (``planner.types``, ``engines.spec``, ...).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Severity = Literal["info", "warning", "error"]


class Finding(BaseModel):
    """One judgement from a lineage check, a checklist, a detector or a runbook."""

    model_config = ConfigDict(extra="forbid")

    code: str = Field(description="Stable machine-readable code, e.g. STALE_DRAFT.")
    severity: Severity = Field(description="info, warning or error (error = incompatible/failed).")
    message: str = Field(description="What was found.")
    fix: str | None = Field(default=None, description="How to fix it (the `To fix:` text).")
    evidence: dict = Field(default_factory=dict, description="Numbers and names behind the finding.")

    def one_line(self) -> str:
        text = f"[{self.severity}] {self.code}: {self.message}"
        if self.fix:
            text += f" To fix: {self.fix}"
        return text
