"""Shared data types used across capabilities (defined once).

Capability-specific types live in their packages (``planner.types``, ``engines.spec``, ...).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DEPLOYMENT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
"""The one rule for a deployment name, everywhere (specs, ``deployment register``, ``--canary-of``,
``lineage import``): a DNS-1123 label — lowercase letters, digits and ``-``, starting and ending with a
letter or digit, at most 63 characters. It names a Kubernetes object, a label value and a folder
(``$SPECOPS_HOME/deployments/<name>/``), so it must be safe as all three."""

NAME_RULE = ('lowercase letters, digits and "-", starting and ending with a letter or digit, '
             "at most 63 characters (a DNS-1123 label)")


def check_deployment_name(name: object, what: str = "deployment name") -> str:
    """``name`` when it follows :data:`DEPLOYMENT_NAME`; else an InputError (exit 2) that names the rule."""
    from specops.errors import InputError

    if not isinstance(name, str) or not DEPLOYMENT_NAME.match(name):
        shown = repr(name) if not isinstance(name, str) else '"' + name[:80].encode("unicode_escape").decode() + (
            '..."' if len(name) > 80 else '"')
        raise InputError(f"{what} {shown} is not valid", f"use {NAME_RULE}")
    return name


STATUS_WORDS = {"pass": "pass", "ok": "pass", "warn": "warn", "fail": "fail", "error": "could not evaluate",
                "skipped": "skipped"}
"""The one status vocabulary people read in gate, validate, runbook and monitor output: pass, warn, fail,
could not evaluate (and skipped by a profile). Severity (error/warning/info) is a separate column: it
says what a failure would mean, not what happened. The JSON keeps the short values (``error`` = could
not evaluate)."""


def status_word(status: str, severity: str | None = None) -> str:
    """``status`` in :data:`STATUS_WORDS`; a failed check whose severity is not ``error`` is a ``warn`` (it is
    reported and fails nothing)."""
    if status == "fail" and severity not in (None, "error"):
        return "warn"
    return STATUS_WORDS.get(status, status)


def label_problem(value: object) -> str | None:
    """What makes ``value`` unfit as a name shown in tables and stored in the registry (a model name,
    a version, a served name): not text, empty, surrounding white space, or a character that is
    invisible or moves the text (a tab, a line break, a zero-width space, a bidi override); None when fine."""
    import unicodedata

    if not isinstance(value, str) or not value:
        return "is empty" if value == "" else "is not text"
    if value != value.strip():
        return "starts or ends with white space"
    for ch in value:
        cat = unicodedata.category(ch)
        if cat[0] == "C" or cat in ("Zl", "Zp") or (ch.isspace() and ch != " "):
            return f"contains U+{ord(ch):04X} ({unicodedata.name(ch, 'a control character').lower()})"
    return None


def check_label(value: object, what: str) -> str:
    """``value`` when :func:`label_problem` finds nothing; else an InputError (exit 2) naming it."""
    from specops.errors import InputError

    problem = label_problem(value)
    if problem:
        shown = str(value)[:80].encode("unicode_escape").decode()
        raise InputError(f'{what} "{shown}" {problem}',
                         "use printable characters: no tabs, line breaks or invisible characters")
    return value  # type: ignore[return-value]


class Strict(BaseModel):
    """The one strict base: unknown fields are refused (a typo in a config or spec is an error, not
    ignored). Every pydantic model in specops derives from it (add ``model_config =
    ConfigDict(extra="forbid", ...)`` only to add further options)."""

    model_config = ConfigDict(extra="forbid")


Severity = Literal["info", "warning", "error"]

Outcome = Literal["pass", "fail", "could not evaluate"]
"""Every verdict is one of these three; "could not evaluate" is never shown or counted as a pass."""

EXIT_CODES: dict[str, int] = {"pass": 0, "fail": 1, "could not evaluate": 2}
"""The CLI's exit code for a verdict (3 is an internal error, 130 an interruption)."""


class Finding(Strict):
    """One judgement from a lineage check, a checklist, a detector or a runbook."""

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
