"""Published runs near a request as evidence (issue 38): where a source measured (nearly) the configuration being
predicted - the same target (or a name the published-rows table maps to it), method, GPU (or GPU class), engine class,
task class and a batch within a factor of MAX_BATCH_FACTOR - its speedup updates the calibrated prediction of
:mod:`specops.planner.uncertainty`.

**Matching** (:func:`near_runs`): a calibration point (:class:`~specops.planner.uncertainty.ResidualPoint`, which
records its row's target, GPU, batch and published speedup) matches a :class:`Query` when its method and engine class
are the request's, its target is the request's model (by catalog id or name; a published name the table maps to the
model, such as a distilled or renamed checkpoint, counts with FAMILY_SD more noise), its task class is the
request's (priors.TASK_CLASS: the acceptance, hence the speedup, depends on the workload), its GPU is the request's (another
GPU of the same class: GPU_SD more) and its batch is within MAX_BATCH_FACTOR of the request's (BATCH_SD per doubling
more). Rows whose GPU or batch the source did not state never match.

**The update** (:func:`update`): the model's predictive distribution of ln(true/predicted) (the calibrated mixture
μ + σ·z) is the prior, summarised as a normal N(m0, v0); each matching *source* is one observation y of the model's error
here: ln(published / S) for a run at the request's batch and GPU; for a run at another batch or GPU, the run's own
residual ln(published / predicted at the run's setup, its source held out), so a run at batch 64 informs a request at
batch 256 through the model's batch trend, not as if the speedup did not fall with batch (TRANSFER_ERROR; off: always
ln(published / S)) - its matching rows averaged (rows of one source share its harness), with variance BETWEEN_SOURCE_SD² plus the
mismatch terms of its closest row. The normal-normal posterior N(m1, v1) moves the whole mixture: x → m1 + (x − m0)·
√(v1/v0), so the range, P(gain) and the expected speedup shift toward the measurement, more the closer and the more
numerous the sources, and keep the mixture's shape. The physics bounds (τ's ceiling, the all-rejected floor) are
applied after the update by :func:`specops.planner.uncertainty.assess`, as before.

Held out, the update uses only the calibration's points - in bench/uncertainty_bench.py each fold's calibration holds
the other sources only - so a source is never its own evidence.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

BETWEEN_SOURCE_SD = 0.24
"""Noise of one source's published speedup about the truth of a configuration, in ln speedup: σ_rep of independent
organisations' serving runs of one configuration (specops.planner.replications.serving_sigma; printed by
bench/uncertainty_published.py, "the replication floor", 2026-12-03): 0.235 over 6 serving configurations at the
any-gpu key (target, method, engine class, batch range, greedy/sampled; bootstrap 80% 0.159-0.303), 0.246 over the 4
of them on one GPU class. One author's repeats count as one source (vLLM issue #20780 and PR #16937 are both
ekagra-ranjan's). It was 0.20, from 2 strict pairs, one of them that author's repeat. Tighter figures exist for one
protocol on independent machines - the Qwen3.8-27B MTP llama.cpp community table, 0.141 over 6 consumer GPUs at the
strict key - but a published run near a request is another organisation's serving run. Nested (bench/uncertainty_bench,
142 rows) 0.20 → 0.24 leaves coverage 83%, median hi/lo 2.64, Brier 0.0817 and regret as they were; the 19 rows with a
near run: median hi/lo 1.62 → 1.70."""
FAMILY_SD = 0.10
"""Extra noise of a row whose published target name is mapped to the model (a renamed or distilled checkpoint)."""
GPU_SD = 0.15
"""Extra noise of a row measured on another GPU of the same class (specops.planner.evidence.gpu_class)."""
BATCH_SD = 0.10
"""Extra noise per doubling between the row's batch and the request's."""
TRANSFER_ERROR = True
"""A run at another batch or GPU is observed as the model's error there (its residual), not as if its speedup were the
request's (a run at the request's batch and GPU is its speedup: ln(published / S)); measured in
bench/uncertainty_bench.py (the published-run section's variants)."""
MAX_BATCH_FACTOR = 4.0
"""A row's batch must be within this factor of the request's to match."""


@dataclass(frozen=True)
class Query:
    """What a prediction is for: the target's names (catalog id and aliases), the method, the GPU (catalog name),
    the engine class (serving | harness | native: uncertainty.engine_class) and the batch."""

    targets: frozenset[str]
    method: str
    gpu: str
    engine: str
    batch: int
    task: str = ""  # task class (priors.TASK_CLASS); "" matches any


@dataclass(frozen=True)
class Run:
    """One matching published row: its source, speedup, batch and GPU, its noise as an observation (ln), and a short
    citation."""

    source: str
    speedup: float
    log_ratio: float   # the observation y: the model's error at the run (TRANSFER_ERROR) or ln(published / request's S)
    batch: int
    gpu: str
    method: str
    sd: float
    cite: str

    def text(self) -> str:
        return f"{self.method} {self.speedup:.2f}x at batch {self.batch} on {self.gpu}, {self.cite}"


def target_key(name: str) -> str:
    """A published or catalog target name, compared loosely: lower case, no org prefix, no parenthesised note,
    separators as '-', without -instruct/-chat/-hf."""
    n = re.split(r"\(", name.lower(), maxsplit=1)[0].strip().rsplit("/", 1)[-1]
    n = re.sub(r"[\s_]+", "-", n)
    return re.sub(r"-(instruct|chat|hf)\b", "", n).strip("-")


def mapped_target(name: str) -> str | None:
    """The catalog entry the published-rows table maps a published target name to (evidence.TARGETS), if any."""
    from specops.planner.evidence import TARGETS

    low = name.lower()
    return next((entry for key, entry in TARGETS if key in low and entry), None)


def short_cite(source: str) -> str:
    """The source up to its first parenthesis, quote or comma, a GitHub owner dropped: 'vllm PR #32887'."""
    head = re.split(r"[(,'\"]", source, maxsplit=1)[0].strip()
    return re.sub(r"^[\w.-]+/([\w.-]+)\s+(PR|issue)\b", r"\1 \2", head, flags=re.IGNORECASE)[:60]


def task_class(task: str) -> str:
    from specops.planner.priors import TASK_CLASS

    return TASK_CLASS.get(task, task)


def query_for(*, names: Sequence[str], method: str, gpu: str, engine: str, batch: int, task: str = "") -> Query:
    return Query(frozenset(target_key(n) for n in names if n), method, gpu, engine, batch,
                 task_class(task) if task else "")


def match_sd(p, q: Query) -> float | None:
    """The noise of calibration point ``p`` as an observation of ``q``'s configuration (None: it does not match)."""
    from specops.planner.evidence import gpu_class

    if not p.target or not p.gpu or not p.published or p.method != q.method or p.stratum.engine != q.engine:
        return None
    if q.task and p.task and task_class(p.task) != q.task:  # a chat run says little about code's acceptance
        return None
    extra = 0.0
    if target_key(p.target) not in q.targets:
        mapped = mapped_target(p.target)
        if mapped is None or target_key(mapped) not in q.targets:
            return None
        extra += FAMILY_SD ** 2
    if p.gpu != q.gpu:
        if gpu_class(p.gpu) != gpu_class(q.gpu) or gpu_class(q.gpu) == "other":
            return None
        extra += GPU_SD ** 2
    if not p.batch_known or p.batch <= 0 or q.batch <= 0:
        return None
    doublings = abs(math.log2(p.batch / q.batch))
    if doublings > math.log2(MAX_BATCH_FACTOR) + 1e-9:
        return None
    extra += (BATCH_SD * doublings) ** 2
    return math.sqrt(BETWEEN_SOURCE_SD ** 2 + extra)


def near_runs(points: Sequence, q: Query, speedup: float) -> list[Run]:
    """The calibration points that match ``q`` (:func:`match_sd`), as runs against the point prediction ``speedup``,
    closest first."""
    out = []
    for p in points:
        sd = match_sd(p, q)
        if sd is not None and speedup > 0:
            other = p.batch != q.batch or p.gpu != q.gpu  # not the request's batch and GPU: carry the model's error
            y = p.log_ratio if TRANSFER_ERROR and other and p.speedup > 0 else math.log(p.published / speedup)
            out.append(Run(p.source, p.published, y, p.batch, p.gpu, p.method, sd,
                           short_cite(p.cite_full or p.cite)))
    return sorted(out, key=lambda r: (r.sd, r.source, r.batch))


def update(logs: Sequence[float], weights: Sequence[float], runs: Sequence[Run]) -> tuple[float, float, float]:
    """(m0, m1, k): the prior mean of the mixture ``logs``/``weights`` (ln true/predicted), the posterior mean after
    the runs (one observation per source: its rows' mean ln ratio, its closest row's noise), and the scale
    √(v1/v0) that maps x → m1 + (x − m0)·k. No runs: (m0, m0, 1)."""
    total = sum(weights) or 1.0
    m0 = sum(w * x for x, w in zip(logs, weights, strict=True)) / total
    v0 = max(1e-4, sum(w * (x - m0) ** 2 for x, w in zip(logs, weights, strict=True)) / total)
    from specops.planner.replications import source_of

    by_source: dict[str, list[Run]] = {}  # one observation per source, one author's repeats one source
    for r in runs:
        by_source.setdefault(source_of(r.source), []).append(r)
    if not by_source:
        return m0, m0, 1.0
    prec, acc = 1 / v0, m0 / v0
    for rs in by_source.values():
        y = sum(r.log_ratio for r in rs) / len(rs)
        s2 = min(r.sd for r in rs) ** 2
        prec += 1 / s2
        acc += y / s2
    v1 = 1 / prec
    return m0, acc / prec, math.sqrt(v1 / v0)
