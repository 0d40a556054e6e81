"""The speculation vocabulary, defined once: the method table, the acceptance math and one acceptance type.

- :data:`METHODS` is the method table as data: every name vLLM's ``speculative_config.method`` takes
  in some release (0.2–0.33), with its family, whether it needs draft weights of its own, whether it
  reads the target's hidden states, how it drafts, and whether the planner models it. Spec methods,
  decision-tree methods, the tune grid and the capability CSV are validated against it on load.
- The α/τ/r conversions (Leviathan et al. 2023 §3, position-dependent α with a decay) and the one
  monotone solver (:func:`bisect`) every inversion uses.
- :class:`Acceptance`: counters (drafts, draft tokens, accepted tokens, per position) → rate, τ, α.
  Every place that turns counters into acceptance uses it.

A leaf module: it imports nothing from specops but errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

Family = Literal["head", "native", "model", "model_free", "custom", "none", "tooling"]
Drafting = Literal["sequential", "parallel", "lookup", "none"]


@dataclass(frozen=True)
class MethodInfo:
    """One row of the method table."""

    name: str
    family: Family
    draft_weights: bool
    """True: needs a draft of its own (a folder or hub id): a head, a draft LM, a custom class."""
    hidden_states: bool
    """True: drafts from the target's hidden states (EAGLE heads, MTP layers)."""
    drafts: str
    """How it drafts, in one line."""
    modelled: bool
    """True: the planner's performance model predicts it (recommend can pick it)."""
    drafting: Drafting = "sequential"
    """sequential: one draft forward per token; parallel: all γ positions in one pass (Medusa heads,
    DFlash/DSpark blocks); lookup: no model (prompt/suffix matching); none: no drafts."""
    schedule_on_v1: bool = False
    """vLLM 0.33 keeps a per-batch γ schedule for it on Model Runner V1 (vllm/config/vllm.py)."""
    v0: bool = False
    """Served by the V0 engine's ``--speculative-model`` (vLLM before 0.8.2; the method is implied by the
    draft: ``[ngram]``, a draft LM, or a head whose config names its type)."""


METHODS: dict[str, MethodInfo] = {m.name: m for m in (
    MethodInfo("eagle3", "head", True, True, "EAGLE-3 head on fused low/mid/high target hidden states "
               "(EAGLE 3.1 drafts are served as eagle3)", True, schedule_on_v1=True),
    MethodInfo("eagle", "head", True, True, "EAGLE head (one decoder layer) on the target's last hidden "
               "state", True, schedule_on_v1=True, v0=True),
    MethodInfo("mtp", "native", False, True, "the target's own multi-token-prediction layers", True,
               schedule_on_v1=True),
    MethodInfo("deepseek_mtp", "native", False, True, "DeepSeek MTP layers (alias of mtp from 0.11.0)", False),
    MethodInfo("step5_mtp", "native", False, True, "Step-5 MTP layers (new in 0.33.0)", False),
    MethodInfo("draft_model", "model", True, False, "a smaller LM of the same vocabulary, autoregressively",
               True, schedule_on_v1=True, v0=True),
    MethodInfo("ngram", "model_free", False, False, "prompt lookup: the continuation of the longest n-gram "
               "match in the context", True, schedule_on_v1=True, v0=True, drafting="lookup"),
    MethodInfo("ngram_gpu", "model_free", False, False, "prompt lookup on the GPU", False,
               drafting="lookup"),
    MethodInfo("suffix", "model_free", False, False, "suffix trees over the prompt and earlier outputs "
               "(arctic-inference)", True, drafting="lookup"),
    MethodInfo("dflash", "model", True, True, "a block-diffusion draft, all positions in parallel", True,
               schedule_on_v1=True, drafting="parallel"),
    MethodInfo("dspark", "model", True, True, "a parallel draft (Model Runner V2 only)", False, drafting="parallel"),
    MethodInfo("medusa", "head", True, True, "Medusa heads on the last hidden state (removed in 0.33.0)", True, v0=True, drafting="parallel"),
    MethodInfo("mlp_speculator", "head", True, True, "IBM MLP speculator (V0 engine only)", False, v0=True),
    MethodInfo("custom_class", "custom", True, False, "a proposer class named by import path", False, drafting="none"),
    MethodInfo("extract_hidden_states", "tooling", False, True, "not a speedup: captures hidden states "
               "for draft training", False, drafting="none"),
    MethodInfo("none", "none", False, False, "no speculation", True, drafting="none"),
)}

ALIASES: dict[str, str] = {"eagle3.1": "eagle3", "eagle31": "eagle3", "eagle-3": "eagle3", "eagle-3.1": "eagle3"}
"""Spellings users give for vLLM's names (EAGLE 3.1 is served as ``method: eagle3``)."""

Method = Literal["eagle3", "eagle", "mtp", "draft_model", "ngram", "suffix", "dflash", "medusa", "none"]
"""The methods the planner models (``modelled`` in the table; a test keeps the two equal)."""

PLANNED: tuple[str, ...] = tuple(m.name for m in METHODS.values() if m.modelled)
DRAFT_WEIGHT_METHODS: tuple[str, ...] = tuple(m.name for m in METHODS.values() if m.draft_weights)
TRAINED_HEAD_METHODS: tuple[str, ...] = tuple(m.name for m in METHODS.values()
                                              if m.modelled and m.draft_weights and m.hidden_states)
"""Modelled methods whose draft reads the target's hidden states (EAGLE/EAGLE-3/Medusa heads, DFlash blocks): trained
for one target; the acceptance model gives each a method level that stands without a named draft."""
SCHEDULE_METHODS: tuple[str, ...] = tuple(m.name for m in METHODS.values() if m.schedule_on_v1)
PROMPT_METHODS: tuple[str, ...] = tuple(m.name for m in METHODS.values() if m.drafting == "lookup")
"""Drafts by looking up the prompt/output (no model); the draft length varies step by step."""
SEPARATE_MODEL_METHODS: tuple[str, ...] = tuple(m.name for m in METHODS.values() if m.family == "model")
WEIGHTLESS_METHODS: tuple[str, ...] = tuple(m.name for m in METHODS.values()
                                            if not m.draft_weights and m.family not in ("none", "tooling"))
"""Speculation without draft weights of its own (prompt lookup, the target's MTP layers)."""


DRAFT_CONFIG_TYPES: dict[str, str] = {"eagle3": "eagle3", "peagle": "eagle3", "dflash": "dflash", "dspark": "dspark",
                                      "medusa": "medusa", "mlp_speculator": "mlp_speculator"}
"""Words in a draft's config (``speculators_model_type``, proposal types, architecture, model_type) →
the method vLLM serves it with, tried in this order (substring match: dflash2 is dflash; P-EAGLE's
``peagle`` is eagle3 with parallel drafting). vLLM reads types eagle3, peagle, dflash, dflash2, dspark
(reference, speculators)."""


def canonical(name: str) -> str:
    """vLLM's name for a method spelling (lower-cased, aliases resolved); unknown names pass through."""
    m = str(name).strip().lower()
    return ALIASES.get(m, m)


def method_info(name: str) -> MethodInfo | None:
    return METHODS.get(canonical(name))


def check_method(name: str, what: str = "method", allowed: tuple[str, ...] | None = None) -> str:
    """The canonical name, or an InputError naming the known methods (exit 2)."""
    from specops.errors import InputError, did_you_mean

    m = canonical(name)
    pool = allowed if allowed is not None else tuple(METHODS)
    if m not in pool:
        raise InputError(f'unknown {what} "{name}".{did_you_mean(m, list(pool))}', f"use one of: {', '.join(pool)}")
    return m


def needs_draft(name: str) -> bool:
    info = method_info(name)
    return bool(info and info.draft_weights)


# --- acceptance math ---------------------------------------------------------------------------------

def solve_linear(a: list[list[float]], b: list[float], *, tiny: float = 1e-12) -> list[float]:
    """x with a·x = b by Gauss-Jordan elimination with partial pivoting (the small systems of the tune fit and the
    ranges' difficulty model); a pivot at or below ``tiny`` leaves its unknown at 0."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        if abs(m[c][c]) <= tiny:
            continue
        for r in range(n):
            if r != c and m[r][c]:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c], strict=True)]
    return [m[i][n] / m[i][i] if abs(m[i][i]) > tiny else 0.0 for i in range(n)]


def bisect(f: Callable[[float], float], target: float, lo: float, hi: float, *, iters: int = 60) -> float:
    """The x in [lo, hi] with f(x) = target for a non-decreasing f (clamped to the ends). The one solver
    every α↔τ↔rate inversion and every break-even search uses."""
    if f(lo) >= target:
        return lo
    if f(hi) <= target:
        return hi
    for _ in range(iters):
        mid = (lo + hi) / 2
        if f(mid) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def expected_tokens(alpha: float, gamma: int, decay: float = 1.0, cap: float = 1.0) -> float:
    """τ = 1 + Σ_{k=1..γ} Π_{i<k} min(cap, α·d^i): tokens per target step, bonus token included
    (Leviathan et al. 2023 §3; d = 1 is the i.i.d. case 1 + α + … + α^γ)."""
    total, p = 1.0, 1.0
    for i in range(gamma):
        p *= min(cap, alpha * decay ** i)
        total += p
    return total


def rate_of_alpha(alpha: float, k: int, decay: float = 1.0, cap: float = 1.0) -> float:
    """accepted / drafted = (τ − 1) / K."""
    if k < 1:
        raise ValueError("K must be >= 1")
    return (expected_tokens(alpha, k, decay, cap) - 1.0) / k


def alpha_from_tau(tau: float, k: int, decay: float = 1.0, cap: float = 1.0) -> float:
    """The α in [0, cap] with expected_tokens(α, K, d) = τ (clamped)."""
    if k < 1:
        raise ValueError("K must be >= 1")
    return bisect(lambda a: expected_tokens(a, k, decay, cap), tau, 0.0, cap)


def alpha_from_rate(rate: float, k: int, decay: float = 1.0, cap: float = 1.0) -> float:
    """The α in [0, cap] whose accepted/drafted rate at K is ``rate`` (clamped)."""
    return alpha_from_tau(1.0 + rate * k, k, decay, cap)


@dataclass(frozen=True)
class Acceptance:
    """Acceptance from vLLM's counters over one window. A window without drafts gives ``None``
    rates: nothing is divided by zero or guessed.

    vLLM counts a step without draft tokens as no draft (0.33 metrics caveat), so τ is per drafted step.
    """

    num_drafts: float
    num_draft_tokens: float
    num_accepted_tokens: float
    accepted_per_position: tuple[float, ...] = ()

    @classmethod
    def pooled(cls, windows: Iterable[Acceptance]) -> Acceptance:
        """The counters of several windows added up (per-position counts padded with zeros), so rates
        are taken over the pooled counts, never averaged."""
        ws = list(windows)
        k = max((len(w.accepted_per_position) for w in ws), default=0)
        return cls(sum(w.num_drafts for w in ws), sum(w.num_draft_tokens for w in ws),
                   sum(w.num_accepted_tokens for w in ws),
                   tuple(sum(w.accepted_per_position[i] for w in ws if i < len(w.accepted_per_position))
                         for i in range(k)))

    @property
    def rate(self) -> float | None:
        """accepted / drafted (equals α only when K = 1)."""
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens > 0 else None

    @property
    def tau(self) -> float | None:
        """Mean acceptance length: 1 + accepted / drafts (bonus token included)."""
        return 1.0 + self.num_accepted_tokens / self.num_drafts if self.num_drafts > 0 else None

    @property
    def per_position(self) -> list[float] | None:
        """accepted at position i / drafts."""
        if self.num_drafts <= 0 or not self.accepted_per_position:
            return None
        return [a / self.num_drafts for a in self.accepted_per_position]

    def mean_k(self) -> float | None:
        """Draft tokens per draft (K, or less when drafts are shorter)."""
        return self.num_draft_tokens / self.num_drafts if self.num_drafts > 0 else None

    def alpha(self, k: int | None = None) -> float | None:
        """The i.i.d. per-token α equivalent at K (default: the mean draft length, rounded)."""
        tau = self.tau
        if tau is None:
            return None
        if k is None:
            mk = self.mean_k()
            k = max(1, round(mk)) if mk else 1
        return alpha_from_tau(tau, k)

    def alpha_drafted(self) -> float | None:
        """The i.i.d. per-token α at the drafted length actually used: drafts of a window mix
        ⌊m⌋ and ⌈m⌉ tokens with mean m = draft tokens / drafts (the least-spread mix with that mean),
        so τ − 1 = (1 − w)·S(α, ⌊m⌋) + w·S(α, ⌈m⌉) with S(α, k) = α + … + α^k. Equals
        :meth:`alpha` at K when every draft had K tokens."""
        tau, m = self.tau, self.mean_k()
        if tau is None or not m:
            return None
        lo = max(1, int(m))
        w = min(1.0, max(0.0, m - lo))
        return bisect(lambda a: (1 - w) * expected_tokens(a, lo) + w * expected_tokens(a, lo + 1), tau, 0.0, 1.0)

    @property
    def first_position_rate(self) -> float | None:
        """accepted at position 0 / drafts: the acceptance of the first drafted token. Every counted
        draft has a position 0, so this one rate is exact per drafted token whatever the mix of draft
        lengths (a γ schedule, short n-gram drafts); later positions are not (vLLM exports no draft
        tokens per position)."""
        if self.num_drafts <= 0 or not self.accepted_per_position:
            return None
        return self.accepted_per_position[0] / self.num_drafts


# --- EAGLE generation ----------------------------------------------------------------------------------

EAGLE_MARKERS = ("fc_norm", "norm_output", "norm_before_fc")


@dataclass(frozen=True)
class EagleGeneration:
    """Which EAGLE-3 generation a draft is, read from its trainer's markers (not ``norm_output`` alone:
    speculators 0.9 sets ``norm_output`` and ``norm_before_fc`` on every EAGLE-3 run; SpecForge 0.2.0
    uses ``norm_output`` only for the lm_head norm while training). ``generation`` None: cannot tell."""

    generation: str | None
    trainer: str | None
    trainer_version: str | None
    markers: tuple[tuple[str, bool], ...]
    reason: str
    mismatch: bool = False
    """True: vLLM serves the draft with a normalisation it was not trained with (SpecForge 0.2.0 +
    norm_output; inferred from the trainer's code, see the reference's corrections)."""

    def record(self) -> dict:
        """What lineage stores."""
        return {"eagle_generation": self.generation, "trainer": self.trainer, "trainer_version": self.trainer_version,
                **{k: v for k, v in self.markers}, "generation_reason": self.reason,
                "norm_mismatch": self.mismatch}


def _version_tuple(text: str | None) -> tuple[int, ...] | None:
    import re

    m = re.match(r"(\d+)\.(\d+)", str(text or ""))
    return (int(m.group(1)), int(m.group(2))) if m else None


def eagle_generation(config: dict, name: str = "") -> EagleGeneration:
    """The EAGLE generation ("3" or "3.1") of an EAGLE-3 draft from its ``config.json`` (and, only when
    the markers cannot tell, its name)."""
    layer = config.get("transformer_layer_config") if isinstance(config.get("transformer_layer_config"), dict) else {}
    markers = tuple((k, bool(config[k] if k in config else layer[k])) for k in EAGLE_MARKERS
                    if k in config or k in layer)
    flags = dict(markers)
    found = config.get("architectures")
    archs = [a for a in found if isinstance(a, str)] if isinstance(found, list) else []
    if any(k in config for k in ("speculators_config", "speculators_model_type", "speculators_version")):
        trainer, version = "speculators", config.get("speculators_version")
    elif any("ForCausalLMEagle3" in a for a in archs):
        trainer, version = "specforge", config.get("specforge_version")
    else:
        trainer, version = None, None
    version = str(version) if version is not None else None

    def verdict(gen: str | None, why: str, mismatch: bool = False) -> EagleGeneration:
        return EagleGeneration(gen, trainer, version, markers, why, mismatch)

    if flags.get("fc_norm"):
        return verdict("3.1", "fc_norm: true (EAGLE 3.1's normalisation before the fusion layer)")
    if flags.get("norm_output"):
        if trainer == "speculators":
            v = _version_tuple(version)
            if flags.get("norm_before_fc") or (v is not None and v >= (0, 9)):
                return verdict("3", "speculators >= 0.9 sets norm_output and norm_before_fc on every EAGLE-3 run")
            if v is not None:
                return verdict("3.1", f"speculators {version} sets norm_output only when asked (--norm-output)")
            return verdict(None, "norm_output from speculators of unknown version: 3 or 3.1")
        if trainer == "specforge":
            return verdict("3", "SpecForge 0.2.0 uses norm_output only for the lm_head norm while training; "
                           "vLLM serves it with post-norm feedback (train/serve mismatch)", mismatch=True)
        return verdict(None, "norm_output alone does not mark an EAGLE 3.1 draft (trainer unknown)")
    lowered = name.lower()
    if any(s in lowered for s in ("eagle3.1", "eagle-3.1", "eagle3_1", "eagle31")):
        return verdict("3.1", "no 3.1 markers; the name says 3.1 (a guess)")
    return verdict("3", "no EAGLE 3.1 markers (fc_norm, norm_output) in config.json")
