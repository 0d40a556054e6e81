"""Acceptance priors calibrated on published measurements (playbooks/data/published_speculative_decoding.csv).

Each row becomes a per-token first-position acceptance α0 (at temperature 0) for its method × task ×
draft structure, with its citation (source + location):

- Leviathan-style rows give α directly (``acceptance_rate`` defined as α = E(β), i.i.d.).
- Rows with τ (mean acceptance length incl. the bonus token) and a chain length γ: solve
  τ = 1 + Σ_{k=1..γ} Π_{i<k} α0·d^i for α0 (d = the method's position decay).
- Rows with vLLM's accepted/drafted rate r and γ: τ = 1 + r·γ first. r is NOT α (r equals α only at
  γ = 1; shared/reference: K=7, τ=3.53 → r=0.36 but α≈0.74).
- Tree drafts (EAGLE papers) verify many tokens per step; their τ is solved as a chain of the tree's
  depth and kept apart ("tree" structure): vLLM runs chains.
- Temperature: α_T = α0·exp(−λ·T), λ = median over paired rows (same setting at T=0 and T>0).

Measured per-position acceptance (a later issue feeds registry measurements) overrides the
published prior for that draft × task and is reported as "measured: N samples".
"""

from __future__ import annotations

import csv
import math
import re
import statistics
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from specops.planner.types import MeasuredAcceptance
from specops.speculation import alpha_from_tau

# Position decay d of per-token acceptance (α_i = α0·d^i), by method (and EAGLE generation).
# eagle3 0.954: fitted to vLLM blog 2026-03-13 (P-EAGLE), gpt-oss-20b EAGLE-3 AL 2.70 at K=3 and 3.27 at
#   K=7 on MT-Bench (α0=0.762, d=0.954 reproduce both).
# eagle3 generation 3.1 0.995: speculators PR #610 (Qwen3-8B, k=5) average AL 2.817 (EAGLE-3) vs 3.019
#   (EAGLE-3.1); with equal α0 and d=0.95 for EAGLE-3, EAGLE-3.1 needs d≈0.996.
# eagle 0.97: EAGLE (arXiv:2401.15077) Table 8 chain α by position 0.84/0.79/0.75/0.73/0.74 (mild decay).
# mtp 0.90: MTP modules are trained for depth 1 (DeepSeek-V3 report §5.4.3); chained use decays faster
#   (specops assumption, no published per-position data in the table).
# draft_model / ngram / suffix 1.0: Leviathan et al. model acceptance as i.i.d.
DECAY = {"eagle3": 0.954, "eagle3@3.1": 0.995, "eagle": 0.97, "mtp": 0.90, "draft_model": 1.0,
         "ngram": 1.0, "suffix": 1.0, "dflash": 0.99, "medusa": 0.93}
# EAGLE (arXiv:2401.15077) HumanEval 70B: chain α0 0.84 (Table 8) vs tree-equivalent α≈0.87-0.9 (τ 4.42 at
# depth 5, Table 1) -> a tree is worth ~1.07x α; used only when a tree prior must come from chain data.
TREE_BONUS = 1.07
DEFAULT_ALPHA = 0.6  # used only when a method has no published row at all (reported as such)
MAX_ALPHA = 0.97
# Methods without rows of their own borrow from a close relative (reported in the prior's source).
FALLBACK = {"suffix": "ngram", "dflash": "eagle3", "medusa": "eagle", "eagle": "eagle3", "mtp": "eagle3",
            "eagle3": "eagle"}
# Draft models (method draft_model): per-token acceptance rises with the draft's size relative to the
# target. α0 = α_ref + slope·ln(r / DRAFT_REF_RATIO), r = draft params / target params. The published
# draft_model rows are moved to r = DRAFT_REF_RATIO with the slope before they are pooled, and the pooled
# value is moved back to the candidate's r. The slope is fitted in :func:`calibrate` on rows that repeat
# one setting with drafts of different sizes (Leviathan et al. Table 2: T5-small 77M α 0.75 -> T5-large 800M
# α 0.82 on T5-XXL, WMT EnDe, T=0 -> 0.030 per e-fold); DEFAULT_DRAFT_SLOPE only when no such pair exists.
# A draft's size costs time too: perfmodel.draft_ms runs the draft's own architecture.
DRAFT_REF_RATIO = 1 / 16       # also the size predict_row/recommend assume for a draft of unknown size
DEFAULT_DRAFT_SLOPE = 0.03
# Request task -> the task class priors are kept by. RAG/agentic: high prompt–output overlap, closest
# published proxy is summarization (PLD's best task, EAGLE-3 Table 1).
TASK_CLASS = {"code": "code", "math": "math", "chat": "chat", "creative": "chat", "translation": "translation",
              "summarization": "summarization", "rag": "summarization", "agentic": "summarization"}


@lru_cache(maxsize=8192)
def solve_alpha(tau: float, gamma: int, decay: float) -> float | None:
    """α0 with τ(α0, d, γ) = τ (:func:`specops.speculation.bisect`); None when τ is out of range."""
    if gamma < 1 or not (1.0 < tau < gamma + 1):
        return None
    return max(1e-4, alpha_from_tau(tau, gamma, decay, MAX_ALPHA))


def decay_for(method: str, generation: str | None = None) -> float:
    if method == "eagle3" and generation == "3.1":
        return DECAY["eagle3@3.1"]
    return DECAY.get(method, 1.0)


@dataclass(frozen=True)
class PublishedRow:
    """One parsed row of the published table (only what the model uses, plus the citation)."""

    source: str
    location: str
    target: str
    params_b: float | None
    method: str | None            # vLLM method family, None when vLLM has no equivalent (Lookahead)
    generation: str | None
    structure: str                # chain | tree
    gamma: int | None             # chain length, or tree depth
    tree_tokens: int | None       # tokens verified per step for trees
    task: str
    temperature: float
    temperature_stated: bool
    batch: int
    hardware: str
    batch_known: bool
    engine: str                   # vllm | sglang | tensorrt-llm | hf | other (ENGINES)
    tau: float | None
    acceptance_rate: float | None
    rate_is_alpha: bool
    speedup: float | None
    draft_params_b: float | None
    notes: str
    context_len: int | None = None  # prompt tokens, where the row states them ("prefill 8000 tokens")
    draft_id: str | None = None     # the draft's hub id where the row names it ("EAGLE-3 (org/name)")
    quantization: str | None = None  # --quantization of the setup, for rows stated as recommend arguments
    catalog_target: bool = False    # target is a --model value (catalog id or hub id with params_b), not a paper's name

    @property
    def draft_ratio(self) -> float | None:
        """Draft params / target params for draft_model rows that state both sizes."""
        if self.method != "draft_model" or not self.draft_params_b or not self.params_b:
            return None
        return self.draft_params_b / self.params_b

    @property
    def citation(self) -> str:
        return f"{self.source}, {self.location}"

    @property
    def serving(self) -> bool:
        text = f"{self.source} {self.hardware} {self.method or ''} {self.location}".lower()
        return any(k in text for k in ("vllm", "sglang", "t5x", "tpu"))

    def alpha0(self) -> float | None:
        """First-position α at this row's temperature, or None when the row gives no acceptance."""
        if self.method is None:
            return None
        d = 1.0 if self.structure == "tree" else decay_for(self.method, self.generation)
        if self.acceptance_rate is not None and (self.rate_is_alpha or self.gamma == 1):
            return self.acceptance_rate
        tau = self.tau
        if tau is None and self.acceptance_rate is not None and self.gamma:
            tau = 1 + self.acceptance_rate * self.gamma  # vLLM's r = accepted/drafted -> τ
        if tau is None or not self.gamma:
            return None
        return solve_alpha(tau, self.gamma, d)


def _num(text: str) -> float | None:
    m = re.match(r"\s*(-?\d+(?:\.\d+)?)", text or "")
    return float(m.group(1)) if m else None


def _method(text: str) -> tuple[str | None, str | None]:
    t = text.lower()
    if t.startswith("mtp") or "(native" in t and "mtp" in t:
        return "mtp", None  # MTP heads, also when an engine runs them through its EAGLE code path
    if t.startswith("suffix"):
        return "suffix", None
    if "self-speculation" in t:
        return None, None  # a sparse-KV copy of the target drafts (MagicDec): no vLLM equivalent
    if "eagle-3.1" in t or "eagle3.1" in t:
        return "eagle3", "3.1"
    if "eagle-3" in t or "eagle3" in t:
        return "eagle3", "3"
    if "eagle-2" in t:
        return "eagle", "2"
    if "eagle" in t:
        return "eagle", "1"
    if "mtp" in t:
        return "mtp", None
    if "medusa" in t:
        return "medusa", None
    if "pld" in t or "n-gram" in t or "ngram" in t:
        return "ngram", None
    if "draft model" in t:
        return "draft_model", None
    return None, None


def _task(text: str) -> str:
    t = text.lower()
    for keys, cls in ((("humaneval", "code", "coding"), "code"), (("gsm8k", "math"), "math"),
                      (("wmt", "translation"), "translation"), (("cnn", "summariz"), "summarization")):
        if any(k in t for k in keys):
            return cls
    return "chat"  # MT-bench, Alpaca, writing, QA, mixed or unstated workloads


def _structure(text: str, method: str | None) -> tuple[str, int | None, int | None]:
    t = text.lower()
    # SGLang's speculative_num_draft_tokens counts the root (a chain of 3 steps is num_draft 4): one less draft token
    sglang = re.search(r"num[_-]draft(?:[_-]tokens)?[ =]?(\d+)", t)
    if "tree" in t and "no tree" not in t:
        depth = re.search(r"depth (\d+)", t) or re.search(r"(?:num-)?steps[ =](\d+)", t)
        tokens = re.search(r"(\d+) draft tokens", t) or re.search(r"tree k=(\d+)", t)
        n_tok = int(tokens.group(1)) if tokens else int(sglang.group(1)) - 1 if sglang else None
        if "static tree" in t:  # EAGLE App. A.1: 5 draft forward passes, ~26-node tree
            return "tree", 5, 26
        return "tree", int(depth.group(1)) if depth else 4, n_tok or 60
    if "topk" in t and not re.search(r"topk[ =]1\b", t) and ("num_draft" in t or "num-draft" in t):
        depth = re.search(r"(?:num-)?steps[ =](\d+)", t)
        return "tree", int(depth.group(1)) if depth else 4, int(sglang.group(1)) - 1 if sglang else 60
    for pat in (r"(?:gamma|k|num_spec(?:ulative)?_tokens|mtp|nextn|n_draft|v)\s*=\s*(\d+)", r"max length (\d+)",
                r"(\d+) extra token", r"(\d+) speculative tokens", r"(\d+)-token", r"--spec-draft-n-max (\d+)",
                r"--draft-max (\d+)", r"--draft-block-size (\d+)", r"(?:num-)?steps (\d+)",
                r"mtp_num_draft_tokens default (\d+)", r"length (\d+)", r"^depth (\d+)",
                r"num_speculative_tokens (\d+)"):
        m = re.search(pat, t)
        if m:
            return "chain", int(m.group(1)), None
    if "assisted-generation default" in t:
        return "chain", 5, None  # transformers' assisted generation default num_assistant_tokens=5
    if method == "ngram" and "default" in t:
        return "chain", 10, None  # prompt-lookup decoding default num_pred_tokens=10 (Spec-Bench)
    return "chain", None, None


def _batch(text: str) -> int:
    t = (text or "").lower()
    m = re.search(r"(?:concurrency=|c=)?(\d+)", t)
    return int(m.group(1)) if m and not t.startswith(("not", "offline")) else 1


def _batch_known(text: str) -> bool:
    """Whether the row states its batch/concurrency as one number (not a rate, a sweep or nothing)."""
    t = (text or "").strip().lower()
    return bool(re.match(r"(?:concurrency=|c=|bs=)?\d+\b", t)) and not any(k in t for k in ("qps", "sweep", "up to"))


ENGINES = ("vllm", "sglang", "tensorrt-llm", "hf", "other")


def engine_of(source: str, hardware: str, notes: str) -> str:
    """The harness that measured a row: notes' ``engine=X`` when stated, else read from the source."""
    m = re.search(r"engine\s*=\s*([a-z.-]+)", notes.lower())
    if m and m.group(1).rstrip(".;,") in ENGINES:
        return m.group(1).rstrip(".;,")
    text = f"{source} {hardware} {notes}".lower()
    for key, engine in (("sglang", "sglang"), ("tensorrt", "tensorrt-llm"), ("trt-llm", "tensorrt-llm"),
                        ("vllm", "vllm"), ("llama.cpp", "other"), ("mlx", "other"), ("t5x", "other"),
                        ("tpu", "other")):
        if key in text:
            return engine
    return "hf"  # papers and Spec-Bench: the HF-transformers harness


def _context(text: str) -> int | None:
    m = re.search(r"prefill (?:length )?(\d+)", (text or "").lower())
    return int(m.group(1)) if m else None


def _draft_size(text: str) -> float | None:
    m = re.search(r"(\d+(?:\.\d+)?)\s*([MB])\b", text)
    if not m:
        return None
    return float(m.group(1)) / (1000 if m.group(2) == "M" else 1)


def _draft_id(text: str) -> str | None:
    m = re.search(r"([A-Za-z0-9][\w.-]*/[\w.-]+)", text or "")
    return m.group(1).rstrip(".,;") if m else None


SPEC_BENCH_DEPTH = {("eagle", "1"): 5, ("eagle", "2"): 5, ("eagle3", "3"): 5, ("medusa", None): 4}
"""The depth of the tree each tree method runs by default in the Spec-Bench harness, for leaderboard rows that do
not state it (hemingkx/Spec-Bench evaluation/: inference_eagle2.py @a5fd1a3 and inference_eagle3.py @7f214e2
default --depth 5 with --total-token 60; inference_medusa.py @60884d2 mc_sim_7b_63 over Medusa's 4 heads; EAGLE-1's
static tree as in its App. A.1, see :func:`_structure`). The tree's size is the method's documented default
(:func:`specops.planner.acceptance_tree.default_tree_tokens`: 26, 60, 60, 63). The harness runs every method at
batch 1 with its own defaults: a tree method's row is a tree, not a chain of unknown γ."""


def _spec_bench_default(row: dict, method: str | None, gen: str | None) -> tuple[str, int | None, int | None] | None:
    from specops.planner.acceptance_tree import default_tree_tokens

    text = f"{row['source']} {row['gamma_or_tree']}".lower()
    depth = SPEC_BENCH_DEPTH.get((method, gen))
    if depth is None or "spec-bench" not in text or not re.search(r"not stated|method's default", text):
        return None
    return "tree", depth, default_tree_tokens(method, gen)


def parse_row(row: dict) -> PublishedRow:
    method, gen = _method(row["method"])
    structure, gamma, tree_tokens = (_spec_bench_default(row, method, gen)
                                     or _structure(f"{row['gamma_or_tree']} {row['method']}", method))
    temp_text = row.get("temperature", "")
    temp = _num(temp_text)
    notes = row.get("notes", "")
    rate_is_alpha = "alpha" in notes.lower() and "leviathan" in notes.lower()
    return PublishedRow(
        source=row["source"], location=row["location"], target=row["target_model"],
        params_b=_num(row.get("params_b", "")), method=method, generation=gen, structure=structure,
        gamma=gamma, tree_tokens=tree_tokens, task=_task(row["task"]), temperature=temp or 0.0,
        temperature_stated=temp is not None, batch=_batch(row.get("batch_size", "")),
        batch_known=_batch_known(row.get("batch_size", "")), engine=engine_of(row["source"], row.get("hardware", ""), notes),
        hardware=row.get("hardware", ""),
        tau=_num(row.get("tau", "")), acceptance_rate=_num(row.get("acceptance_rate", "")),
        rate_is_alpha=rate_is_alpha, speedup=_num(row.get("speedup", "")),
        draft_params_b=_draft_size(f"{row['method']} {row['gamma_or_tree']}") if method == "draft_model" else None,
        notes=notes, context_len=_context(row["task"]), draft_id=_draft_id(row["method"]),
    )


DATA_FILES = ("published_speculative_decoding.csv", "heldout_2026-11.csv", "published_2026-12.csv",
              "batch_sweeps_2026-12.csv", "drafts_moe_2026-12.csv")
"""The published measurements in playbooks/data, in the order they were gathered (same columns)."""


def load_published(path: str | Path | None = None) -> list[PublishedRow]:
    """Rows of one CSV file, or of every file in DATA_FILES."""
    from specops.playbooks import playbook_path

    paths = [Path(path)] if path else [playbook_path("data", name) for name in DATA_FILES]
    out: list[PublishedRow] = []
    for p in paths:
        with open(p, newline="", encoding="utf-8") as f:
            out += [parse_row(r) for r in csv.DictReader(f)]
    return out


@dataclass(frozen=True)
class AcceptancePrior:
    """Acceptance for one method × task × temperature: α0 with decay, or measured per-position rates."""

    alpha0: float
    decay: float
    source: str
    per_position: tuple[float, ...] | None = None  # measured cumulative rates (vLLM per-position / drafts)
    evidence: object | None = field(default=None, compare=False)  # acceptance.AcceptanceEstimate, when it came from there

    def cumulative(self, gamma: int) -> list[float]:
        """P(first k drafts accepted), k = 1..γ."""
        if self.per_position:
            rates = list(self.per_position[:gamma])
            last = self.per_position[-1]
            ratio = (self.per_position[-1] / self.per_position[-2]) if len(self.per_position) > 1 and \
                self.per_position[-2] > 0 else self.alpha0
            while len(rates) < gamma:  # beyond the measured positions: continue the last conditional rate
                last *= ratio
                rates.append(last)
            return rates
        out, p = [], 1.0
        for i in range(gamma):
            p *= min(MAX_ALPHA, self.alpha0 * self.decay ** i)
            out.append(p)
        return out

    def expected_tokens(self, gamma: int) -> float:
        return 1.0 + sum(self.cumulative(gamma))

    def acceptance_rate(self, gamma: int) -> float:
        """vLLM's accepted/drafted = (τ − 1)/γ."""
        return (self.expected_tokens(gamma) - 1.0) / gamma if gamma else 0.0


@dataclass
class Priors:
    """Published α0 (at T=0) per (method, structure, task class), plus measured overrides.

    ``named``: α0 of rows that name their draft (lower-cased hub id -> [(α0, citation, method, structure, task)]),
    used before the method's pool when the request's draft is one of them. ``draft_slope``: see
    DRAFT_REF_RATIO (draft_model entries in ``table`` are kept at that ratio)."""

    table: dict[tuple[str, str, str], list[tuple[float, str]]]
    temperature_lambda: float
    measured: list[MeasuredAcceptance] = field(default_factory=list)
    lambda_source: str = ""
    named: dict[str, list[tuple[float, str, str, str, str]]] = field(default_factory=dict)
    draft_slope: float = DEFAULT_DRAFT_SLOPE
    slope_source: str = "default"
    acceptance: object | None = None  # specops.planner.acceptance.AcceptanceModel: used first when set
    pinned: frozenset[tuple[str, str]] = frozenset()  # (method, task class) set by override(): the table wins

    def _copy(self, **changes) -> Priors:
        values = dict(table=dict(self.table), temperature_lambda=self.temperature_lambda, measured=list(self.measured),
                      lambda_source=self.lambda_source, named=dict(self.named), draft_slope=self.draft_slope,
                      slope_source=self.slope_source, acceptance=self.acceptance, pinned=self.pinned)
        values.update(changes)
        return Priors(**values)

    def with_measured(self, *items: MeasuredAcceptance) -> Priors:
        return self._copy(measured=[*self.measured, *items])

    def with_acceptance(self, model) -> Priors:
        """A copy that asks the acceptance model (:mod:`specops.planner.acceptance`) first."""
        return self._copy(acceptance=model)

    def override(self, method: str, task: str, alpha0: float, source: str = "override") -> Priors:
        """A copy with one (method, chain, task) prior replaced: for what-ifs and tests."""
        table = dict(self.table)
        table[(method, "chain", TASK_CLASS.get(task, task))] = [(alpha0, source)]
        named = {k: [e for e in v if e[2] != method] for k, v in self.named.items()}
        return self._copy(table=table, named=named, pinned=self.pinned | {(method, TASK_CLASS.get(task, task))})

    def _published(self, method: str, structure: str, task_class: str) -> tuple[float, str] | None:
        entries = self.table.get((method, structure, task_class))
        note = ""
        if not entries:
            entries = [e for (m, s, _t), v in self.table.items() if m == method and s == structure for e in v]
            note = f" (no {task_class} row; median over {method} rows)"
        if not entries:
            return None
        values = sorted(entries)
        alpha = statistics.median(v for v, _ in values)
        cite = min(values, key=lambda e: abs(e[0] - alpha))[1]
        more = f" +{len(values) - 1} rows" if len(values) > 1 else ""
        return alpha, f"published: {cite}{more}{note}"

    def _named(self, draft: str | None, method: str, structure: str, task_class: str) -> tuple[float, str] | None:
        """α0 published for this very draft (rows of this task class that name it; none of that class: all the
        draft's rows, as the method's pool does), converted to ``structure``."""
        own = [e for e in self.named.get((draft or "").lower(), []) if e[2] == method]
        rows = [e for e in own if e[4] == task_class]
        note = ""
        if not rows:
            rows, note = own, f" (no {task_class} row; median over this draft's rows)"
        if not rows:
            return None
        same = [e for e in rows if e[3] == structure] or rows
        alphas = [a if e[3] == structure else (a / TREE_BONUS if structure == "chain" else a * TREE_BONUS)
                  for e in same for a in [e[0]]]
        alpha = min(MAX_ALPHA, statistics.median(alphas))
        more = f" +{len(same) - 1} rows" if len(same) > 1 else ""
        conv = "" if same[0][3] == structure else f" ({same[0][3]} rows converted to {structure})"
        return alpha, f"published for this draft: {same[0][1]}{more}{conv}{note}"

    def lookup(self, method: str, *, task: str, temperature: float = 0.0, generation: str | None = None,
               structure: str = "chain", draft: str | None = None, draft_ratio: float | None = None,
               target: str | None = None, depth: int | None = None, tree_tokens: int | None = None) -> AcceptancePrior:
        """α0 for one candidate. Order: measured for this draft; the acceptance model when attached (fitted on
        playbooks/data/acceptance_2026-12.csv, :mod:`specops.planner.acceptance`; ``target`` names the model
        for its family effect); published rows that name this draft; the method's own published rows (same
        structure, then the other structure converted by TREE_BONUS); a related method's rows (FALLBACK, said
        in the source); DEFAULT_ALPHA. ``draft_ratio`` (draft_model: draft params / target params) moves the
        pooled α along DRAFT_REF_RATIO's slope."""
        decay = 1.0 if structure == "tree" else decay_for(method, generation)
        for m in self.measured:
            if m.method == method and m.task == task and m.draft in ("*", draft):
                return AcceptancePrior(m.per_position[0], decay, f"measured: {m.samples} samples",
                                       tuple(m.per_position))
        task_class = TASK_CLASS.get(task, task)
        if self.acceptance is not None and (method, task_class) not in self.pinned:
            from specops.planner.acceptance import estimate_prior

            prior = estimate_prior(self.acceptance, method, task=task, temperature=temperature, generation=generation,
                                   structure=structure, draft=draft, draft_ratio=draft_ratio, target=target,
                                   depth=depth, tree_tokens=tree_tokens)  # a tree's size: acceptance_tree
            if prior is not None:
                return prior
        found = self._named(draft, method, structure, task_class)
        if found is None:
            chain_of = [method]
            current = method
            while current in FALLBACK and FALLBACK[current] not in chain_of:
                current = FALLBACK[current]
                chain_of.append(current)
            other = "chain" if structure == "tree" else "tree"
            # the method's own rows first (either structure), then its relatives'
            attempts = [(c, s) for c in chain_of for s in (structure, other)]
            for candidate, struct in attempts:
                found = self._published(candidate, struct, task_class)
                if found is not None:
                    if struct != structure:
                        conv = TREE_BONUS if structure == "tree" else 1 / TREE_BONUS
                        found = (min(MAX_ALPHA, found[0] * conv),
                                 found[1] + (" ×tree bonus" if structure == "tree" else " (tree rows ÷ tree bonus)"))
                    if candidate != method:
                        found = (found[0], f"{found[1]} (borrowed from {candidate}: no {method} rows)")
                    break
        if found is not None and method == "draft_model":  # back from the reference size to this draft's
            ratio = draft_ratio or DRAFT_REF_RATIO
            shift = self.draft_slope * math.log(ratio / DRAFT_REF_RATIO)
            found = (max(0.05, min(MAX_ALPHA, found[0] + shift)),
                     f"{found[1]}; draft/target size {ratio:.3g} ({shift:+.3f} from the draft-size slope "
                     f"{self.draft_slope:.3f}/e-fold, {self.slope_source})")
        alpha, source = found if found else (DEFAULT_ALPHA, "default (no published row for this method)")
        alpha_t = alpha * math.exp(-self.temperature_lambda * temperature)
        if temperature:
            source += f"; temperature {temperature:g} applied (λ={self.temperature_lambda:.3f})"
        return AcceptancePrior(min(MAX_ALPHA, alpha_t), decay, source)


def _draft_slope(rows: list[PublishedRow], lam: float) -> tuple[float, str]:
    """Slope of α0 in ln(draft/target size) from rows that repeat one setting with drafts of different
    sizes (same source, target, task, temperature, γ); the median of the pairwise slopes."""
    groups: dict[tuple, list[tuple[float, float]]] = {}
    for r in rows:
        a, ratio = r.alpha0(), r.draft_ratio
        if a is None or ratio is None:
            continue
        key = (r.source, r.target, r.task, r.temperature, r.gamma)
        groups.setdefault(key, []).append((math.log(ratio), a * math.exp(lam * r.temperature)))
    slopes = []
    for pts in groups.values():
        for i, (x0, y0) in enumerate(pts):
            for x1, y1 in pts[i + 1:]:
                if abs(x1 - x0) > 0.1:
                    slopes.append((y1 - y0) / (x1 - x0))
    if not slopes:
        return DEFAULT_DRAFT_SLOPE, "default (no published draft-size pair)"
    return statistics.median(slopes), f"median of {len(slopes)} published draft-size pairs"


def _temperature_lambda(rows: list[PublishedRow]) -> tuple[float, str]:
    """λ from rows that repeat one setting at T=0 and at T>0 (EAGLE/EAGLE-2/EAGLE-3 T=1 blocks,
    Leviathan Table 2, vLLM PR #11672 greedy vs multinomial)."""
    lambdas = []
    by_setting: dict[tuple, list[PublishedRow]] = {}
    for r in rows:
        if r.temperature_stated:
            by_setting.setdefault((r.source, r.target, r.method, r.structure, r.gamma, r.task,
                                   r.draft_params_b), []).append(r)
    for group in by_setting.values():
        cold = [r for r in group if r.temperature == 0]
        hot = [r for r in group if r.temperature > 0]
        for c in cold:
            for h in hot:
                a0, a1 = c.alpha0(), h.alpha0()
                if a0 and a1 and a1 < a0:
                    lambdas.append(math.log(a0 / a1) / h.temperature)
    if not lambdas:
        return 0.1, "default λ=0.1 (no paired rows)"
    return statistics.median(lambdas), f"median of {len(lambdas)} T=0/T>0 pairs"


def calibrate(rows: list[PublishedRow], *, exclude_source: str | None = None) -> Priors:
    """Priors from published rows (optionally leaving one source out, for validation)."""
    use = [r for r in rows if r.source != exclude_source]
    lam, lam_source = _temperature_lambda(use)
    slope, slope_source = _draft_slope(use, lam)
    table: dict[tuple[str, str, str], list[tuple[float, str]]] = {}
    named: dict[str, list[tuple[float, str, str, str, str]]] = {}
    for r in use:
        a = r.alpha0()
        if a is None or r.method is None:
            continue
        a0 = min(MAX_ALPHA, a * math.exp(lam * r.temperature))  # back to T=0
        if r.method == "draft_model":  # kept at the reference draft/target size (named rows too: one draft
            a0 -= slope * math.log((r.draft_ratio or DRAFT_REF_RATIO) / DRAFT_REF_RATIO)  # LM drafts many targets)
        if r.draft_id:
            named.setdefault(r.draft_id.lower(), []).append((a0, r.citation, r.method, r.structure, r.task))
        table.setdefault((r.method, r.structure, r.task), []).append((a0, r.citation))
    return Priors(table, lam, [], lam_source, named, slope, slope_source)


def default_priors() -> Priors:
    """Priors calibrated on every published row shipped in playbooks/data, with the acceptance model fitted
    on playbooks/data/acceptance_2026-12.csv attached (computed once per set of inputs, see
    :mod:`specops.planner.diskcache`)."""
    from specops.planner.diskcache import cached

    def build() -> Priors:
        from specops.planner.acceptance import fit, load_rows

        return calibrate(load_published()).with_acceptance(fit(load_rows()))

    return cached("priors", build)
