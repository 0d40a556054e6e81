"""Detectors: acceptance floors sustained over N windows, and change against a recorded baseline.

Both work on the per-token α equivalent of the window's mean acceptance length τ (α solves
(1 − α^(K+1)) / (1 − α) = τ), so a γ change is not mistaken for drift and the floors mean the same
thing at every γ (see issue 7).

- ``FloorDetector``: raises when α stays below the floor for ``floor_windows`` consecutive usable
  windows; clears after as many windows back above floor + ``floor_margin`` (hysteresis).
- ``ChangeDetector``: one-sided standardised CUSUM on α against the recorded baseline:
  z = (μ₀ − α) / √(σ₀² + se²), S = min(cap, max(0, S + z − k)); raises at S ≥ h, clears only after
  ``clear_windows`` consecutive windows with z < ``clear_z`` (hysteresis). se is the window's sampling error,
  so quiet night-time windows count for less.

Windows with fewer than ``min_drafts`` drafts are skipped (neither alarm nor clear).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydantic import Field

from specops.drift.observe import LabelWindow, Observation
from specops.models import Strict

BreakEven = float | Callable[[int, float], float]  # (gamma, batch) -> α below which speedup < 1


class DetectionConfig(Strict):
    """Detector settings (part of a policy)."""


    min_drafts: float = Field(50, ge=1, description="Windows with fewer drafts are skipped.")
    floor_windows: int = Field(5, ge=1, description="Consecutive windows below a floor before it is flagged.")
    floor_margin: float = Field(0.02, ge=0, description="α above the floor needed to clear (hysteresis).")
    cusum_k: float = Field(2.0, ge=0, description="CUSUM slack, in baseline standard deviations.")
    cusum_h: float = Field(6.0, gt=0, description="CUSUM alarm threshold, in standard deviations.")
    cusum_cap: float = Field(12.0, gt=0, description="Cap on the CUSUM sum (bounds time to clear).")
    min_sigma: float = Field(0.01, gt=0, description="Floor on the baseline std (a too-quiet baseline).")
    clear_windows: int = Field(5, ge=1, description="Consecutive near-baseline windows to clear a drop.")
    clear_z: float = Field(1.0, description="A window is near baseline when z is below this (hysteresis).")
    collapse_fraction: float = Field(0.3, gt=0, lt=1, description="Collapse: τ − 1 (or, when the drafted length "
                                     "varies, the first-token acceptance) below this share of its baseline.")
    collapse_windows: int = Field(2, ge=1, le=2, description="Consecutive collapsed windows before it is flagged "
                                  "(at most two).")
    gain_fraction: float = Field(0.5, gt=0, lt=1, description="Realized gain (adaptive verification): the draft "
                                 "share of emitted tokens below this share of its baseline's is a GAIN_DROP.")
    gain_windows: int = Field(3, ge=1, description="Consecutive windows below gain_fraction before GAIN_DROP (and "
                              "above it before it clears).")
    collapse_tau: float = Field(1.05, gt=1, description="Without a recorded baseline τ: τ below this while drafts "
                                "continue is a collapse (≈ 1.0: nothing accepted).")


class LabelBaseline(Strict):
    """Recorded per-token α of one label in a known-good period."""


    mean: float = Field(ge=0, le=1, description="Mean α over the baseline windows.")
    std: float = Field(ge=0, description="Std of window α over the baseline windows.")
    windows: int = Field(ge=1, description="How many windows stand behind it.")
    tau_mean: float | None = Field(None, ge=1, description="Mean τ over the baseline windows (collapse detector).")
    first_mean: float | None = Field(None, ge=0, le=1, description="Mean first-token acceptance (accepted at "
                                     "position 0 / drafts): the per-drafted-token basis.")
    first_std: float | None = Field(None, ge=0, description="Std of the window first-token acceptance.")
    share_mean: float | None = Field(None, ge=0, le=1, description="Mean draft share of the emitted tokens "
                                     "(accepted / generated; all traffic only): the realized-gain basis.")
    share_std: float | None = Field(None, ge=0, description="Std of the window draft share.")


class Baseline(Strict):
    """A deployment's recorded baseline, per task label ("" = all traffic)."""


    labels: dict[str, LabelBaseline] = Field(description="Label -> baseline.")
    recorded_at: float | None = Field(None, description="Epoch seconds when it was recorded.")

    @classmethod
    def from_observations(cls, observations: Sequence, min_drafts: float = 50) -> Baseline:
        per: dict[str, list[tuple[float, float, float | None, float | None]]] = {}
        last = None
        for o in observations:
            if not isinstance(o, Observation):
                continue
            last = o.at
            for lab, w in o.labels.items():
                if w.drafts >= min_drafts and w.alpha is not None:
                    share = (min(1.0, w.accepted / o.generated) if lab == "" and o.generated and o.generated > 0
                             else None)
                    per.setdefault(lab, []).append((w.alpha, w.tau or 1.0, w.first_rate, share))
        labels = {}
        for lab, rows in per.items():
            if len(rows) >= 2:
                mean, std = _mean_std([r[0] for r in rows])
                firsts = [r[2] for r in rows if r[2] is not None]
                fm, fs = _mean_std(firsts) if len(firsts) >= 2 else (None, None)
                shares = [r[3] for r in rows if r[3] is not None]
                sm, ss = _mean_std(shares) if len(shares) >= 2 else (None, None)
                labels[lab] = LabelBaseline(mean=mean, std=std, windows=len(rows),
                                            tau_mean=sum(r[1] for r in rows) / len(rows), first_mean=fm, first_std=fs,
                                            share_mean=sm, share_std=ss)
        return cls(labels=labels, recorded_at=last)


def _mean_std(xs: Sequence[float]) -> tuple[float, float]:
    mean = sum(xs) / len(xs)
    return mean, math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1))


def sampling_error(w: LabelWindow) -> float:
    """Standard error of the window's α (delta method on τ).

    Per draft the accepted count A has P(A=j) = α^j (1 − α) for j < K and α^K for j = K; τ − 1 is
    its mean over ``drafts`` drafts and dτ/dα = Σ j α^(j−1), so se(α) = sd(A) / (dτ/dα · √drafts).
    """
    a, k = min(max(w.alpha or 0.0, 0.01), 0.99), max(1, round(w.mean_drafted or w.k))
    probs = [a ** j * (1 - a) for j in range(k)] + [a ** k]
    mean = sum(j * p for j, p in enumerate(probs))
    var = sum(j * j * p for j, p in enumerate(probs)) - mean * mean
    slope = sum(j * a ** (j - 1) for j in range(1, k + 1))
    return math.sqrt(max(var, 1e-6)) / (slope * math.sqrt(max(w.drafts, 1.0)))


@dataclass
class Alarm:
    """State of one detector after an update."""

    active: bool = False
    since: float | None = None
    raised_now: bool = False
    cleared_now: bool = False


class FloorDetector:
    def __init__(self, cfg: DetectionConfig) -> None:
        self.cfg = cfg
        self.below = self.above = 0
        self.state = Alarm()

    def update(self, at: float, alpha: float, floor: float) -> Alarm:
        s = self.state
        s.raised_now = s.cleared_now = False
        if alpha < floor:
            self.below, self.above = self.below + 1, 0
        elif alpha >= floor + self.cfg.floor_margin:
            self.below, self.above = 0, self.above + 1
        else:
            self.below = self.above = 0
        if not s.active and self.below >= self.cfg.floor_windows:
            s.active, s.since, s.raised_now = True, at, True
        elif s.active and self.above >= self.cfg.floor_windows:
            s.active, s.since, s.cleared_now = False, None, True
        return s


class ChangeDetector:
    def __init__(self, cfg: DetectionConfig, baseline: LabelBaseline) -> None:
        self.cfg, self.baseline = cfg, baseline
        self.s = 0.0
        self.z = 0.0
        self.good = 0
        self.state = Alarm()

    def reset(self) -> None:
        self.s, self.good, self.state = 0.0, 0, Alarm()

    def update(self, at: float, alpha: float, se: float) -> Alarm:
        cfg, st = self.cfg, self.state
        st.raised_now = st.cleared_now = False
        sigma = math.sqrt(max(self.baseline.std, cfg.min_sigma) ** 2 + se ** 2)
        self.z = (self.baseline.mean - alpha) / sigma
        self.s = min(cfg.cusum_cap, max(0.0, self.s + self.z - cfg.cusum_k))
        if not st.active:
            if self.s >= cfg.cusum_h:
                st.active, st.since, st.raised_now, self.good = True, at, True, 0
        else:
            self.good = self.good + 1 if self.z < cfg.clear_z else 0
            if self.good >= cfg.clear_windows:
                st.active, st.since, st.cleared_now = False, None, True
                self.s, self.good = 0.0, 0
        return st


def first_rate_error(w: LabelWindow) -> float:
    """Standard error of the window's first-token acceptance (a binomial over its drafts)."""
    p = min(max(w.first_rate or 0.0, 0.01), 0.99)
    return math.sqrt(p * (1 - p) / max(w.drafts, 1.0))


@dataclass
class LabelDetectors:
    change: ChangeDetector | None
    floor: FloorDetector
    break_even: FloorDetector
    last_alpha: float | None = None
    last_at: float | None = None
    first: ChangeDetector | None = None  # CUSUM on the per-drafted-token basis (first-token acceptance)
