"""The replication floor (issue 38): how much do independent sources disagree on the SAME configuration?

A configuration is published by two or more sources; each source's speedup there (the mean of ln speedup over its rows
of that configuration: several γ, several tasks) is one draw of the truth plus that source's noise. The spread of those
draws, σ_rep per source in ln speedup, bounds every model from below: even a perfect model predicts a new source's
figure with error sd ≥ σ_rep, so an 80% range is at least :func:`width_floor` (exp(2·1.2816·σ_rep)) wide.
:data:`specops.planner.published_runs.BETWEEN_SOURCE_SD` - the noise of one published run near a request - is σ_rep.

**The key** (:func:`config_key`). Strict: the target (:func:`canonical_target`: org, -Instruct, quantization suffix
and 'llama3.1' vs 'llama-3.1' spellings unified), the method, the GPU (:func:`gpu_name`) and its count, the engine
class (serving | harness), the batch (stated) and greedy vs sampled (an unstated temperature counts as greedy, the
serving benches' default). Loose: the GPU's class (evidence.gpu_class) and the batch range (evidence.batch_range)
instead. Any-gpu: the GPU left out (rows that name none count). The task and the engine within its class are in no key;
a pair is *task-matched* when the two sources' rows share a task class (priors.TASK_CLASS). The looser the key, the
more of a pair's gap is a difference of setup a model could explain, so loose and any-gpu figures over-state σ_rep.
At the strict key the published rows hold one independent serving pair; COMMUNITY_FILE adds six configurations of one
protocol on independent machines (2026-12-03).

**Independence** (:data:`SAME_AUTHOR`): two sources by one author on one setup are a repeat, not a replication -
their runs share the harness, the prompts and the machine. They are merged into one source (their rows pooled) for
the estimate; :func:`replications` with ``independent=False`` keeps them apart, the within-author repeat figure.

**The estimate** (:func:`sigma_rep`): the pooled within-configuration variance of the source means,
Σ_c Σ_s (y_cs − ȳ_c)² / Σ_c (k_c − 1) - for a pair, Δ²/2 - and its 80% interval by resampling configurations
(:func:`bootstrap`; configurations, not pairs, are the independent units). Printed by bench/uncertainty_published.py.
"""

from __future__ import annotations

import math
import random
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Z80 = 1.2816
"""The standard normal's 90th percentile: an 80% central range of a normal spans ±Z80·σ."""

SAME_AUTHOR = {
    "vllm issue #20780": "ekagra-ranjan",
    "vllm pr #16937": "ekagra-ranjan",
}
"""source_key → author, where two sources are one author's runs of one setup (read from the sources themselves: vLLM
issue #20780 is by ekagra-ranjan and says its EAGLE heads are 'per same author's PR #16937'; PR #16937's H100 BS1
comment is ekagra-ranjan's). Their rows count as one source in the replication estimate."""

MIN_CONFIGS = 8
"""σ_rep is *well estimated* when at least this many configurations carry independent pairs and the bootstrap 80%
interval's high/low is at most WELL_ESTIMATED_RATIO; else BETWEEN_SOURCE_SD stays where it is."""
WELL_ESTIMATED_RATIO = 2.0

_QUANT = re.compile(r"-(fp8|fp4|nvfp4|mxfp4|awq|gptq|int4|int8|w4a16|w8a8|bf16|fp16)$")


def canonical_target(name: str) -> str:
    """A published target name for pairing: published_runs.target_key, then a quantization suffix dropped and a
    version glued to the family name split off ('llama3.1-8b' → 'llama-3.1-8b', 'DeepSeek-R1 (FP4)' → 'deepseek-r1')."""
    from specops.planner.published_runs import target_key

    key = target_key(name)
    key = _QUANT.sub("", key)
    key = re.sub(r"^(llama|qwen|vicuna|gemma|mistral)(\d)", r"\1-\2", key)
    return key


def source_of(source: str, *, independent: bool = True) -> str:
    """The source a row counts as: uncertainty_rows.source_key, one author's repeats merged (``independent``)."""
    from specops.planner.uncertainty_rows import source_key

    key = source_key(source)
    return f"author {SAME_AUTHOR[key]}" if independent and key in SAME_AUTHOR else key


LEVELS = ("strict", "loose", "any-gpu")
"""How alike two rows must be to count as one configuration (:func:`config_key`)."""

REPLICATIONS_FILE = "replications_2026-12.csv"
"""Rows gathered for the replication estimate (playbooks/data). Not in priors.DATA_FILES: as calibration rows too
(bench/uncertainty_bench.py on the merged main, 2026-12-03) they moved the nested median hi/lo 2.64 → 2.62 and regret
left 4.43 → 4.27, but one situation (ik_llama.cpp PR #645, 0.44x) crossed the P(gain) bar at 0.801 and the slowdown
taken rose 1.73 → 2.54; and vLLM PR #16937's EAGLE-3 row would count one author twice in the near-run update while the
nested folds key sources by uncertainty_rows.source_key (SAME_AUTHOR is not merged there)."""
COMMUNITY_FILE = "replications_community_2026-12.csv"
"""One configuration measured by many independent people: Qwen3.8-27B + its MTP head in llama.cpp at batch 1, the
sudoingX/qwen38-mtp community table (one contributor = one source, same client and method, their own card). Read by
the replication estimate only: as calibration rows too (bench/uncertainty_bench.py, 2026-12-03, with REPLICATIONS_FILE)
they take 145 rows to 171 and the median hi/lo 2.65 → 2.36, but the narrowing is mostly theirs (each contributor is the others' near run)
and EAGLE-3's 42 rows fall to 71% covered - one target would outweigh the rest of the harness calibration."""

_GPU_NAME = re.compile(r"(rtx (?:pro )?\d{4}(?: ti)?|rx \d{4}(?: xtx| gre| xt)?|radeon \w+|mi\d{3}x?|[abhl]\d{2,3}s?\b)")


def gpu_name(hardware: str) -> str:
    """The GPU a published hardware text names: the catalog's (evidence.catalog_gpu), else a card name it spells
    ('1x RTX 5090 32GB' → 'RTX 5090'); '' when it names none."""
    from specops.planner.evidence import catalog_gpu

    gpu = catalog_gpu(hardware)
    if gpu:
        return gpu
    m = _GPU_NAME.search(hardware.lower())
    return m.group(1).upper() if m else ""


def gpu_count(hardware: str) -> int:
    """The number of GPUs a hardware text states ('2x RTX 5060 Ti', '8x H200 (TP8)'), 1 when it states none."""
    m = re.match(r"\s*(\d+)\s*[x×]", hardware.lower())
    return int(m.group(1)) if m else 1


def config_key(row, *, level: str = "strict") -> tuple | None:
    """The configuration a published row measured, or None where the row cannot be paired: no speedup or method, no
    named GPU (strict, loose), no stated batch (strict). ``level``: strict - target, method, catalog GPU, engine
    class, batch, greedy/sampled (the GPU as '<count>x <name>', :func:`gpu_name`); loose - the GPU's class and the
    batch range instead; any-gpu - the GPU left out."""
    from specops.planner.evidence import batch_range, gpu_class
    from specops.planner.uncertainty import engine_class

    gpu = gpu_name(row.hardware)
    if not row.speedup or row.speedup <= 0 or not row.method or (not gpu and level != "any-gpu"):
        return None
    if not row.batch_known and level == "strict":
        return None
    sampled = bool(row.temperature_stated and row.temperature > 0)
    head = (canonical_target(row.target), row.method)
    if level == "strict":
        return *head, f"{gpu_count(row.hardware)}x {gpu}", engine_class(row.engine), row.batch, sampled
    if level == "loose":
        return *head, gpu_class(gpu), engine_class(row.engine), batch_range(row.batch), sampled
    return *head, "any", engine_class(row.engine), batch_range(row.batch), sampled


def replication_rows() -> list:
    """The calibration rows (uncertainty_rows.calibration_rows) and REPLICATIONS_FILE's and COMMUNITY_FILE's (those
    priors.DATA_FILES does not already hold), sources unified."""
    from specops.planner.priors import DATA_FILES, load_published
    from specops.planner.uncertainty_rows import calibration_rows, unify_sources
    from specops.playbooks import playbook_path

    extra = [r for name in (REPLICATIONS_FILE, COMMUNITY_FILE) if name not in DATA_FILES
             for r in load_published(playbook_path("data", name))]
    return unify_sources(calibration_rows() + extra)


@dataclass(frozen=True)
class Replication:
    """One configuration published by two or more sources: each source's mean ln speedup there, and its task classes."""

    key: tuple
    means: dict[str, float]
    tasks: dict[str, frozenset[str]]

    @property
    def engine(self) -> str:
        return self.key[3]

    @property
    def task_matched(self) -> bool:
        """Every pair of sources shares a task class."""
        ts = list(self.tasks.values())
        return all(a & b for i, a in enumerate(ts) for b in ts[i + 1:])

    def pairs(self) -> list[tuple[str, str, float]]:
        """(source, source, |Δ ln speedup|) for every pair of its sources."""
        items = sorted(self.means.items())
        return [(a, b, abs(x - y)) for i, (a, x) in enumerate(items) for b, y in items[i + 1:]]

    def sum_squares(self) -> tuple[float, int]:
        """(Σ (y − ȳ)², k − 1): this configuration's share of the pooled variance."""
        vals = list(self.means.values())
        mean = statistics.fmean(vals)
        return sum((v - mean) ** 2 for v in vals), len(vals) - 1


def replications(rows: Iterable, *, level: str = "strict", independent: bool = True) -> list[Replication]:
    """The configurations two or more sources published (:func:`config_key`), sorted by key."""
    from specops.planner.priors import TASK_CLASS

    cells: dict[tuple, dict[str, list]] = {}
    for r in rows:
        key = config_key(r, level=level)
        if key is not None:
            cells.setdefault(key, {}).setdefault(source_of(r.source, independent=independent), []).append(r)
    out = []
    for key, by in sorted(cells.items(), key=lambda kv: tuple(map(str, kv[0]))):
        if len(by) >= 2:
            out.append(Replication(key, {s: statistics.fmean(math.log(r.speedup) for r in rs) for s, rs in by.items()},
                                   {s: frozenset(TASK_CLASS.get(r.task, r.task) for r in rs) for s, rs in by.items()}))
    return out


def sigma_rep(configs: Sequence[Replication]) -> float | None:
    """The pooled per-source sd of ln speedup within configurations; None without a pair."""
    ss = [c.sum_squares() for c in configs]
    dof = sum(d for _, d in ss)
    return math.sqrt(sum(s for s, _ in ss) / dof) if dof else None


def sigma_robust(configs: Sequence[Replication]) -> float | None:
    """The per-source sd a normal would need for the pairs' median |Δ ln speedup| (median |Δ| = 0.954·σ): less moved by
    the few pairs far apart than :func:`sigma_rep`; None without a pair."""
    diffs = [d for c in configs for _, _, d in c.pairs()]
    return statistics.median(diffs) / 0.954 if diffs else None


def bootstrap(configs: Sequence[Replication], *, n: int = 2000, seed: int = 0,
              quantiles: tuple[float, float] = (0.1, 0.9)) -> tuple[float, float] | None:
    """The (10th, 90th) percentile of :func:`sigma_rep` over ``n`` resamples of the configurations (with replacement,
    seeded); None without a pair."""
    if not configs:
        return None
    rng = random.Random(seed)
    draws = sorted(sigma_rep([rng.choice(configs) for _ in configs]) or 0.0 for _ in range(n))
    return draws[int(quantiles[0] * (n - 1))], draws[int(quantiles[1] * (n - 1))]


def width_floor(sigma: float) -> float:
    """The narrowest 80% range (high/low) any model can ship for a new source's figure with per-source sd ``sigma``."""
    return math.exp(2 * Z80 * sigma)


def serving_sigma(rows: Iterable) -> float | None:
    """σ_rep of the serving configurations at the any-gpu key: independent organisations' serving runs of one target,
    method and batch range - what BETWEEN_SOURCE_SD stands for (a published run near a request is another source's
    serving run; published_runs matches the engine class)."""
    return sigma_rep([c for c in replications(rows, level="any-gpu") if c.engine == "serving"])


def well_estimated(configs: Sequence[Replication]) -> bool:
    """At least MIN_CONFIGS configurations and a bootstrap 80% interval no wider than WELL_ESTIMATED_RATIO."""
    ci = bootstrap(configs)
    return (len(configs) >= MIN_CONFIGS and ci is not None and ci[0] > 0
            and ci[1] / ci[0] <= WELL_ESTIMATED_RATIO)
