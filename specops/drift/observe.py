"""What the drift monitor sees each cycle: one ``Observation`` per deployment, or ``Unseen``.

An ``Observation`` is one window of spec-decode counters per task label (``""`` = all traffic) plus
the gauges the classifier uses (KV usage, running requests, uptime) and, when known, the live
target's fingerprint. It is deliberately small and cheap (1,000 deployments per cycle).

``observation_from_measurement`` adapts the metrics layer's ``specops.metrics.types.Measurement``
(one window of one group), so any source that yields Measurements plugs in unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

from specops.speculation import Acceptance

ALL = ""  # the label of "all traffic of the deployment"


@dataclass(frozen=True)
class LabelWindow:
    """Spec-decode counter deltas of one task label over one window."""

    drafts: float
    draft_tokens: float
    accepted: float
    accepted_per_pos: tuple[float, ...] = ()

    @property
    def k(self) -> int:
        if self.accepted_per_pos:
            return len(self.accepted_per_pos)
        return max(1, round(self.draft_tokens / self.drafts)) if self.drafts > 0 else 1

    @cached_property
    def counts(self) -> Acceptance:
        return Acceptance(self.drafts, self.draft_tokens, self.accepted, tuple(self.accepted_per_pos))

    @property
    def acceptance_rate(self) -> float | None:
        return self.counts.rate

    @property
    def tau(self) -> float | None:
        """Mean acceptance length τ = 1 + accepted / drafts (bonus token included)."""
        return self.counts.tau

    @property
    def mean_drafted(self) -> float | None:
        """Drafted tokens per drafted step (num_draft_tokens / num_drafts): the drafted length the
        window actually used, next to τ (K, or less with a γ schedule or short n-gram drafts)."""
        return self.counts.mean_k()

    @property
    def varying(self) -> bool:
        """Drafts were shorter than K on average: the drafted length varied within the window."""
        m = self.mean_drafted
        return m is not None and m < self.k - 0.05

    @cached_property
    def alpha(self) -> float | None:
        """Per-token α equivalent of τ at the drafted length actually used (num_draft_tokens /
        num_drafts; K when every draft had K tokens): comparable across γ changes."""
        return self.counts.alpha_drafted()

    @property
    def first_rate(self) -> float | None:
        """Acceptance of the first drafted token (accepted at position 0 / drafts): exact per drafted
        token whatever the mix of draft lengths."""
        return self.counts.first_position_rate

    @property
    def position_rates(self) -> tuple[float, ...]:
        """p_i = P(first i+1 drafts accepted), per drafted step; when :attr:`varying`, positions past 0
        divide by steps that never drafted them (lower bounds: vLLM exports no draft tokens per position)."""
        return tuple(self.counts.per_position or ())


@dataclass(frozen=True)
class Observation:
    """One window of one deployment, as the monitor consumes it."""

    deployment: str
    at: float  # window end, epoch seconds
    window_s: float
    labels: Mapping[str, LabelWindow]  # ALL ("") is always present when speculation is on
    gamma: int | None = None
    kv_usage: float | None = None
    running: float | None = None
    waiting: float | None = None
    tpot_p50: float | None = None
    uptime_s: float | None = None
    target_fingerprint: str | None = None
    counter_reset: bool = False
    notes: tuple[str, ...] = ()
    prefix_hit_rate: float | None = None  # prefix-cache hits / queries in the window (None: not exported)
    external_hit_rate: float | None = None  # KV-connector cache hits / queries (None: no connector, no queries)
    external_hits: float | None = None  # tokens whose KV a connector restored in the window
    generated: float | None = None  # output tokens emitted in the window (vllm:generation_tokens_total)
    events: tuple[str, ...] = ()  # engine lifecycle events seen in the window: restart, sleep, wake_up, weight_update
    requests_finished: float | None = None  # requests finished in the window (the capacity metric's load; issue 44)

    @property
    def total(self) -> LabelWindow | None:
        return self.labels.get(ALL)


@dataclass(frozen=True)
class Unseen:
    """The source could not see this deployment this cycle, and why."""

    reason: str


class MeasurementSource(Protocol):
    """Where observations come from (PromQL, direct scrapes, a simulation).

    ``fetch`` must use a constant number of queries whatever the number of deployments, and return an
    entry for every requested name. It may raise ``specops.drift.monitor.Retry`` (transient, e.g.
    Prometheus unreachable) or ``Fatal``.
    """

    def fetch(self, deployments: Iterable[str]) -> dict[str, Any]:  # Observation | Measurement | Unseen
        ...


@dataclass
class LabelledMeasurements:
    """A Measurement per task label (``""`` = all traffic), as a source may return them."""

    by_label: dict[str, Any] = field(default_factory=dict)


def observation_from_measurement(m: Any, *, labels: Mapping[str, Any] | None = None,
                                 uptime_s: float | None = None,
                                 target_fingerprint: str | None = None) -> Observation | Unseen:
    """Adapt ``specops.metrics.types.Measurement`` (and optional per-label Measurements)."""
    if not m.speculation:
        return Unseen("no vllm:spec_decode_* counters (speculation off, or stats disabled)")
    wins = {ALL: _label_window(m)}
    for name, lm in (labels or {}).items():
        wins[name] = _label_window(lm)
    return Observation(
        deployment=m.deployment, at=m.window_end.timestamp(), window_s=m.seconds, labels=wins,
        gamma=m.num_speculative_tokens, kv_usage=m.kv_cache_usage, running=m.requests_running,
        waiting=m.requests_waiting, tpot_p50=m.tpot_p50, uptime_s=uptime_s,
        target_fingerprint=target_fingerprint, counter_reset=m.counter_reset, notes=tuple(m.notes),
        prefix_hit_rate=getattr(m, "prefix_hit_rate", None), external_hit_rate=getattr(m, "external_prefix_hit_rate", None),
        external_hits=getattr(m, "external_prefix_cache_hits", None), generated=m.generation_tokens,
        requests_finished=getattr(m, "requests_finished", None))


def _label_window(m: Any) -> LabelWindow:
    return LabelWindow(drafts=m.num_drafts or 0.0, draft_tokens=m.num_draft_tokens or 0.0,
                       accepted=m.num_accepted_tokens or 0.0,
                       accepted_per_pos=tuple(m.accepted_per_position))


def as_observation(name: str, value: Any) -> Observation | Unseen:
    """Normalise what a source returned for ``name``."""
    if isinstance(value, (Observation, Unseen)):
        return value
    if value is None:
        return Unseen("the source returned nothing for this deployment")
    if isinstance(value, LabelledMeasurements):
        total = value.by_label.get(ALL)
        if total is None:
            return Unseen("no all-traffic measurement")
        return observation_from_measurement(total, labels={k: v for k, v in value.by_label.items() if k})
    if hasattr(value, "num_drafts") and hasattr(value, "window_end"):
        return observation_from_measurement(value)
    return Unseen(f"the source returned an unexpected {type(value).__name__}")
