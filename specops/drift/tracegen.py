"""A documented, seeded generator of spec-decode traces for testing drift detection.

Model (everything seeded from ``TraceConfig.seed``; same seed, same trace):

- **Time** advances in ticks of ``tick_s`` seconds (default 15 s, a usual scrape interval).
- **Load** is diurnal: drafts per second = ``peak_drafts_per_s`` × (trough + (1 − trough) ×
  (1 + cos(2π (hour − peak_hour) / 24)) / 2); the running batch follows the same curve up to
  ``peak_batch``. Drafts per tick are Poisson.
- **Acceptance** is a per-token α per task label: ``baseline_alpha`` plus AR(1) noise
  x_t = φ x_{t−1} + ε_t with stationary standard deviation ``noise_std`` (prompt mix changes slowly,
  so neighbouring windows are correlated — the hard case for change detectors), minus any injected
  effect below. Each draft then accepts position i with probability α given positions < i were
  accepted (a chain of binomials), which gives per-position counters exactly as vLLM exports them.
- **Counter resets**: engine restarts at random (``resets_per_day``, Poisson); counters go back to
  zero and uptime restarts.
- **Gaps**: ``gaps_per_day`` windows of 2–10 minutes in which a scrape fails.
- **Step drop** at ``drop_at_s``: acceptance *rate* (accepted/drafted, the number vLLM shows) falls by
  ``drop_points`` (0.15 = 15 points) for ``drop_labels`` (None = all labels), converted to the α
  that gives that rate at ``gamma``.
- **Engine-state decay**: α falls by ``decay_per_hour`` per hour of uptime (up to ``decay_max``) and
  KV usage climbs with uptime; a restart (random, or a restart probe through ``restart()``) brings
  both back — the vllm#41838 pattern.
- **Per-batch γ schedule** (``schedule``, ``[[start, end, K], ...]`` as vLLM takes it): each tick
  drafts K tokens per step where K is the schedule's value at the running batch; a K=0 range drafts
  nothing and counts no drafts (vLLM does not count a step without draft tokens).
- **Collapse** at ``collapse_at_s``: the draft is swapped behind the monitor's back and the engine
  restarted (``collapse_restart``; an event ``restart`` in the next window): α becomes
  ``collapse_alpha`` for every label.
- **Changed model** at ``change_at_s``: the live target's fingerprint becomes ``changed_fingerprint``
  and α drops by ``change_drop_points`` of acceptance rate for every label.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable

from pydantic import Field

from specops.drift.observe import ALL, LabelWindow, Observation, Unseen
from specops.models import Strict
from specops.speculation import alpha_from_rate, rate_of_alpha

DAY = 86400.0


class TraceConfig(Strict):
    """Parameters of one simulated deployment."""


    seed: int = Field(0, description="Random seed: the same seed gives the same trace.")
    start: float = Field(1_767_225_600.0, description="Epoch seconds of t=0 (a midnight, UTC).")
    tick_s: float = Field(15.0, gt=0, description="Simulation step and scrape interval (s).")
    gamma: int = Field(3, ge=1, le=16, description="Speculative tokens per step (K).")
    labels: dict[str, float] = Field(default_factory=lambda: {"code": 0.5, "chat": 0.5},
                                     description="Task label -> share of traffic.")
    baseline_alpha: float = Field(0.75, gt=0, lt=1, description="Per-token acceptance α at baseline.")
    label_alpha_offset: dict[str, float] = Field(default_factory=dict,
                                                 description="Per-label offset added to baseline α.")
    noise_std: float = Field(0.025, ge=0, description="Stationary std of the AR(1) noise on α.")
    noise_phi: float = Field(0.95, ge=0, lt=1, description="AR(1) coefficient per tick.")
    peak_drafts_per_s: float = Field(40.0, gt=0, description="Drafts per second at the daily peak.")
    trough: float = Field(0.15, gt=0, le=1, description="Load at the daily trough, as a share of peak.")
    peak_hour: float = Field(15.0, ge=0, lt=24, description="Hour of day (UTC) of peak load.")
    peak_batch: float = Field(24.0, gt=0, description="Running requests at peak.")
    resets_per_day: float = Field(2.0, ge=0, description="Random engine restarts per day (counter resets).")
    gaps_per_day: float = Field(3.0, ge=0, description="Scrape gaps (2-10 min) per day.")
    drop_at_s: float | None = Field(None, description="When the step drop starts (s from start).")
    drop_points: float = Field(0.15, ge=0, lt=1, description="Acceptance-rate points lost at the drop.")
    drop_labels: list[str] | None = Field(None, description="Labels that drop (None: all).")
    decay_per_hour: float = Field(0.0, ge=0, description="α lost per hour of engine uptime.")
    decay_max: float = Field(0.4, ge=0, description="Cap on the decay.")
    kv_base: float = Field(0.35, ge=0, le=1, description="KV usage right after a restart (at peak load).")
    kv_per_hour: float = Field(0.0, ge=0, description="KV usage gained per hour of uptime.")
    initial_uptime_s: float = Field(3600.0, ge=0, description="Engine uptime at t=0.")
    fingerprint: str = Field("sha256:target-v1", description="Live target fingerprint.")
    change_at_s: float | None = Field(None, description="When the target is swapped (s from start).")
    changed_fingerprint: str = Field("sha256:target-v2", description="Fingerprint after the swap.")
    schedule: list[tuple[int, int, int]] | None = Field(None, description="Per-batch γ schedule (K ≤ gamma).")
    collapse_at_s: float | None = Field(None, description="When the draft goes stale (s from start).")
    collapse_alpha: float = Field(0.02, gt=0, lt=1, description="α after the collapse.")
    collapse_restart: bool = Field(True, description="The collapse comes with an engine restart.")
    change_drop_points: float = Field(0.3, ge=0, lt=1, description="Acceptance-rate points lost on swap.")


class SimDeployment:
    """One simulated engine: cumulative counters advancing tick by tick."""

    def __init__(self, name: str, cfg: TraceConfig) -> None:
        self.name, self.cfg = name, cfg
        self.rng = random.Random(cfg.seed)
        self.t = 0.0
        self.uptime = cfg.initial_uptime_s
        self.restarts = 0
        self._noise = {lab: self.rng.gauss(0, cfg.noise_std) for lab in cfg.labels}
        self._counters = self._zero()
        self._gaps = self._draw_gaps()
        self.events: list[str] = []  # lifecycle events since the last scrape (drained by SimSource)
        self._collapsed = False
        k, base = cfg.gamma, cfg.baseline_alpha
        self._drop_alpha = base - alpha_from_rate(max(0.0, rate_of_alpha(base, k) - cfg.drop_points), k)
        self._change_alpha = base - alpha_from_rate(max(0.0, rate_of_alpha(base, k) - cfg.change_drop_points), k)

    def _zero(self) -> dict[str, list[float]]:
        # per label: [drafts, draft_tokens, accepted, pos0, pos1, ...]
        return {lab: [0.0] * (3 + self.cfg.gamma) for lab in self.cfg.labels}

    def _draw_gaps(self) -> list[tuple[float, float]]:
        rng = random.Random(self.cfg.seed * 7919 + 13)
        gaps, t = [], 0.0
        rate = self.cfg.gaps_per_day / DAY
        while rate > 0:
            t += rng.expovariate(rate)
            if t > 30 * DAY:
                break
            gaps.append((t, t + rng.uniform(120, 600)))
        return gaps

    # -- the model ------------------------------------------------------------------------------
    def load(self, t: float) -> float:
        hour = ((self.cfg.start + t) % DAY) / 3600.0
        shape = (1 + math.cos(2 * math.pi * (hour - self.cfg.peak_hour) / 24)) / 2
        return self.cfg.trough + (1 - self.cfg.trough) * shape

    def fingerprint_at(self, t: float) -> str:
        c = self.cfg
        return c.changed_fingerprint if c.change_at_s is not None and t >= c.change_at_s else c.fingerprint

    def alpha(self, label: str, t: float) -> float:
        c = self.cfg
        a = c.baseline_alpha + c.label_alpha_offset.get(label, 0.0) + self._noise[label]
        if c.drop_at_s is not None and t >= c.drop_at_s and (c.drop_labels is None or label in c.drop_labels):
            a -= self._drop_alpha
        if c.change_at_s is not None and t >= c.change_at_s:
            a -= self._change_alpha
        a -= min(c.decay_max, c.decay_per_hour * self.uptime / 3600.0)
        if c.collapse_at_s is not None and t >= c.collapse_at_s:
            a = c.collapse_alpha
        return min(0.99, max(0.01, a))

    def k_at(self, t: float) -> int:
        """Tokens drafted per step at this tick's running batch (the schedule, else γ)."""
        c = self.cfg
        if not c.schedule:
            return c.gamma
        batch = max(1, round(c.peak_batch * self.load(t)))
        return next((min(k, c.gamma) for lo, hi, k in c.schedule if lo <= batch <= hi), c.gamma)

    def kv_usage(self, t: float) -> float:
        c = self.cfg
        return min(1.0, c.kv_base * self.load(t) / 1.0 + c.kv_per_hour * self.uptime / 3600.0)

    def restart(self) -> None:
        """Restart the engine: counters reset, uptime 0, engine-state decay gone."""
        self._counters = self._zero()
        self.uptime = 0.0
        self.restarts += 1
        self.events.append("restart")

    def advance(self, to_t: float) -> None:
        c, rng = self.cfg, self.rng
        reset_p = c.resets_per_day * c.tick_s / DAY
        sd = c.noise_std * math.sqrt(1 - c.noise_phi ** 2)
        while self.t + c.tick_s <= to_t + 1e-9:
            self.t += c.tick_s
            self.uptime += c.tick_s
            if rng.random() < reset_p:
                self.restart()
            if c.collapse_at_s is not None and self.t >= c.collapse_at_s and not self._collapsed:
                self._collapsed = True
                if c.collapse_restart:
                    self.restart()
            mean = c.peak_drafts_per_s * self.load(self.t) * c.tick_s
            k = self.k_at(self.t)
            for lab, share in c.labels.items():
                self._noise[lab] = c.noise_phi * self._noise[lab] + rng.gauss(0, sd)
                n = _poisson(rng, mean * share) if k > 0 else 0
                a = self.alpha(lab, self.t)
                row = self._counters[lab]
                row[0] += n
                row[1] += n * k
                alive = n
                for i in range(k):
                    alive = _binomial(rng, alive, a)
                    row[3 + i] += alive
                    row[2] += alive

    def in_gap(self, t: float) -> bool:
        return any(a <= t < b for a, b in self._gaps)

    def counters(self) -> dict[str, tuple[float, ...]]:
        return {lab: tuple(row) for lab, row in self._counters.items()}


def _poisson(rng: random.Random, lam: float) -> int:
    if lam <= 0:
        return 0
    if lam > 50:
        return max(0, round(rng.gauss(lam, math.sqrt(lam))))
    limit, k, p = math.exp(-lam), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def _binomial(rng: random.Random, n: int, p: float) -> int:
    if n <= 0:
        return 0
    if n > 40:
        return min(n, max(0, round(rng.gauss(n * p, math.sqrt(n * p * (1 - p))))))
    return sum(1 for _ in range(n) if rng.random() < p)


class SimSource:
    """A ``MeasurementSource`` over simulated deployments, read at the (fake) clock's time.

    Each fetch is one scrape per deployment: the window is the delta since the previous successful
    scrape (a reset counter counts from zero, as Prometheus' ``increase`` does); a scrape inside a
    gap gives ``Unseen``. ``queries`` counts fetch calls (one batched query per cycle).
    """

    def __init__(self, sims: dict[str, SimDeployment], clock) -> None:
        self.sims, self.clock = sims, clock
        self._last: dict[str, tuple[float, dict[str, tuple[float, ...]]]] = {}
        self.queries = 0

    def fetch(self, deployments: Iterable[str]) -> dict[str, Observation | Unseen]:
        self.queries += 1
        out: dict[str, Observation | Unseen] = {}
        for name in deployments:
            sim = self.sims.get(name)
            if sim is None:
                out[name] = Unseen("no series for this deployment")
                continue
            out[name] = self._one(name, sim)
        return out

    def _one(self, name: str, sim: SimDeployment) -> Observation | Unseen:
        t = self.clock.now() - sim.cfg.start
        sim.advance(t)
        if sim.in_gap(t):
            return Unseen("scrape failed (simulated gap)")
        now = sim.counters()
        prev = self._last.get(name)
        self._last[name] = (t, now)
        if prev is None:
            return Unseen("first scrape: no window yet")
        reset = False
        labels: dict[str, LabelWindow] = {}
        for lab, row in now.items():
            before = prev[1].get(lab, (0.0,) * len(row))
            if any(a < b for a, b in zip(row, before, strict=False)):
                reset, before = True, (0.0,) * len(row)
            d = [a - b for a, b in zip(row, before, strict=False)]
            labels[lab] = LabelWindow(d[0], d[1], d[2], tuple(d[3:]))
        total = [sum(w) for w in zip(*([lw.drafts, lw.draft_tokens, lw.accepted, *lw.accepted_per_pos]
                                        for lw in labels.values()), strict=False)]
        labels[ALL] = LabelWindow(total[0], total[1], total[2], tuple(total[3:]))
        events, sim.events = tuple(sim.events), []
        return Observation(deployment=name, at=self.clock.now(), window_s=t - prev[0], labels=labels,
                           gamma=sim.cfg.gamma, kv_usage=sim.kv_usage(t), running=sim.cfg.peak_batch * sim.load(t),
                           uptime_s=sim.uptime, target_fingerprint=sim.fingerprint_at(t), counter_reset=reset,
                           events=events)


class FakeClock:
    """A clock for tests and simulations: ``sleep`` advances time instantly."""

    def __init__(self, start: float = 1_767_225_600.0) -> None:
        self.t = start

    def now(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += max(0.0, seconds)


def generate(cfg: TraceConfig, duration_s: float, every_s: float = 60.0,
             name: str = "sim") -> list[Observation | Unseen]:
    """An offline trace: one observation (or Unseen) every ``every_s`` seconds for ``duration_s``."""
    clock = FakeClock(cfg.start)
    src = SimSource({name: SimDeployment(name, cfg)}, clock)
    out = []
    while clock.now() - cfg.start <= duration_s:
        out.append(src.fetch([name])[name])
        clock.sleep(every_s)
    return out
