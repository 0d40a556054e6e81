"""Which speculative methods, flags, config fields, KV dtypes and metrics exist in which vLLM release.

Data, not code: ``playbooks/vllm/capabilities.csv`` (kind, name, first_version, last_version,
evidence, confidence, notes), read from the source of every vLLM release 0.2.0–0.33.0. Rows of kind
``bug`` form the known-bug table. Evidence travels with every answer.
"""

from __future__ import annotations

import csv
import re
from functools import lru_cache
from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from specops.errors import CapabilityError, ConfigFileError, InputError
from specops.models import Strict
from specops.playbooks import playbook_path

DEFAULT_VLLM_VERSION = "0.33.0"

Version = tuple[int, int, int]


def parse_version(text: str) -> Version:
    """'0.33' / '0.33.0' / 'v0.33.0rc1' -> (0, 33, 0). Bad input -> InputError."""
    m = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.(\d+))?(?:[.+-]?(?:rc|post|dev|a|b)?\w*)?", str(text).strip())
    if not m:
        raise InputError(f'"{text}" is not a vLLM version', "give it as X.Y.Z, e.g. --vllm-version 0.33.0")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


RELEASES: tuple[Version, ...] = tuple(sorted({parse_version(v) for v in (
    "0.1.0 0.1.1 0.1.2 0.1.3 0.1.4 0.1.5 0.1.6 0.1.7 0.2.0 0.2.1 0.2.2 0.2.3 0.2.4 0.2.5 0.2.6 0.2.7 0.3.0 0.3.1 "
    "0.3.2 0.3.3 0.4.0 0.4.1 0.4.2 0.4.3 0.5.0 0.5.1 0.5.2 0.5.3 0.5.4 0.5.5 0.6.0 0.6.1 0.6.2 0.6.3 0.6.4 0.6.5 "
    "0.6.6 0.7.0 0.7.1 0.7.2 0.7.3 0.8.0 0.8.1 0.8.2 0.8.3 0.8.4 0.8.5 0.9.0 0.9.1 0.9.2 0.10.0 0.10.1 0.10.2 "
    "0.11.0 0.11.1 0.11.2 0.12.0 0.13.0 0.14.0 0.14.1 0.15.0 0.15.1 0.16.0 0.17.0 0.17.1 0.18.0 0.18.1 0.19.0 "
    "0.19.1 0.20.0 0.20.1 0.20.2 0.21.0 0.22.0 0.22.1 0.23.0 0.24.0 0.25.0 0.25.1 0.26.0 0.27.0 0.27.1 0.28.0 "
    "0.29.0 0.30.0 0.31.0 0.32.0 0.33.0").split()}))
"""Every vLLM release (X.Y.Z; .postN and 0.9.0.1-style re-uploads fold into their X.Y.Z), from the PyPI
index (`pip index versions vllm`, read 2026-12-01). The capability table covers 0.2.0 onwards."""

OLDEST_TABLED: Version = (0, 2, 0)


def released_version(text: str) -> Version:
    """:func:`parse_version`, and refuse what was never released: anything newer than the newest release
    in :data:`RELEASES`, older than the capability table (0.2.0), or an X.Y.Z missing from the release list
    (e.g. 0.8.9; the fix names that minor's releases)."""
    v = parse_version(text)
    newest = RELEASES[-1]
    if v > newest:
        raise InputError(f"vLLM {text} is newer than the newest release specops knows ({format_version(newest)})",
                         f"use --vllm-version {format_version(newest)} or older (update specops for newer releases)")
    if v < OLDEST_TABLED:
        raise InputError(f"vLLM {text} is older than the capability table (it starts at 0.2.0)",
                         "use --vllm-version 0.2.0 or newer")
    if v not in RELEASES:
        same = [format_version(r) for r in RELEASES if r[:2] == v[:2]]
        fix = f"use one of {', '.join(same)}" if same else f"use a released version, e.g. {format_version(newest)}"
        raise InputError(f"vLLM {format_version(v)} was never released", fix)
    return v


def format_version(v: Version) -> str:
    return ".".join(str(x) for x in v)


Kind = Literal["method", "flag", "field", "kv_dtype", "metric", "bug"]
Effect = Literal["refuse", "mitigate", "warn"]

WHEN_KEYS: dict[str, tuple[str, ...] | None] = {
    "method": None,            # vLLM method names (the method table)
    "kv_dtype": None,          # --kv-cache-dtype values; a trailing * matches a prefix (fp8*, turboquant*)
    "architecture": ("dense", "moe", "hybrid", "sliding_window"),  # hybrid = Mamba/GDN layers
    "prefix_caching": ("on", "off"),
    "cuda_graphs": ("full", "piecewise", "none"),  # none = --enforce-eager
    "data_parallel": ("1", ">1"),
    "model_runner": ("v1", "v2"),
    "kv_connector": ("none", "any"),
    "vocab": ("match", "mismatch"),  # draft vs target vocabulary
    "schedule": ("on", "off"),       # a per-batch γ schedule
    "draft_kv_dtype": ("inherit", "auto", "other"),  # speculative_config.kv_cache_dtype (unset: inherit)
    "adaptive_verification": ("on", "off"),  # speculative_config.enable_adaptive_verification (0.33.0)
    "lora": ("on", "off"),           # --enable-lora
    "pipeline_parallel": ("1", ">1"),
}
"""What a bug row's ``when`` may test, and the values each key takes (None: checked against the method
table or the kv_dtype rows). A fact the caller does not know leaves the row "may apply"."""


class Capability(Strict):
    """One typed row of playbooks/vllm/capabilities.csv. A ``bug`` row carries its effect: ``refuse``
    (the combination is never launched), ``mitigate`` (launched only with ``mitigation``, always with a
    warning naming the issue) or ``warn``; ``when`` says which plans it hits."""

    model_config = ConfigDict(frozen=True)

    kind: Kind
    name: str = Field(min_length=1)
    first: Version | None
    last: Version | None
    evidence: str
    confidence: Literal["high", "medium", "low", ""]
    notes: str = ""
    effect: Effect | None = None
    when: tuple[tuple[str, tuple[str, ...]], ...] = ()
    mitigation: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _bug_rows(self) -> Capability:
        if self.kind == "bug" and self.effect is None:
            raise ValueError(f'bug row "{self.name[:60]}" has no effect (refuse, mitigate or warn)')
        if self.kind != "bug" and (self.effect or self.when or self.mitigation):
            raise ValueError(f'{self.kind} row "{self.name[:60]}": effect/when/mitigation belong to bug rows')
        if self.effect == "mitigate" and not self.mitigation:
            raise ValueError(f'bug row "{self.name[:60]}" mitigates with nothing: fill its mitigation')
        if self.kind == "method":
            from specops.speculation import METHODS

            if self.name not in METHODS:
                raise ValueError(f'method row "{self.name}" is not in the method table (specops/speculation.py)')
        return self

    def present_in(self, v: Version) -> bool:
        if self.first is None:
            return False
        return self.first <= v and (self.last is None or v <= self.last)

    def span(self) -> str:
        first = format_version(self.first) if self.first else "?"
        return f"{first}–{format_version(self.last)}" if self.last else f"{first} and later"

    def condition(self, key: str) -> tuple[str, ...] | None:
        return dict(self.when).get(key)

    def applies(self, facts: dict[str, str | None]) -> bool | None:
        """True when every ``when`` key matches ``facts``; False when one does not; None when a key it
        tests is not among the facts (the row may apply: the caller says so, never assumes not)."""
        unknown = False
        for key, values in self.when:
            fact = facts.get(key)
            if fact is None:
                unknown = True
                continue
            fact = str(fact).lower()
            if not any(fact.startswith(v[:-1]) if v.endswith("*") else fact == v for v in values):
                return False
        return None if unknown else True

    def issue(self) -> str:
        """The row's first issue reference (vllm#NNNN), for warnings."""
        m = re.search(r"#\d+", self.name)
        return f"vllm{m.group(0)}" if m else self.name[:60]


def _opt_version(text: str) -> Version | None:
    text = (text or "").strip()
    if not text:
        return None
    return parse_version(text)


def _parse_when(text: str, line: int) -> tuple[tuple[str, tuple[str, ...]], ...]:
    out = []
    for part in [p.strip() for p in (text or "").split(";") if p.strip()]:
        key, eq, value = part.partition("=")
        key = key.strip()
        values = tuple(v.strip().lower() for v in value.split("|") if v.strip())
        if not eq or key not in WHEN_KEYS or not values:
            raise ConfigFileError(f'capabilities.csv line {line}: "{part}" is not a condition',
                                  f"write key=value[|value] with key one of {', '.join(WHEN_KEYS)}")
        allowed = WHEN_KEYS[key]
        if allowed is not None and any(v not in allowed for v in values):
            raise ConfigFileError(f'capabilities.csv line {line}: {key} takes {", ".join(allowed)}, not "{value}"',
                                  "fix the row")
        out.append((key, values))
    return tuple(out)


@lru_cache(maxsize=4)
def _load(path_str: str) -> tuple[Capability, ...]:
    from pydantic import ValidationError

    rows = []
    with open(path_str, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = {"kind", "name", "first_version", "last_version", "evidence", "confidence", "notes", "effect",
                   "when", "mitigation"} - set(reader.fieldnames or ())
        if missing:
            raise ConfigFileError(f"{path_str}: columns {sorted(missing)} are missing", "restore the header")
        for line, row in enumerate(reader, start=2):
            try:
                rows.append(Capability(
                    kind=row["kind"].strip(), name=row["name"].strip(),
                    first=_opt_version(row["first_version"]), last=_opt_version(row["last_version"]),
                    evidence=row["evidence"] or "", confidence=(row["confidence"] or "").strip(),
                    notes=row["notes"] or "", effect=(row["effect"] or "").strip() or None,
                    when=_parse_when(row["when"], line),
                    mitigation=tuple(m.strip() for m in (row["mitigation"] or "").split(";") if m.strip()),
                ))
            except (ValidationError, InputError) as exc:
                if isinstance(exc, ConfigFileError):
                    raise
                first = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
                raise ConfigFileError(f"{path_str} line {line}: {first}", "fix the row") from None
    table = tuple(rows)
    from specops.speculation import METHODS

    for r in table:
        for key, values in r.when:
            if key == "method" and any(v not in METHODS for v in values):
                raise ConfigFileError(f'capabilities.csv bug row "{r.name[:60]}": method {values} not in the '
                                      "method table", "use vLLM method names")
            if key == "kv_dtype":
                known = [k.name for k in table if k.kind == "kv_dtype"] + ["auto"]
                for v in values:
                    if not any(k.startswith(v[:-1]) if v.endswith("*") else k == v for k in known):
                        raise ConfigFileError(f'capabilities.csv bug row "{r.name[:60]}": kv_dtype "{v}" matches '
                                              "no kv_dtype row", "use a kv_dtype the table lists")
    return table


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
        """A method can be in the config yet refused by the engine: a ``refuse`` bug row whose only
        condition is the method says so."""
        v = parse_version(version) if isinstance(version, str) else version
        if v >= (0, 8, 2) and not self.has("method", method, v):
            return False, f"method {method} not in vLLM {format_version(v)}"
        for bug in self.bugs(v, effect="refuse"):
            if [k for k, _ in bug.when] == ["method"] and method in (bug.condition("method") or ()):
                return False, bug.name
        return True, ""

    def bugs(self, version: str | Version, *, effect: str | None = None,
             facts: dict[str, str | None] | None = None) -> list[Capability]:
        """Bug rows present in ``version`` (of one effect); with ``facts``, those that apply or may apply
        (:meth:`Capability.applies` is not False)."""
        v = parse_version(version) if isinstance(version, str) else version
        return [r for r in self.rows if r.kind == "bug" and r.present_in(v) and (effect is None or r.effect == effect)
                and (facts is None or r.applies(facts) is not False)]


@lru_cache(maxsize=1)
def default_table() -> CapabilityTable:
    return CapabilityTable()
