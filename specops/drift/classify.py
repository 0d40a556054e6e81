"""Which cause explains an acceptance drop — with the evidence, as a ``Finding``.

Rules, in order (the first that holds wins; every finding says which rule and the numbers):

1. **Changed model** — the live target's fingerprint differs from the one the draft was trained
   against (both known): the draft is stale (vllm#36223). Severity error.
2. **Engine-state decay, confirmed** — a restart probe ran and acceptance came back (recovered at
   least ``recover_share`` of what was lost): the decay was engine state (vllm#41838), not the data.
3. **Workload drift** — traffic is labelled, some labels dropped and at least one other is stable:
   the model is fine, the traffic the dropped labels carry changed.
4. **Engine-state decay, suspected** — every label dropped together and, before the alarm, α was
   already sliding with uptime since the last restart (or KV usage is high / rising with it): run a
   restart probe before anything else (a restart that did not help rules it out).
5. **Unknown** — all traffic dropped with no fingerprint change on record and no uptime trend: run
   the acceptance-drop runbook (lineage and fingerprint checks).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from specops.models import Finding


@dataclass(frozen=True)
class LabelDrop:
    label: str
    baseline: float
    recent: float
    sigmas: float  # (baseline - recent) / baseline std
    alarmed: bool


@dataclass(frozen=True)
class ProbeResult:
    at: float
    before: float  # α before the restart
    after: float  # α after it
    baseline: float

    @property
    def recovered_share(self) -> float:
        lost = self.baseline - self.before
        return (self.after - self.before) / lost if lost > 1e-9 else 0.0


@dataclass
class Evidence:
    """What the classifier looks at for one deployment."""

    deployment: str
    drops: dict[str, LabelDrop]  # per task label ("" = all traffic)
    trained_against: str | None = None
    live_fingerprint: str | None = None
    # (uptime_s, α of all traffic, kv usage) windows since the last restart, before the alarm
    pre_alarm: Sequence[tuple[float, float, float | None]] = field(default_factory=list)
    kv_recent: float | None = None
    probe: ProbeResult | None = None
    recover_share: float = 0.6
    stable_sigmas: float = 2.0
    drop_sigmas: float = 3.0
    break_even: float | None = None  # per-token α below which speculation is slower (None: unknown)

    def versus_break_even(self) -> str:
        """"below break-even" with the numbers: the recent α of all traffic against the break-even α."""
        d = self.drops.get("")
        if self.break_even is None:
            return ("below break-even (no break-even known for this deployment: deploy it from a spec with "
                    "expectations — `specops recommend -o deployment` writes them — or set a validation profile)")
        now = f"α now {d.recent:.3f}" if d is not None else "α now unknown"
        return f"below break-even ({now}, break-even α {self.break_even:.3f})"


def _corr(xs: Sequence[float], ys: Sequence[float]) -> float:
    n = len(xs)
    if n < 3:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=False))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else 0.0


def _slope_per_hour(xs: Sequence[float], ys: Sequence[float]) -> float:
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    return 3600.0 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=False)) / sxx if sxx > 0 else 0.0


def uptime_trend(pre_alarm: Sequence[tuple[float, float, float | None]]) -> dict:
    """Correlation and slope of α with uptime (and KV usage) over the pre-alarm windows."""
    if len(pre_alarm) < 20:
        return {"windows": len(pre_alarm), "corr_uptime": 0.0, "slope_per_hour": 0.0, "corr_kv": 0.0}
    up = [p[0] for p in pre_alarm]
    al = [p[1] for p in pre_alarm]
    kv = [(p[2], p[1]) for p in pre_alarm if p[2] is not None]
    return {"windows": len(pre_alarm), "corr_uptime": round(_corr(up, al), 3),
            "slope_per_hour": round(_slope_per_hour(up, al), 4),
            "corr_kv": round(_corr([k for k, _ in kv], [a for _, a in kv]), 3) if len(kv) >= 3 else 0.0}


def classify(ev: Evidence) -> Finding:
    name = ev.deployment
    drops = {k: v for k, v in ev.drops.items() if k}
    base_ev = {"deployment": name, "labels": {k or "all": _drop_ev(d) for k, d in ev.drops.items()}}
    if ev.trained_against and ev.live_fingerprint and ev.trained_against != ev.live_fingerprint:
        return Finding(code="CHANGED_MODEL", severity="error",
                       message=f"{name}: the live target ({ev.live_fingerprint}) is not the one the draft was "
                               f"trained against ({ev.trained_against}); the draft is stale",
                       fix="retrain the draft against the live target (specops retrain), or roll the target "
                           f"back; disable speculation meanwhile if acceptance is {ev.versus_break_even()}",
                       evidence={**base_ev, "cause": "changed_model", "rule": 1,
                                 "trained_against": ev.trained_against, "live_fingerprint": ev.live_fingerprint})
    if ev.probe is not None and ev.probe.recovered_share >= ev.recover_share:
        p = ev.probe
        return Finding(code="ENGINE_STATE_DECAY", severity="warning",
                       message=f"{name}: acceptance recovered after a restart (α {p.before:.3f} -> {p.after:.3f}, "
                               f"baseline {p.baseline:.3f}): engine-state decay, not drift",
                       fix="schedule periodic restarts and track vllm#41838; do not retrain for this",
                       evidence={**base_ev, "cause": "engine_state", "confirmed": True, "rule": 2,
                                 "probe": {"at": p.at, "before": round(p.before, 4), "after": round(p.after, 4),
                                           "baseline": round(p.baseline, 4),
                                           "recovered_share": round(p.recovered_share, 3)}})
    if len(drops) >= 2:
        dropped = sorted(k for k, d in drops.items() if d.alarmed or d.sigmas >= ev.drop_sigmas)
        stable = sorted(k for k, d in drops.items() if not d.alarmed and d.sigmas < ev.stable_sigmas)
        if dropped and stable:
            return Finding(code="WORKLOAD_DRIFT", severity="warning",
                           message=f"{name}: acceptance dropped for {', '.join(dropped)} while "
                                   f"{', '.join(stable)} stayed stable: the traffic changed, not the engine",
                           fix="look at what changed in that traffic; retrain the draft on current traffic "
                               "for those labels if it persists",
                           evidence={**base_ev, "cause": "workload", "rule": 3, "dropped": dropped,
                                     "stable": stable})
    trend = uptime_trend(ev.pre_alarm)
    probe_failed = ev.probe is not None
    kv_high = ev.kv_recent is not None and ev.kv_recent >= 0.9
    gradual = trend["corr_uptime"] <= -0.5 and trend["slope_per_hour"] <= -0.005
    if not probe_failed and (gradual or kv_high or trend["corr_kv"] <= -0.6):
        return Finding(code="ENGINE_STATE_SUSPECTED", severity="warning",
                       message=f"{name}: all traffic dropped together and acceptance slid with uptime "
                               f"(corr {trend['corr_uptime']}, {trend['slope_per_hour']:+.4f} α/h) or KV pressure",
                       fix="run a restart probe (specops runbook run acceptance-drop); if acceptance "
                           "recovers it is engine state",
                       evidence={**base_ev, "cause": "engine_state", "confirmed": False, "rule": 4,
                                 "trend": trend, "kv_recent": ev.kv_recent})
    why = "a restart did not bring it back" if probe_failed else "no uptime trend"
    evidence = {**base_ev, "cause": "unknown", "rule": 5, "trend": trend}
    if probe_failed:
        evidence["probe"] = {"before": round(ev.probe.before, 4), "after": round(ev.probe.after, 4)}
    return Finding(code="DRIFT_CAUSE_UNKNOWN", severity="warning",
                   message=f"{name}: all traffic dropped together ({why}; target fingerprint "
                           f"{'unchanged' if ev.live_fingerprint else 'unknown'})",
                   fix="run the acceptance-drop runbook (lineage and fingerprint checks); consider "
                       f"disabling speculation if {ev.versus_break_even()}",
                   evidence=evidence)


def _drop_ev(d: LabelDrop) -> dict:
    return {"baseline": round(d.baseline, 4), "recent": round(d.recent, 4), "sigmas": round(d.sigmas, 2),
            "alarmed": d.alarmed}
