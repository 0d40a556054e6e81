"""Shared helpers: run the drift library over traces from the seeded generator."""

from __future__ import annotations

import random

from specops.drift.detectors import Baseline, DetectionConfig
from specops.drift.gamma import GammaPolicy
from specops.drift.observe import Observation
from specops.drift.tracegen import DAY, TraceConfig, generate
from specops.drift.watch import DeploymentWatch, WatchTarget

ALARMS = {"ACCEPTANCE_DROP", "ACCEPTANCE_BELOW_FLOOR", "BELOW_BREAK_EVEN"}


def baseline(seed: int = 1000, **kw) -> Baseline:
    """A baseline recorded over one quiet day (no resets, no gaps) of a different seed."""
    return Baseline.from_observations(generate(TraceConfig(seed=seed, resets_per_day=0, gaps_per_day=0, **kw), DAY))


def watch(base: Baseline, **target) -> DeploymentWatch:
    return DeploymentWatch(WatchTarget(name="sim", baseline=base, **target), DetectionConfig(),
                           GammaPolicy(mode="off"), None)


def alarm_episodes(cfg: TraceConfig, duration_s: float, base: Baseline, **target) -> list[tuple[float, str]]:
    """(seconds from start, code) of every alarm raised (one per episode) over the trace."""
    w, seen, out = watch(base, **target), set(), []
    for o in generate(cfg, duration_s):
        if not isinstance(o, Observation):
            continue
        for f in w.update(o)[0]:
            key = (f.code, f.evidence.get("label"), f.evidence.get("since"))
            if f.code in ALARMS and key not in seen:
                seen.add(key)
                out.append((f.evidence["since"] - cfg.start, f.code))
    return out


def detection_delay(seed: int, base: Baseline, drop_points: float = 0.15, **kw) -> tuple[float | None, float | None]:
    """Drop at a seeded random time of day. Returns seconds from the drop to the first alarm, and
    from the first window the monitor could see after the drop (a scrape gap may hide the drop)."""
    drop_at = random.Random(seed).uniform(3600, DAY - 3600)
    cfg = TraceConfig(seed=seed, drop_at_s=drop_at, drop_points=drop_points, **kw)
    trace = generate(cfg, drop_at + 1800)
    first_end = min(o.at - cfg.start for o in trace if isinstance(o, Observation) and o.at - cfg.start > drop_at)
    hidden = max(0.0, first_end - drop_at - 60.0)  # time the drop stayed behind a scrape gap
    after = [t - drop_at for t, _ in alarm_episodes(cfg, drop_at + 1800, base) if t >= drop_at]
    if not after:
        return None, None
    return min(after), min(after) - hidden
