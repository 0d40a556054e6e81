"""The canary's promotion gate: an always-valid sequential test of a candidate draft against the
incumbent, with a stated false-promotion rate.

What is compared is what users pay for: the acceptance the engines realise on real requests — accepted
draft tokens per drafted token (= accepted tokens per drafted step / γ), per request (from the
response's ``metrics.speculative_decoding`` when the engine runs with
``--per-request-spec-decode-metrics``, or the counters' deltas around one request) or per window (each
arm's ``vllm:spec_decode_*`` counter deltas over the same window). One sample is the difference
``d = candidate - incumbent`` of one pair (the same prompt, or the same window), in [-1, 1].

The test is a pair of betting martingales (Waudby-Smith & Ramdas, "Estimating means of bounded random
variables by betting", JRSS-B 2023; the bet is their aGRAPA plug-in, capped):

- **better**: against H0 ``E[d] <= min_gain`` the wealth ``K_t = prod(1 + l_i (d_i - min_gain))`` with a
  bet ``l_i`` chosen from the samples *before* ``i``. Under H0 ``K_t`` is a non-negative supermartingale,
  so by Ville's inequality ``P(K_t >= 1/alpha for some t) <= alpha``: the false-promotion rate is at most
  ``alpha`` however often one looks, and whenever one stops.
- **worse**: the mirror image against H0 ``E[d] >= -worse_margin`` at level ``alpha``.

It stops at the first sample where one wealth reaches ``1/alpha`` ("better" or "worse") or when the
budget of samples is spent ("no-decision": could not evaluate, never a promotion). The power stated with
a verdict is simulated (seeded) at ``design_effect`` over the margin with the spread the samples
showed: how likely this budget was to say "better" if the gain were that large.

Validity needs each sample's conditional mean given the earlier ones to respect H0. Paired samples
(the same prompt on both engines; the same time window on both arms) have that; windows of two arms
taken at *different* times do not when the traffic drifts (see bench/aa_bench.py, which measures the
false-promotion rate on block-resampled recorded windows).

Pure Python (no numpy): it runs inside the canary loop and in the bench.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from typing import Literal

from pydantic import Field, model_validator

from specops.models import Strict

Decision = Literal["better", "worse", "no-decision"]
BET_CAP = 0.75
"""Largest fraction of the admissible bet taken (the bet must keep ``1 + l (d - m) >= 0`` for every
``d`` in [-1, 1]; WSR 2023 use 1/2 or 3/4)."""


class SequentialTest(Strict):
    """Parameters of the canary's sequential test (spec block ``canary:``, `specops heal` options)."""

    alpha: float = Field(0.05, gt=0.0, le=0.5, description="Stated false-promotion rate: the probability of "
                         "saying 'better' when the candidate's true gain is at most min_gain (also the false "
                         "'worse' rate).")
    min_gain: float = Field(0.0, ge=0.0, lt=1.0, description="Acceptance-rate gain (accepted/drafted tokens) the "
                            "candidate must beat to be promoted.")
    worse_margin: float = Field(0.0, ge=0.0, lt=1.0, description="'worse' means the candidate's acceptance is "
                                "below the incumbent's by more than this.")
    budget: int = Field(32, ge=2, le=100000, description="Most samples (requests or windows) the test may use; "
                        "spent without a decision it ends 'no-decision' (could not evaluate; no promotion).")
    design_effect: float = Field(0.1, gt=0.0, le=1.0, description="Gain over min_gain at which the stated power "
                                 "is computed.")

    @model_validator(mode="after")
    def _design(self):
        if self.min_gain + self.design_effect > 1.0:
            raise ValueError(f"min_gain + design_effect must be at most 1 (got {self.min_gain} + "
                             f"{self.design_effect}); lower design_effect")
        return self


class Verdict(Strict):
    """Where the test stands (or where it stopped)."""

    decision: Decision = Field(description="better, worse, or no-decision (could not evaluate).")
    stopped: bool = Field(description="The test has ended (a decision, or the budget spent).")
    samples: int = Field(description="Samples used.")
    budget: int = Field(description="The budget of samples.")
    alpha: float = Field(description="Stated false-promotion (and false-worse) rate.")
    min_gain: float = Field(description="Margin the gain had to beat.")
    worse_margin: float = Field(description="Margin below the incumbent for 'worse'.")
    mean_gain: float | None = Field(description="Mean of the samples (candidate - incumbent acceptance).")
    sd: float | None = Field(description="Standard deviation of the samples.")
    wealth_better: float = Field(description="Wealth of the 'better' bet (stops at 1/alpha).")
    wealth_worse: float = Field(description="Wealth of the 'worse' bet (stops at 1/alpha).")
    power: float | None = Field(None, description="Simulated chance this budget says 'better' at design_effect "
                                "over min_gain with the observed spread.")
    design_effect: float = Field(description="Gain over min_gain the power is stated for.")

    def line(self) -> str:
        """One line for people."""
        gain = f"mean gain {self.mean_gain:+.3f}" if self.mean_gain is not None else "no samples"
        power = (f", power {self.power:.2f} for a gain of {self.min_gain + self.design_effect:g}"
                 if self.power is not None else "")
        what = {"better": "better", "worse": "worse",
                "no-decision": "no decision within the budget (could not evaluate; not promoted)"}[self.decision]
        if not self.stopped:
            what = "undecided so far"
        return (f"{what} after {self.samples}/{self.budget} samples ({gain}, alpha {self.alpha:g}, margin "
                f"{self.min_gain:g}{power})")


class _Bet:
    """One betting martingale against H0 ``E[x] <= m`` for ``x`` in [-1, 1] (aGRAPA bet, capped)."""

    def __init__(self, m: float) -> None:
        self.m = m
        self.cap = BET_CAP / (1.0 + m)
        self.n = 0
        self.total = 0.0
        self.sq = 0.0
        self.log_wealth = 0.0

    def bet(self) -> float:
        if self.n == 0:  # fixed in advance (no data yet): half the cap
            return self.cap / 2
        mean = self.total / self.n
        var = max(self.sq / self.n - mean * mean, 0.0)
        edge = mean - self.m
        if edge <= 0:
            return 0.0
        return min(self.cap, edge / (var + edge * edge))

    def add(self, x: float) -> None:
        lam = self.bet()  # chosen before x is seen: predictable
        self.log_wealth += math.log1p(lam * (x - self.m))
        self.n += 1
        self.total += x
        self.sq += x * x


class Sequential:
    """Feed samples one by one with :meth:`add`; :attr:`verdict` says where the test stands."""

    def __init__(self, params: SequentialTest | None = None) -> None:
        self.p = params or SequentialTest()
        self.better = _Bet(self.p.min_gain)
        self.worse = _Bet(self.p.worse_margin)  # on -d: H0 E[-d] <= worse_margin
        self.samples: list[float] = []
        self.decision: Decision | None = None
        self._threshold = math.log(1.0 / self.p.alpha)

    @property
    def stopped(self) -> bool:
        return self.decision is not None

    def add(self, d: float) -> Decision | None:
        """One sample (candidate - incumbent, in [-1, 1]); returns the decision once there is one."""
        if self.stopped:
            raise ValueError("the test has stopped; start a new one")
        if not -1.0 <= d <= 1.0 or math.isnan(d):
            raise ValueError(f"a sample must be a difference of two rates in [-1, 1] (got {d})")
        self.samples.append(d)
        self.better.add(d)
        self.worse.add(-d)
        if self.better.log_wealth >= self._threshold:
            self.decision = "better"
        elif self.worse.log_wealth >= self._threshold:
            self.decision = "worse"
        elif len(self.samples) >= self.p.budget:
            self.decision = "no-decision"
        return self.decision

    def close(self) -> Decision:
        """No more samples will come (the prompts or the time ran out): undecided is no-decision."""
        if self.decision is None:
            self.decision = "no-decision"
        return self.decision

    def verdict(self, *, with_power: bool = True, power_runs: int = 400, seed: int = 0) -> Verdict:
        n = len(self.samples)
        mean = sum(self.samples) / n if n else None
        sd = math.sqrt(max(sum((x - mean) ** 2 for x in self.samples) / (n - 1), 0.0)) if n > 1 else None
        power = (simulated_power(self.p, sd if sd is not None else 0.25, runs=power_runs, seed=seed)
                 if with_power else None)
        return Verdict(decision=self.decision or "no-decision", stopped=self.stopped, samples=n,
                       budget=self.p.budget, alpha=self.p.alpha, min_gain=self.p.min_gain,
                       worse_margin=self.p.worse_margin, mean_gain=None if mean is None else round(mean, 6),
                       sd=None if sd is None else round(sd, 6), wealth_better=_wealth(self.better),
                       wealth_worse=_wealth(self.worse), power=power, design_effect=self.p.design_effect)


def _wealth(b: _Bet) -> float:
    return round(math.exp(min(b.log_wealth, 700.0)), 6)


def run(samples: Iterable[float], params: SequentialTest | None = None) -> Sequential:
    """Run the test over ``samples`` until it stops or they run out (then no-decision)."""
    t = Sequential(params)
    for d in samples:
        if t.add(d):
            break
    t.close()
    return t


def simulated_power(params: SequentialTest, sd: float, *, runs: int = 400, seed: int = 0) -> float:
    """Share of ``runs`` simulated canaries (samples normal with mean ``min_gain + design_effect`` and
    spread ``sd``, clipped to [-1, 1]) that stop "better" within the budget. Seeded: the same inputs
    give the same figure."""
    rng = random.Random(seed)
    mu = params.min_gain + params.design_effect
    sd = max(sd, 1e-3)
    hits = 0
    for _ in range(runs):
        t = Sequential(params)
        for _ in range(params.budget):
            if t.add(min(1.0, max(-1.0, rng.gauss(mu, sd)))):
                break
        hits += t.decision == "better"
    return round(hits / runs, 3)


def rate_difference(candidate: tuple[float, float], incumbent: tuple[float, float]) -> float | None:
    """One sample from two (accepted, drafted) token counts: the acceptance-rate difference, or None
    when either side drafted nothing (that pair says nothing)."""
    (ca, cd), (ia, idr) = candidate, incumbent
    if cd <= 0 or idr <= 0:
        return None
    return min(1.0, max(0.0, ca / cd)) - min(1.0, max(0.0, ia / idr))


def binomial_upper(k: int, n: int, confidence: float = 0.95) -> float:
    """One-sided Clopper-Pearson upper bound on a rate seen ``k`` times in ``n`` runs: the p at which
    P(X <= k) = 1 - confidence (the binomial tail solved by :func:`specops.speculation.bisect`)."""
    if n <= 0:
        raise ValueError("n must be positive")
    if k >= n:
        return 1.0
    target = 1.0 - confidence

    def tail(p: float) -> float:  # P(X <= k | p), in logs (n may be thousands)
        lp, lq = math.log(max(p, 1e-300)), math.log(max(1.0 - p, 1e-300))
        return sum(math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq)
                   for i in range(k + 1))

    from specops.speculation import bisect  # the one solver

    return bisect(lambda p: 1.0 - tail(p), 1.0 - target, k / n, 1.0)
