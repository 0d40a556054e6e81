"""The monitor's memory, kept in the lineage registry (no state of its own).

- Every observed window is stored as registry measurements (one per task label; ``task`` None = all
  traffic), ``source="monitor"``, with the gauges the classifier needs (KV usage, running requests,
  uptime, live target fingerprint, counter reset) in ``extra``. ``history()`` turns them back into
  ``Observation`` objects, oldest first, so ``specops monitor --once`` (cron) warms its detectors
  from what earlier runs saw.
- A deployment's baseline (per-label mean and std of per-token α over a known-good period) is an
  event ``monitor.baseline`` whose ``data`` is the ``Baseline``: append-only, the newest wins, and
  the event log says who recorded it and when. ``record_baseline()`` computes it from the stored
  windows of a period.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timezone

from specops.drift.detectors import Baseline
from specops.drift.observe import ALL, LabelWindow, Observation
from specops.errors import InputError

SOURCE = "monitor"
BASELINE_EVENT = "monitor.baseline"
_GAUGES = ("kv_usage", "running", "waiting", "tpot_p50", "uptime_s", "target_fingerprint", "gamma", "window_s",
           "prefix_hit_rate", "external_hit_rate", "external_hits", "generated")


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=timezone.utc)


def _row(obs: Observation, label: str, w: LabelWindow) -> dict:
    extra = {k: getattr(obs, k) for k in _GAUGES if getattr(obs, k) is not None}
    extra["accepted_per_pos"] = list(w.accepted_per_pos)
    if obs.counter_reset:
        extra["counter_reset"] = True
    if obs.notes:
        extra["notes"] = list(obs.notes)
    return dict(window_start=_utc(obs.at - obs.window_s), window_end=_utc(obs.at),
                acceptance_rate=_clip(w.acceptance_rate), mean_acceptance_length=w.tau,
                per_position=list(w.position_rates) or None, num_drafts=round(w.drafts),
                num_draft_tokens=round(w.draft_tokens), num_accepted_tokens=round(w.accepted),
                task=label or None, source=SOURCE, extra=extra)


def _clip(x: float | None) -> float | None:
    return None if x is None else min(1.0, max(0.0, x))


class HistoryStore:
    """Observations and baselines in the registry (``reg`` from ``specops.registry.open_registry``)."""

    def __init__(self, reg) -> None:
        self.reg = reg

    # --- observations ----------------------------------------------------------------------------
    def record(self, observations: Iterable[Observation]) -> int:
        """Store windows (those with drafts); returns how many rows were written."""
        n = 0
        for obs in observations:
            for label, w in obs.labels.items():
                if w.drafts <= 0:
                    continue
                self.reg.record_measurement(obs.deployment, **_row(obs, label, w))
                n += 1
        return n

    def history(self, deployment: str, *, since: float, until: float | None = None,
                limit: int = 5000) -> list[Observation]:
        """Stored windows of ``deployment`` in [since, until], oldest first, labels merged per window."""
        rows = self.reg.measurements(deployment, since=_utc(since), until=_utc(until) if until else None,
                                     limit=limit)
        by_end: dict[float, list] = {}
        for m in rows:
            if m.source == SOURCE:
                by_end.setdefault(m.window_end.timestamp(), []).append(m)
        return [_observation(deployment, at, ms) for at, ms in sorted(by_end.items())]

    # --- baselines -------------------------------------------------------------------------------
    def baselines(self, deployments: Sequence[str] | None = None) -> dict[str, Baseline]:
        """The newest recorded baseline of each deployment (one query for the whole fleet)."""
        wanted = set(deployments) if deployments is not None else None
        out: dict[str, Baseline] = {}
        limit = max(100, 4 * len(wanted)) if wanted is not None else 100_000
        for ev in self.reg.events(kind=BASELINE_EVENT, limit=limit):  # newest first
            if ev.subject in out or (wanted is not None and ev.subject not in wanted) or not ev.data:
                continue
            out[ev.subject] = Baseline.model_validate(ev.data["baseline"])
        return out

    def record_baseline(self, deployment: str, *, since: float, until: float, min_drafts: float = 50,
                        actor: str | None = None) -> Baseline:
        """Compute the baseline from the stored windows in [since, until] and record it."""
        obs = self.history(deployment, since=since, until=until)
        base = Baseline.from_observations(obs, min_drafts=min_drafts)
        if ALL not in base.labels:
            raise InputError(f"{deployment}: not enough windows to record a baseline ({len(obs)} stored windows "
                             f"between {_utc(since):%Y-%m-%d %H:%M:%S} and {_utc(until):%H:%M:%S} UTC; "
                             f"at least 2 with >= {min_drafts:g} drafts are needed)",
                             "let the monitor observe the deployment under normal traffic for a few cycles, "
                             "then record the baseline again")
        self.set_baseline(deployment, base, actor=actor,
                          reason=f"{base.labels[ALL].windows} windows from {_utc(since).isoformat()} "
                                 f"to {_utc(until).isoformat()}")
        return base

    def set_baseline(self, deployment: str, base: Baseline, *, actor: str | None = None,
                     reason: str | None = None) -> None:
        self.reg.get_deployment(deployment)  # NotFoundError with did-you-mean
        a = base.labels.get(ALL)
        msg = (f"{deployment}: acceptance baseline recorded (α {a.mean:.3f} ± {a.std:.3f} over {a.windows} windows)"
               if a else f"{deployment}: acceptance baseline recorded")
        self.reg.record_event(BASELINE_EVENT, deployment, msg, actor=actor, reason=reason,
                              data={"baseline": base.model_dump(mode="json")})


def _observation(deployment: str, at: float, rows: list) -> Observation:
    labels: dict[str, LabelWindow] = {}
    extra: dict = {}
    for m in rows:
        e = m.extra or {}
        extra = extra or e
        per_pos = e.get("accepted_per_pos")
        if per_pos is None and m.per_position:
            per_pos = [r * m.num_drafts for r in m.per_position]
        labels[m.task or ALL] = LabelWindow(drafts=float(m.num_drafts), draft_tokens=float(m.num_draft_tokens),
                                            accepted=float(m.num_accepted_tokens),
                                            accepted_per_pos=tuple(float(x) for x in per_pos or ()))
        if not m.task:
            extra = e
    window_s = extra.get("window_s") or (rows[0].window_end - rows[0].window_start).total_seconds()
    return Observation(deployment=deployment, at=at, window_s=float(window_s), labels=labels,
                       gamma=extra.get("gamma"), kv_usage=extra.get("kv_usage"), running=extra.get("running"),
                       waiting=extra.get("waiting"), tpot_p50=extra.get("tpot_p50"), uptime_s=extra.get("uptime_s"),
                       target_fingerprint=extra.get("target_fingerprint"),
                       counter_reset=bool(extra.get("counter_reset")), notes=tuple(extra.get("notes") or ()),
                       prefix_hit_rate=extra.get("prefix_hit_rate"), external_hit_rate=extra.get("external_hit_rate"),
                       external_hits=extra.get("external_hits"), generated=extra.get("generated"))
