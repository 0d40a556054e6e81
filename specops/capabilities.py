"""Which speculative methods, flags, config fields, KV dtypes and metrics exist in which vLLM release.

Data, not code: ``playbooks/vllm/capabilities.csv`` (kind, name, first_version, last_version,
evidence, confidence, notes), read from the source of every vLLM release 0.2.0–0.33.0. Rows of kind
``bug`` form the known-bug table. Evidence travels with every answer.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import lru_cache

from specops.errors import CapabilityError, InputError
from specops.playbooks import playbook_path

DEFAULT_VLLM_VERSION = "0.33.0"

Version = tuple[int, int, int]


def parse_version(text: str) -> Version:
    """'0.33' / '0.33.0' / 'v0.33.0rc1' -> (0, 33, 0). Bad input -> InputError."""
    m = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.(\d+))?(?:[.+-]?(?:rc|post|dev|a|b)?\w*)?", str(text).strip())
    if not m:
        raise InputError(f'"{text}" is not a vLLM version', "give it as X.Y.Z, e.g. --vllm-version 0.33.0")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def format_version(v: Version) -> str:
    return ".".join(str(x) for x in v)


@dataclass(frozen=True)
class Capability:
    kind: str
    name: str
    first: Version | None
    last: Version | None
    evidence: str
    confidence: str
    notes: str

    def present_in(self, v: Version) -> bool:
        if self.first is None:
            return False
        return self.first <= v and (self.last is None or v <= self.last)

    def span(self) -> str:
        first = format_version(self.first) if self.first else "?"
        return f"{first}–{format_version(self.last)}" if self.last else f"{first} and later"


def _opt_version(text: str) -> Version | None:
    text = (text or "").strip()
    if not text:
        return None
    try:
        return parse_version(text)
    except InputError:
        return None


@lru_cache(maxsize=4)
def _load(path_str: str) -> tuple[Capability, ...]:
    rows = []
    with open(path_str, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            rows.append(Capability(
                kind=row["kind"].strip(), name=row["name"].strip(),
                first=_opt_version(row["first_version"]), last=_opt_version(row["last_version"]),
                evidence=row.get("evidence", ""), confidence=row.get("confidence", ""),
                notes=row.get("notes", ""),
            ))
    return tuple(rows)


class CapabilityTable:
    """Query the capability and known-bug tables."""

    def __init__(self, rows: tuple[Capability, ...] | None = None) -> None:
        self.rows = rows if rows is not None else _load(str(playbook_path("vllm", "capabilities.csv")))

    def lookup(self, kind: str, name: str) -> Capability | None:
        for row in self.rows:
            if row.kind == kind and row.name == name:
                return row
        return None

    def has(self, kind: str, name: str, version: str | Version) -> bool:
        v = parse_version(version) if isinstance(version, str) else version
        row = self.lookup(kind, name)
        return bool(row and row.present_in(v))

    def names(self, kind: str, version: str | Version | None = None) -> list[str]:
        v = parse_version(version) if isinstance(version, str) else version
        return [r.name for r in self.rows if r.kind == kind and (v is None or r.present_in(v))]

    def require(self, kind: str, name: str, version: str | Version) -> Capability:
        """Return the row, or raise CapabilityError naming the versions that have it."""
        v = parse_version(version) if isinstance(version, str) else version
        row = self.lookup(kind, name)
        vs = format_version(v)
        if row is None:
            from specops.errors import did_you_mean

            hint = did_you_mean(name, self.names(kind))
            raise CapabilityError(f'unknown {kind.replace("_", " ")} "{name}" for vLLM.{hint}',
                                  f"use one of: {', '.join(self.names(kind, v))}")
        if not row.present_in(v):
            raise CapabilityError(
                f'{kind.replace("_", " ")} "{name}" is not available in vLLM {vs} (it exists in {row.span()})',
                f"choose another {kind.replace('_', ' ')} or pin --vllm-version to a release in {row.span()}",
            )
        return row

    def runnable_method(self, method: str, version: str | Version) -> tuple[bool, str]:
        """A method can be in the config yet refused by the engine (known 'bug' rows say so)."""
        v = parse_version(version) if isinstance(version, str) else version
        if v >= (0, 8, 2) and not self.has("method", method, v):
            return False, f"method {method} not in vLLM {format_version(v)}"
        for bug in self.bugs(v):
            text = bug.name.lower()
            if f"method {method} " in text and ("refuses" in text or "no v1 proposer" in text):
                return False, bug.name
        return True, ""

    def bugs(self, version: str | Version) -> list[Capability]:
        v = parse_version(version) if isinstance(version, str) else version
        return [r for r in self.rows if r.kind == "bug" and r.present_in(v)]


@lru_cache(maxsize=1)
def default_table() -> CapabilityTable:
    return CapabilityTable()
