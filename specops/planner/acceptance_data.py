"""The acceptance table, playbooks/data/acceptance_2026-12.csv: one row schema (playbooks/README.md), parsed.

Read by :mod:`specops.planner.acceptance` (the model) and by the tests that check the table's provenance.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

DATA_FILE = "acceptance_2026-12.csv"
EXCLUDED_FLAGS = ("pathological", "sanity-run", "lower-bound-only", "record-only")
"""Rows kept for the record but not fitted: a two-token loop (tokenspeed #1305), the speculators tutorial's
5K-sample sanity runs, rows that publish a speedup only (a lower bound on τ, see :func:`lower_bounds`), and rows
the model cannot represent (``record-only``: SuffixDecoding's agentic τ 6.3-7.8 at an adaptive, unstated length,
above what the chain default γ=3 gives)."""
ALPHA_IID_GAMMA = 3
"""The γ an ``alpha-iid`` row without γ is solved and scored at: Leviathan's α = E(β) is defined under i.i.d.
acceptance, so τ = (1 − α^(γ+1)) / (1 − α) holds at every γ; 3 is vLLM's common K (as the chain default)."""


@dataclass(frozen=True)
class AcceptanceRow:
    """One row of playbooks/data/acceptance_2026-12.csv (schema: playbooks/README.md)."""

    id: str
    source: str
    source_id: str
    url: str
    location: str
    method: str
    variant: str
    structure: str
    gamma: int | None
    tree_tokens: int | None
    task: str
    task_class: str
    target: str
    target_family: str
    target_params_b: float | None
    draft: str
    draft_params_b: float | None
    draft_trainer: str
    temperature: float | None
    engine: str
    tau: float | None
    accepted_rate: float | None
    alpha: float | None
    per_position: tuple[float, ...]
    per_position_kind: str
    tau_lower_bound: float | None
    speedup: float | None
    speedup_overall: float | None
    flags: frozenset[str]
    notes: str
    from_file: str = ""   # where a row copied from an older table (or ../shared/data) stands there

    @property
    def gamma_stated(self) -> bool:
        return self.gamma is not None

    @property
    def repetitive(self) -> bool:
        """A workload that repeats across requests (``repetitive-workload``: the source says a cross-request cache of
        near-identical requests drives its acceptance, e.g. TensorRT-LLM blog 7's translation set)."""
        return "repetitive-workload" in self.flags

    def tau_bounds(self) -> tuple[float, float] | None:
        """(lower, upper) of τ per decode step for a ``tau-bracketed`` row: a lookup draft that drafts only on a
        match publishes accepted/drafted r at up to γ tokens, so 1 + r·γ bounds τ from above; its batch-1 speedup
        (``tau_lower_bound``) bounds it from below."""
        if "tau-bracketed" not in self.flags or not (self.gamma and self.accepted_rate and self.tau_lower_bound):
            return None
        hi = 1.0 + self.accepted_rate * self.gamma
        return (min(self.tau_lower_bound, hi), hi)

    @property
    def used(self) -> bool:
        return not any(f in self.flags for f in EXCLUDED_FLAGS)

    def published_tau(self) -> float | None:
        """τ as published, or from the row's own rate/α and γ (exact for a chain); None otherwise."""
        if self.tau is not None:
            return self.tau
        bounds = self.tau_bounds()
        if bounds:  # the geometric middle of the bracket (its half-width in ln is printed by the bench)
            return (bounds[0] * bounds[1]) ** 0.5
        g = self.gamma or (ALPHA_IID_GAMMA if "alpha-iid" in self.flags else None)
        if g and self.accepted_rate is not None:
            return 1.0 + self.accepted_rate * g
        if g and self.alpha is not None:
            a = self.alpha
            return (1 - a ** (g + 1)) / (1 - a) if a < 1 else g + 1.0
        return None

    def conditional(self) -> list[float]:
        """Per-position conditional acceptance c_k (P(k-th accepted | the first k−1 were))."""
        p = list(self.per_position)
        if not p:
            return []
        if self.per_position_kind == "conditional":
            return p
        out, prev = [], 1.0
        for x in p:
            if prev <= 0:
                break
            out.append(x / prev)
            prev = x
        return out


def _f(text: str) -> float | None:
    m = re.match(r"\s*(-?\d+(?:\.\d+)?)", text or "")
    return float(m.group(1)) if m else None


def _i(text: str) -> int | None:
    x = _f(text)
    return int(x) if x is not None else None


def parse(raw: dict) -> AcceptanceRow:
    return AcceptanceRow(
        id=raw["id"], source=raw["source"], source_id=raw["source_id"], url=raw["url"], location=raw["location"],
        method=raw["method"], variant=raw["variant"], structure=raw["structure"] or "chain", gamma=_i(raw["gamma"]),
        tree_tokens=_i(raw["tree_tokens"]), task=raw["task"], task_class=raw["task_class"], target=raw["target"],
        target_family=raw["target_family"], target_params_b=_f(raw["target_params_b"]), draft=raw["draft"],
        draft_params_b=_f(raw["draft_params_b"]), draft_trainer=raw["draft_trainer"], temperature=_f(raw["temperature"]),
        engine=raw["engine"], tau=_f(raw["tau"]), accepted_rate=_f(raw["accepted_rate"]), alpha=_f(raw["alpha"]),
        per_position=tuple(float(x) for x in raw["per_position"].split("/")) if raw["per_position"] else (),
        per_position_kind=raw["per_position_kind"], tau_lower_bound=_f(raw["tau_lower_bound"]),
        speedup=_f(raw.get("speedup", "")), speedup_overall=_f(raw.get("speedup_overall", "")),
        flags=frozenset(f for f in raw["flags"].split(";") if f), notes=raw["notes"], from_file=raw.get("from_file", ""))


def load_rows(path: str | Path | None = None) -> list[AcceptanceRow]:
    from specops.playbooks import playbook_path

    with open(path or playbook_path("data", DATA_FILE), newline="", encoding="utf-8") as f:
        return [parse(r) for r in csv.DictReader(f)]


def family_of(model_id: str | None) -> str:
    """A target's family as the data names it (``target_family``), from a hub id or catalog name."""
    t = (model_id or "").lower()
    for keys, fam in ((("vicuna", "llama-2", "llama2"), "llama2"), (("llama-4", "llama4"), "llama4"),
                      (("llama-3", "llama3", "llama 3"), "llama3"), (("qwen3-vl",), "qwen3-vl"),
                      (("qwen3.5", "qwen3.6", "qwen3.8"), "qwen3.5+"), (("qwen3",), "qwen3"), (("qwen2.5",), "qwen2.5"),
                      (("deepseek",), "deepseek"), (("gpt-oss",), "gpt-oss"), (("mixtral",), "mixtral"),
                      (("minimax",), "minimax"), (("kimi",), "kimi"), (("gemma",), "gemma"), (("minicpm",), "minicpm")):
        if any(k in t for k in keys):
            return fam
    return ""


def params_of(model_id: str | None) -> float | None:
    """A model's size in billions as its name states it ('Llama-3.1-70B-Instruct' -> 70; 'Qwen3-30B-A3B' -> 30,
    the first size named, the total); None when the name states none."""
    m = re.search(r"(?<![\w.])(\d+(?:\.\d+)?)[bB](?![a-zA-Z])", (model_id or "").split("/")[-1].replace("_", "-"))
    return float(m.group(1)) if m else None
