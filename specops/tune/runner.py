"""Run a planned grid: start each session's engine, run its loads, stop it, store every point.

The engine and the load generator are injected, so the same loop drives a real vLLM engine
(:mod:`specops.tune.engine`), a remote engine per configuration (no redeploy), or a fake in tests:

- ``deployer.start(config) -> handle`` starts an engine for one configuration (raises on failure),
  ``deployer.stop(handle)`` stops it;
- ``measurer(handle, concurrency) -> Sample`` runs the workload once at that concurrency.

A configuration whose engine fails to start is stored as failed (every point of the session, with the
error) and skipped in later passes; the grid goes on. Each finished point is appended to the
:class:`PointStore` before the next one starts, and points already in the store are never measured
again, which is what makes ``--resume`` work after a crash or a kill.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol

from specops.errors import SpecopsError
from specops.tune.plan import Session
from specops.tune.store import PointStore
from specops.tune.types import EngineConfig, GridPoint, PointResult, Sample

START_FAILED = "engine failed to start"


class Deployer(Protocol):
    def start(self, config: EngineConfig) -> Any: ...

    def stop(self, handle: Any) -> None: ...


Measurer = Callable[[Any, int], Sample]
Progress = Callable[[str, dict], None]  # (event, details); events: start, point, failed, skip, budget


@dataclass
class RunOutcome:
    results: list[PointResult]
    measured_now: int = 0
    reused: int = 0
    stopped_by_budget: bool = False
    notes: list[str] = field(default_factory=list)


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _one_line(exc: BaseException) -> str:
    text = exc.one_line() if isinstance(exc, SpecopsError) else f"{exc.__class__.__name__}: {exc}"
    return " ".join(text.split())[:500]


class _Costs:
    """Observed engine-start and run costs, for budget decisions (planned estimates until seen)."""

    def __init__(self, restart_s: float, run_s: float) -> None:
        self.starts: list[float] = []
        self.runs: list[float] = []
        self.restart_s, self.run_s = restart_s, run_s

    def session(self, n_points: int) -> float:
        start = statistics.median(self.starts) if self.starts else self.restart_s
        run = statistics.median(self.runs) if self.runs else self.run_s
        return start + run * n_points


def run_grid(sessions: list[Session], deployer: Deployer, measurer: Measurer, store: PointStore, *,
             budget_s: float | None = None, restart_s: float = 60.0, run_s: float = 15.0,
             clock: Callable[[], float] = time.monotonic, progress: Progress | None = None) -> RunOutcome:
    """Measure every not-yet-stored point of ``sessions`` in order, within ``budget_s``."""
    stored = store.load()
    done = {r.point.key for r in stored}
    failed_configs = {r.point.config.key for r in stored if r.status == "failed" and
                      (r.error or "").startswith(START_FAILED)}
    outcome = RunOutcome(results=list(stored), reused=len(stored))
    costs = _Costs(restart_s, run_s)
    t0 = clock()
    emit = progress or (lambda event, info: None)
    for session in sessions:
        todo = [p for p in session.points if p.key not in done]
        if not todo:
            continue
        if session.config.key in failed_configs:
            emit("skip", {"config": session.config.key, "why": "failed to start earlier"})
            continue
        if budget_s is not None and clock() - t0 + costs.session(len(todo)) > budget_s:
            outcome.stopped_by_budget = True
            emit("budget", {"config": session.config.key})
            continue
        outcome.results += _run_session(session.config, todo, deployer, measurer, store, costs, clock, emit,
                                        failed_configs)
        outcome.measured_now += sum(1 for p in todo if p.key not in done)
        done.update(p.key for p in todo)
    if outcome.stopped_by_budget:
        outcome.notes.append("the budget ran out before every planned session: later (less informative) "
                             "sessions were skipped; --resume RUN_ID with a larger --budget-minutes continues")
    return outcome


def _run_session(config: EngineConfig, todo: list[GridPoint], deployer: Deployer, measurer: Measurer,
                 store: PointStore, costs: _Costs, clock, emit, failed_configs: set[str]) -> list[PointResult]:
    out: list[PointResult] = []
    started = _now_iso()
    t_start = clock()
    emit("start", {"config": config.key, "points": len(todo)})
    try:
        handle = deployer.start(config)
    except (SpecopsError, OSError) as exc:
        error = f"{START_FAILED}: {_one_line(exc)}"
        failed_configs.add(config.key)
        for p in todo:
            r = PointResult(run_id=store.run_id, point=p, status="failed", error=error, started_at=started,
                            seconds=round(clock() - t_start, 3))
            store.append(r)
            out.append(r)
        emit("failed", {"config": config.key, "error": error})
        return out
    costs.starts.append(clock() - t_start)
    try:
        for p in todo:
            t = clock()
            began = _now_iso()
            try:
                sample = measurer(handle, p.concurrency)
                r = PointResult(run_id=store.run_id, point=p, status="ok", sample=sample, started_at=began,
                                seconds=round(clock() - t, 3))
                costs.runs.append(clock() - t)
            except SpecopsError as exc:
                r = PointResult(run_id=store.run_id, point=p, status="failed", error=_one_line(exc),
                                started_at=began, seconds=round(clock() - t, 3))
            store.append(r)
            out.append(r)
            emit("point", {"point": p.key, "status": r.status})
    finally:
        t_stop = clock()
        deployer.stop(handle)
        costs.starts[-1] += clock() - t_stop  # a restart is a stop plus a start
    return out
