"""The decision tree (playbooks/decision-tree.yaml): typed, validated, evaluated rule by rule.

Branch rules narrow the candidate set (forbid methods, cap γ, ask for a schedule, set preferences);
check rules name a pipeline step that reports its own outcome. Every rule yields one DecisionStep.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from specops.models import Strict
from specops.planner.types import DecisionStep


class _Strict(Strict):
    model_config = ConfigDict(populate_by_name=True)


class Predicate(_Strict):
    """A test on one input value."""

    lt: float | None = Field(None, description="value < lt")
    le: float | None = Field(None, description="value <= le")
    gt: float | None = Field(None, description="value > gt")
    ge: float | None = Field(None, description="value >= ge")
    eq: Any = Field(None, description="value == eq")
    in_: list[Any] | None = Field(None, alias="in", description="value in the list")
    missing: bool | None = Field(None, description="true: holds when the input was not given")

    def holds(self, value: Any) -> bool:
        if self.missing is not None:
            return (value is None) == self.missing
        if value is None:
            return False
        checks = [(self.lt, lambda b: value < b), (self.le, lambda b: value <= b), (self.gt, lambda b: value > b),
                  (self.ge, lambda b: value >= b), (self.eq, lambda b: value == b), (self.in_, lambda b: value in b)]
        return all(fn(bound) for bound, fn in checks if bound is not None)


class Effects(_Strict):
    """What a branch does to the candidate set."""

    forbid: list[str] = Field(default_factory=list, description="Methods removed from the candidates.")
    prefer: list[str] = Field(default_factory=list, description="Tie-break order (within 2% speedup).")
    max_gamma: int | None = Field(None, ge=1, le=16, description="Cap on γ.")
    schedule: bool | None = Field(None, description="Emit a per-batch-size γ schedule.")


class Branch(_Strict):
    """One outcome of a rule."""

    when: dict[str, Predicate] = Field(default_factory=dict, description="Input -> predicate; all must hold.")
    outcome: str = Field(description="What the rule decided, as reported.")
    effects: Effects = Field(default_factory=Effects, description="Effect on the candidates.")


class TreeRule(_Strict):
    """One step of the tree."""

    id: str = Field(description="Rule id reported in decision_path.")
    description: str = Field(description="What the rule looks at.")
    source: str = Field(description="Where the rule comes from.")
    branches: list[Branch] | None = Field(None, description="Data branches (first match wins).")
    check: Literal["vllm_capabilities", "drafts", "kv_cache", "cost_model", "evidence"] | None = Field(
        None, description="Pipeline step run at this point.")


CHECK_ORDER = ("vllm_capabilities", "drafts", "kv_cache", "cost_model", "evidence")
"""The pipeline steps, each once and in this order: each reads what the one before it decided."""


class DecisionTree(_Strict):
    """playbooks/decision-tree.yaml."""

    version: int = Field(description="Schema version.")
    rules: list[TreeRule] = Field(description="Rules in evaluation order.")

    @model_validator(mode="after")
    def _vocabulary_and_order(self) -> DecisionTree:
        from specops.errors import did_you_mean
        from specops.speculation import PLANNED

        ids = [r.id for r in self.rules]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"rule ids {dup} appear more than once. To fix: give every rule its own id")
        for r in self.rules:
            named = [m for b in r.branches or [] for m in (*b.effects.forbid, *b.effects.prefer)]
            for m in named:
                if m not in PLANNED:
                    raise ValueError(f'rule "{r.id}" names method "{m}", which the planner does not know.'
                                     f"{did_you_mean(m, PLANNED)} To fix: use one of {', '.join(PLANNED)}")
        checks = [r.check for r in self.rules if r.check]
        if checks != list(CHECK_ORDER):
            raise ValueError(f"the pipeline steps are {checks}; they must be {list(CHECK_ORDER)}, each once and "
                             "in that order (each reads what the one before decided). To fix: reorder the "
                             "check rules")
        return self


@dataclass
class Constraints:
    """The candidate set as narrowed by the rules so far."""

    forbidden: dict[str, str] = field(default_factory=dict)   # method -> rule id
    forbidden_combos: list[tuple[str, str, str]] = field(default_factory=list)  # (method, kv prefix, why)
    prefer: list[str] = field(default_factory=list)
    max_gamma: int = 16
    schedule: bool = False

    def apply(self, rule_id: str, effects: Effects) -> None:
        for m in effects.forbid:
            self.forbidden.setdefault(m, rule_id)
        if effects.prefer:
            self.prefer = list(effects.prefer)
        if effects.max_gamma is not None:
            self.max_gamma = min(self.max_gamma, effects.max_gamma)
        if effects.schedule is not None:
            self.schedule = effects.schedule


def _show(value: Any) -> str:
    if value is None:
        return "not given"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def evaluate_rule(rule: TreeRule, facts: dict[str, Any], constraints: Constraints) -> DecisionStep:
    """First matching branch: apply its effects, report it."""
    assert rule.branches is not None
    for branch in rule.branches:
        if all(pred.holds(facts.get(name)) for name, pred in branch.when.items()):
            constraints.apply(rule.id, branch.effects)
            names = sorted({n for b in rule.branches for n in b.when})
            shown = ", ".join(f"{n}={_show(facts.get(n))}" for n in names)
            return DecisionStep(rule=rule.id, input=shown, outcome=branch.outcome)
    return DecisionStep(rule=rule.id, input="", outcome="no branch matched")


@lru_cache(maxsize=4)
def _load(path: str) -> DecisionTree:
    from specops.yamlfile import load_model

    return load_model(Path(path), DecisionTree)


def load_tree(path: str | Path | None = None) -> DecisionTree:
    from specops.playbooks import playbook_path

    if path is None:  # the shipped tree: parsed once per set of inputs (the careful reader is slow)
        return _shipped(str(playbook_path("decision-tree.yaml")))
    return _load(str(path))


@lru_cache(maxsize=4)
def _shipped(path: str) -> DecisionTree:
    from specops.planner.diskcache import cached

    return cached("tree", lambda: _load.__wrapped__(path))
