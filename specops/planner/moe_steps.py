"""What a speculative step costs a small-active MoE target, by the tokens it verifies (issue 37, "MoE by layout").

``playbooks/data/moe_spec_steps_2026-12.csv`` holds two published sweeps of SGLang EAGLE-3 on Qwen3-30B-A3B (128
experts, top-8, 3.3B active) on H100s: SpecForge #339 (TP2) and AngelSlim #163 (TP4, same author, same harness), each
a table of (batch, steps, topk, num_draft_tokens) with throughput and SGLang's acceptance length beside the same
table's no-speculation throughput. Their ratio gives the published step cost without any acceptance model:

    cost = speculative step / decode step = acceptance length × base throughput / throughput

(both throughputs count the same prefills, so their share cancels to first order). :func:`model_cost` prices the
same configuration with the shipped SGLang profile: the verification of num_draft_tokens tokens per request
(SGLang's count includes the root: a chain of 3 steps is num_draft 4) plus ``steps`` draft forwards of an EAGLE-3
head, over the model's decode step. Nothing here is fitted.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import lru_cache

from specops.planner.catalog import Catalogs, load_catalogs
from specops.planner.perfmodel import DraftSpec, Setup, draft_ms, engine_profile, forward_ms, head_params

DATA_FILE = "moe_spec_steps_2026-12.csv"
CONTEXT, OUTPUT = 128, 512
"""Prompt / output lengths neither source states (MT-bench-like, as baselines_2026-12.csv assumes for both)."""


@dataclass(frozen=True)
class SpecStepRow:
    """One published speculative configuration and the same table's no-speculation throughput at its batch."""

    id: str
    source: str
    url: str
    location: str
    target: str
    engine: str
    gpu: str
    tp: int
    batch: int
    steps: int
    topk: int
    num_draft_tokens: int
    throughput: float
    accept_length: float
    base_throughput: float

    @property
    def published_cost(self) -> float:
        """Speculative step over decode step, from the published figures alone."""
        return self.accept_length * self.base_throughput / self.throughput


def load_spec_steps() -> list[SpecStepRow]:
    return list(_load())


@lru_cache(maxsize=1)
def _load() -> tuple[SpecStepRow, ...]:
    from specops.playbooks import playbook_path

    with open(playbook_path("data", DATA_FILE), newline="", encoding="utf-8") as f:
        return tuple(SpecStepRow(
            id=r["id"], source=r["source"], url=r["url"], location=r["location"], target=r["target_model"],
            engine=r["engine"], gpu=r["gpu"], tp=int(r["tp"]), batch=int(r["batch"]), steps=int(r["steps"]),
            topk=int(r["topk"]), num_draft_tokens=int(r["num_draft_tokens"]), throughput=float(r["throughput_tok_s"]),
            accept_length=float(r["accept_length"]), base_throughput=float(r["base_throughput_tok_s"]))
            for r in csv.DictReader(f))


@dataclass(frozen=True)
class StepPrice:
    """The model's decode step, verification and drafting (ms) for one row's configuration."""

    base_ms: float
    verify_ms: float
    draft_ms: float

    @property
    def cost(self) -> float:
        return (self.verify_ms + self.draft_ms) / self.base_ms


def model_price(row: SpecStepRow, cat: Catalogs | None = None) -> StepPrice:
    cat = cat or load_catalogs()
    model = cat.model(row.target)
    setup = Setup(model, cat.gpu(row.gpu), row.tp, engine_profile(row.engine))
    head = DraftSpec("eagle3", None, head_params(model, "eagle3") / 1e9)
    kv = CONTEXT + OUTPUT / 2
    return StepPrice(
        forward_ms(setup, batch=row.batch, tokens_per_seq=1, kv_len=kv, kv_dtype="auto"),
        forward_ms(setup, batch=row.batch, tokens_per_seq=row.num_draft_tokens, kv_len=kv, kv_dtype="auto"),
        draft_ms(setup, head, gamma=row.steps, batch=row.batch, kv_len=kv, kv_dtype="auto"))


def cost_growth(rows: list[SpecStepRow], cat: Catalogs | None = None) -> tuple[float, float] | None:
    """(published, model) ratio of the step cost of the most tokens verified to the fewest, at one batch of one
    source (geometric mean where a token count has several rows); None with fewer than two token counts."""
    by: dict[int, list[SpecStepRow]] = {}
    for r in rows:
        by.setdefault(r.num_draft_tokens, []).append(r)
    if len(by) < 2:
        return None
    cat = cat or load_catalogs()
    lo, hi = by[min(by)], by[max(by)]

    def gmean(xs: list[float]) -> float:
        return math.exp(sum(math.log(x) for x in xs) / len(xs))

    pub = gmean([r.published_cost for r in hi]) / gmean([r.published_cost for r in lo])
    mod = gmean([model_price(r, cat).cost for r in hi]) / gmean([model_price(r, cat).cost for r in lo])
    return pub, mod
