"""Adaptive γ at the control-plane level: propose a γ or a per-batch schedule, never flapping.

Live per-position acceptance is smoothed (an exponentially weighted sum of accepted-per-position and
drafts counters, half-life ``halflife_minutes``), load is kept as the recent history of running batch
sizes. A ``Predictor`` — the performance model, injected — gives the predicted speedup of γ at a
batch size for that acceptance. The controller scores a configuration as its mean predicted speedup
over the recent loads, and proposes the best one only when

- it beats the current one by at least ``min_gain`` (relative; hysteresis),
- it has been the best for ``confirm_evaluations`` consecutive evaluations (one every
  ``evaluate_every_windows`` windows, staggered across deployments), and
- ``min_dwell_minutes`` have passed since the last change.

Every proposal carries the numbers behind it (acceptance, loads, scores per γ).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from specops.drift.observe import Observation
from specops.models import Strict

Schedule = tuple[tuple[int, int, int], ...]  # vLLM num_speculative_tokens_per_batch_size: (start, end, K)


@dataclass(frozen=True)
class AcceptanceProfile:
    """Per-token α (i.i.d. equivalent) and measured conditional acceptance per position."""

    alpha: float
    conditional: tuple[float, ...] = ()

    def accept(self, i: int) -> float:
        return self.conditional[i] if i < len(self.conditional) else self.alpha


Predictor = Callable[[AcceptanceProfile, int, float], float]  # (acceptance, γ, batch) -> speedup (γ=0: 1)


def reference_predictor(draft_cost: float = 0.05, overhead: float = 0.03,
                        verify_per_token_batch: float = 0.004) -> Predictor:
    """A stand-in for the planner's performance model (tests, benchmarks).

    Leviathan et al. 2023 §3 with a fixed per-step overhead and a verification cost that grows with
    γ × batch (the step stops being memory-bound): speedup = E[tokens per step] /
    (1 + γ·c + overhead + v·γ·batch).
    """

    def predict(acc: AcceptanceProfile, gamma: int, batch: float) -> float:
        if gamma <= 0:
            return 1.0
        expected, p = 1.0, 1.0
        for i in range(gamma):
            p *= acc.accept(i)
            expected += p
        return expected / (1 + gamma * draft_cost + overhead + verify_per_token_batch * gamma * max(batch, 1.0))

    return predict


class GammaPolicy(Strict):
    """How the monitor adapts γ (part of a policy)."""


    mode: Literal["off", "propose", "apply"] = Field("propose", description="off, propose only, or apply.")
    kind: Literal["gamma", "schedule"] = Field(
        "schedule", description="A single γ, or a per-batch schedule (num_speculative_tokens_per_batch_size).")
    max_gamma: int = Field(8, ge=1, le=16, description="Largest γ considered.")
    min_gain: float = Field(0.05, ge=0, description="Relative predicted gain needed to change (hysteresis).")
    min_dwell_minutes: float = Field(60, ge=0, description="Minimum time between two changes.")
    evaluate_every_windows: int = Field(5, ge=1, description="Re-evaluate the choice every N windows (staggered "
                                        "across deployments: the performance model is not free).")
    confirm_evaluations: int = Field(3, ge=1, description="Evaluations the new choice must stay best before a change.")
    halflife_minutes: float = Field(30, gt=0, description="Half-life of the acceptance smoothing.")
    load_windows: int = Field(1440, ge=1, description="Recent windows of load used to score a configuration.")
    min_drafts: float = Field(50, ge=1, description="Windows with fewer drafts do not update acceptance.")
    batch_buckets: list[int] = Field(default_factory=lambda: [1, 2, 4, 8, 16, 32, 64, 128, 256, 1024],
                                     description="Upper bounds of the batch ranges of a schedule.")


class GammaProposal(Strict):
    """One proposed change, with the numbers behind it."""


    deployment: str
    at: float
    current: list[tuple[int, int, int]] = Field(description="Current schedule (one range = single γ).")
    proposed: list[tuple[int, int, int]] = Field(description="Proposed schedule.")
    gamma: int = Field(description="γ at the current load under the proposal.")
    score_current: float = Field(description="Mean predicted speedup of the current config over recent loads.")
    score_proposed: float = Field(description="Same for the proposal.")
    alpha: float
    conditional: list[float]
    load_mean: float
    speedup_by_gamma: dict[int, float] = Field(description="Predicted speedup per γ at the mean load.")


def single(gamma: int, max_batch: int = 1024) -> Schedule:
    return ((1, max_batch, gamma),)


def gamma_at(schedule: Sequence[tuple[int, int, int]], batch: float) -> int:
    b = max(1, round(batch))
    for start, end, k in schedule:
        if start <= b <= end:
            return k
    return schedule[-1][2]


class GammaController:
    def __init__(self, deployment: str, policy: GammaPolicy, predictor: Predictor, current: Schedule,
                 window_s: float = 60.0) -> None:
        self.deployment, self.policy, self.predictor = deployment, policy, predictor
        self.current: Schedule = tuple(tuple(r) for r in current)  # type: ignore[assignment]
        self.decay = 0.5 ** (window_s / (policy.halflife_minutes * 60.0))
        self.drafts = 0.0
        self.accepted_pos: list[float] = []
        self.alpha_num = self.alpha_den = 0.0
        self.loads: deque[int] = deque()
        self.load_hist: Counter[int] = Counter()
        self.last_change: float | None = None
        self._candidate: Schedule | None = None
        self._candidate_count = 0
        self.changes: list[GammaProposal] = []
        self._tick = sum(deployment.encode()) % policy.evaluate_every_windows  # stagger deployments

    def profile(self) -> AcceptanceProfile | None:
        if self.drafts <= 0 or self.alpha_den <= 0:
            return None
        rates = [a / self.drafts for a in self.accepted_pos]
        cond, prev = [], 1.0
        for r in rates:
            cond.append(min(1.0, r / prev) if prev > 0 else 0.0)
            prev = r
        return AcceptanceProfile(alpha=self.alpha_num / self.alpha_den, conditional=tuple(cond))

    def _observe(self, obs: Observation) -> None:
        w = obs.total
        if obs.running is not None:
            b = max(1, round(obs.running))
            self.loads.append(b)
            self.load_hist[b] += 1
            if len(self.loads) > self.policy.load_windows:
                old = self.loads.popleft()
                self.load_hist[old] -= 1
                if not self.load_hist[old]:
                    del self.load_hist[old]
        if w is None or w.drafts < self.policy.min_drafts or w.alpha is None:
            return
        d = self.decay
        self.drafts = d * self.drafts + w.drafts
        if len(self.accepted_pos) != len(w.accepted_per_pos):
            self.accepted_pos = [0.0] * len(w.accepted_per_pos)
        self.accepted_pos = [d * a + x for a, x in zip(self.accepted_pos, w.accepted_per_pos, strict=False)]
        self.alpha_num = d * self.alpha_num + w.alpha * w.drafts
        self.alpha_den = d * self.alpha_den + w.drafts

    def score(self, schedule: Schedule, acc: AcceptanceProfile) -> float:
        hist = self.load_hist or Counter({1: 1})
        total = sum(hist.values())
        return sum(n * self.predictor(acc, gamma_at(schedule, b), b) for b, n in hist.items()) / total

    def best(self, acc: AcceptanceProfile) -> Schedule:
        pol = self.policy
        gammas = range(0, pol.max_gamma + 1)
        top = pol.batch_buckets[-1]
        if pol.kind == "gamma":
            return single(max(gammas, key=lambda g: (self.score(single(g, top), acc), -g)), top)
        ranges, start = [], 1
        for end in pol.batch_buckets:
            mid = (start * end) ** 0.5
            k = max(gammas, key=lambda g: (self.predictor(acc, g, mid), -g))
            if ranges and ranges[-1][2] == k:
                ranges[-1] = (ranges[-1][0], end, k)
            else:
                ranges.append((start, end, k))
            start = end + 1
        return tuple(ranges)

    def step(self, obs: Observation) -> GammaProposal | None:
        """Feed one window; return a proposal when a change is due (and record it as made)."""
        self._observe(obs)
        self._tick += 1
        if self._tick % self.policy.evaluate_every_windows:
            return None
        acc = self.profile()
        if self.policy.mode == "off" or acc is None:
            return None
        best = self.best(acc)
        s_cur, s_best = self.score(self.current, acc), self.score(best, acc)
        if best == self.current or s_best < s_cur * (1 + self.policy.min_gain):
            self._candidate, self._candidate_count = None, 0
            return None
        self._candidate_count = self._candidate_count + 1 if best == self._candidate else 1
        self._candidate = best
        dwell_ok = self.last_change is None or obs.at - self.last_change >= self.policy.min_dwell_minutes * 60
        if self._candidate_count < self.policy.confirm_evaluations or not dwell_ok:
            return None
        mean_load = sum(self.loads) / len(self.loads) if self.loads else 1.0
        prop = GammaProposal(
            deployment=self.deployment, at=obs.at, current=list(self.current), proposed=list(best),
            gamma=gamma_at(best, obs.running or mean_load), score_current=round(s_cur, 4),
            score_proposed=round(s_best, 4), alpha=round(acc.alpha, 4),
            conditional=[round(c, 4) for c in acc.conditional], load_mean=round(mean_load, 2),
            speedup_by_gamma={g: round(self.predictor(acc, g, mean_load), 4)
                              for g in range(self.policy.max_gamma + 1)})
        self.current, self.last_change = best, obs.at
        self._candidate, self._candidate_count = None, 0
        self.changes.append(prop)
        return prop
