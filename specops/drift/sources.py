"""Measurement sources for the monitor, built on the metrics layer.

- ``PrometheusSource`` wraps ``specops.metrics.prometheus.PrometheusReader`` (a constant number of
  PromQL queries per cycle, grouped by ``specops_deployment`` else ``model_name``). A reader failure
  (``MeasurementError``: unreachable, refused, no series at all) becomes ``Retry`` so the loop backs
  off; a deployment without series in the window becomes ``Unseen`` with the reason.
- ``MetricsSource`` is what ``specops monitor`` uses for registered deployments: one Prometheus read
  for every deployment Prometheus knows (by ``specops_deployment``, else the served model name), and
  a direct ``/metrics`` scrape of the others that have an endpoint (concurrently; the delta against
  the previous scrape, kept in memory and in ``$SPECOPS_HOME/monitor/scrapes.json`` so that a cron
  ``--once`` run continues where the last one stopped; the first scrape of an engine measures since
  it started). Each observation carries the live target fingerprint and the engine's uptime.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta, timezone
from pathlib import Path

from specops.drift.observe import Observation, Unseen, observation_from_measurement
from specops.drift.outcomes import Retry
from specops.errors import MeasurementError, SpecopsError


class PrometheusSource:
    def __init__(self, reader, clock, window_s: float = 60.0) -> None:
        self.reader, self.clock, self.window_s = reader, clock, window_s
        self.queries = 0

    def fetch(self, deployments: Iterable[str]) -> dict[str, Observation | Unseen]:
        end = datetime.fromtimestamp(self.clock.now(), tz=timezone.utc)
        self.queries += 1
        try:
            found = self.reader.measure(end - timedelta(seconds=self.window_s), end)
        except MeasurementError as exc:
            raise Retry(None, exc.one_line()) from None
        out: dict[str, Observation | Unseen] = {}
        for name in deployments:
            m = found.get(name)
            bad = getattr(self.reader, "bad", {}).get(name)
            if m is None and bad:
                out[name] = Unseen(f"could not evaluate: {bad}")
            elif m is None:
                out[name] = Unseen("no vllm:* series for this deployment in the window")
            elif m.empty_window:
                out[name] = Unseen("no drafts in the window (no traffic)")
            else:
                out[name] = observation_from_measurement(m)
        return out


def _count_queries(reader) -> int:
    from specops.metrics.prometheus import QUERIES

    return getattr(reader, "queries_per_measure", len(QUERIES))


class MetricsSource:
    """Registered deployments through Prometheus where it has them, direct ``/metrics`` otherwise.

    ``deployments``: name -> registry row (``DeploymentPublic``); ``reader``: a ``PrometheusReader``
    or None; ``fingerprint``: row -> (live target fingerprint, where from); ``uptime``: row ->
    seconds or None. ``queries`` counts PromQL queries, ``scrapes`` direct scrapes.
    """

    def __init__(self, deployments: dict, clock, *, reader=None, window_s: float = 60.0,
                 fingerprint: Callable | None = None, uptime: Callable | None = None,
                 state_path: Path | None = None, save_state: bool = True, scrape: Callable | None = None,
                 max_workers: int = 8, budget_s: float = 30.0) -> None:
        from specops.metrics.scrape import scrape as real_scrape

        self.deployments, self.clock, self.reader, self.window_s = deployments, clock, reader, window_s
        self.fingerprint = fingerprint or (lambda dep: (dep.target_fingerprint, "recorded at deploy"))
        self.uptime = uptime or local_uptime
        self.state_path, self.scrape, self.max_workers = state_path, scrape or real_scrape, max_workers
        self.save_state, self.budget_s = save_state, budget_s
        self.queries = self.scrapes = 0
        self.notes: list[str] = []  # about the last fetch (a Prometheus failure behind direct scrapes)
        self.last: dict[str, dict] = self._load_state()
        self.last_measurements: dict = {}

    # --- state of direct scrapes -------------------------------------------------------------------
    def _load_state(self) -> dict[str, dict]:
        if not self.state_path or not self.state_path.is_file():
            return {}
        from specops.errors import ConfigFileError
        from specops.jsonfile import load_json

        try:
            state = load_json(self.state_path)
        except ConfigFileError:
            return {}
        return state if isinstance(state, dict) else {}

    def _save_state(self) -> None:
        if not self.state_path or not self.save_state:
            return
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(dict(self.last)))  # a late abandoned scrape may still write
        os.replace(tmp, self.state_path)

    # --- one cycle -----------------------------------------------------------------------------------
    def fetch(self, deployments: Iterable[str]) -> dict[str, Observation | Unseen]:
        names = list(deployments)
        end = datetime.fromtimestamp(self.clock.now(), tz=timezone.utc)
        found, prom_error = self._prometheus(end)
        bad = getattr(self.reader, "bad", {}) if self.reader is not None else {}
        self.notes = []
        out: dict[str, Observation | Unseen] = {}
        direct = []
        for name in names:
            dep = self.deployments.get(name)
            m = _pick(found, name, dep)
            if m is not None:
                out[name] = self._observe(dep, m)
            elif dep is not None and dep.endpoint:
                direct.append(dep)
                why = prom_error or _bad_for(bad, name, dep)
                if why:
                    self.notes.append(f"{name}: measured by a direct /metrics scrape because Prometheus failed "
                                      f"({why})")
            elif dep is None:
                out[name] = Unseen("not a registered deployment")
            else:
                failed = prom_error or _bad_for(bad, name, dep)
                why = f"Prometheus: {failed}" if failed else "Prometheus has no vllm:* series for it"
                out[name] = Unseen(f"{why}; no endpoint recorded to scrape directly" if self.reader
                                   else "no endpoint recorded and no Prometheus configured")
        out.update(self._direct(direct))
        if names and prom_error and not direct and all(isinstance(v, Unseen) for v in out.values()):
            raise Retry(None, prom_error)
        return out

    def _prometheus(self, end: datetime) -> tuple[dict, str | None]:
        if self.reader is None:
            return {}, None
        self.queries += _count_queries(self.reader)
        try:
            return self.reader.measure(end - timedelta(seconds=self.window_s), end), None
        except MeasurementError as exc:
            if hasattr(self.reader, "bad"):
                self.reader.bad = {}
            return {}, exc.one_line()

    def _direct(self, deps: list) -> dict[str, Observation | Unseen]:
        """Scrape ``deps`` concurrently within the cycle budget; one that has not finished by then is
        unseen with the reason (its daemon thread is abandoned: nothing waits for it, not even exit)."""
        from specops.metrics.http import redact_url

        if not deps:
            return {}
        self.scrapes += len(deps)
        results = run_bounded(self._scrape_one, deps, workers=self.max_workers, budget_s=self.budget_s)
        out = {}
        for dep in deps:
            got = results.get(dep.name)
            out[dep.name] = got if got is not None else Unseen(
                f"could not evaluate: the direct scrape of {redact_url(dep.endpoint)} did not finish within the cycle "
                f"budget of {self.budget_s:g}s")
        self._save_state()
        return out

    def _scrape_one(self, dep) -> Observation | Unseen:
        from specops.metrics.derive import delta, pick_group
        from specops.metrics.types import Snapshot

        try:
            after = self.scrape(dep.endpoint)
            group = pick_group(after, dep.served_model_name if dep.served_model_name in after.groups else
                               (dep.name if dep.name in after.groups else None))
            prev = self.last.get(dep.name)
            before = Snapshot.model_validate(prev) if prev and prev.get("source") == after.source else None
            restarted = _restarted(before, after)
            if before is None or before.taken_at >= after.taken_at or restarted:
                start = after.process_start or after.taken_at
                before = Snapshot(source=after.source, taken_at=start, groups={})
            m = delta(before, after, group)
            if restarted:  # its counters may have climbed past the old ones: none went down, yet all reset
                m.counter_reset = True
                m.notes.append("the engine restarted since the last scrape (its process start time changed): "
                               "the window holds its counts since it started")
        except SpecopsError as exc:
            return Unseen(f"direct scrape failed: {exc.one_line()}")
        self.last[dep.name] = after.model_copy(update={"groups": {group: after.groups[group]}}).model_dump(mode="json")
        m.deployment = dep.name
        uptime = (after.taken_at - after.process_start).total_seconds() if after.process_start else self.uptime(dep)
        return self._observe(dep, m, uptime)

    def _observe(self, dep, m, uptime: float | None = None) -> Observation | Unseen:
        self.last_measurements[dep.name] = m
        fp, _ = self.fingerprint(dep)
        if uptime is None:
            uptime = self.uptime(dep)
        m = m.model_copy(update={"deployment": dep.name})
        return observation_from_measurement(m, uptime_s=uptime, target_fingerprint=fp)


def _restarted(before, after) -> bool:
    """Whether the engine behind two scrapes is not the same process (``process_start_time_seconds``
    changed): then every counter restarted from zero, whether or not it is below its old value now."""
    if before is None or before.process_start is None or after.process_start is None:
        return False
    return abs((after.process_start - before.process_start).total_seconds()) > 1.0


def run_bounded(fn: Callable, items: list, *, workers: int, budget_s: float) -> dict:
    """``{item.name: fn(item)}`` for the items done within ``budget_s``, on at most ``workers`` daemon
    threads. Unlike a ThreadPoolExecutor, nothing waits for a stuck call: not the caller (it stops
    waiting at the budget), not an interrupt (the wait is a plain Event wait, so a signal's exception
    is raised at once), not the interpreter's exit. An exception of ``fn`` is re-raised here."""
    todo: queue.SimpleQueue = queue.SimpleQueue()
    for item in items:
        todo.put(item)
    results: dict = {}
    errors: list[BaseException] = []
    lock, done = threading.Lock(), threading.Event()

    def worker() -> None:
        while True:
            try:
                item = todo.get_nowait()
            except queue.Empty:
                return
            try:
                value = fn(item)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                errors.append(exc)
                value = None
            with lock:
                results[item.name] = value
                if len(results) == len(items):
                    done.set()
    for i in range(max(1, min(workers, len(items)))):
        threading.Thread(target=worker, daemon=True, name=f"specops-scrape-{i}").start()
    until = time.monotonic() + budget_s
    while not done.is_set() and not errors and time.monotonic() < until:
        done.wait(min(0.5, max(0.0, until - time.monotonic())))
    if errors:
        raise errors[0]
    with lock:
        return {k: v for k, v in results.items() if v is not None}


def _bad_for(bad: dict, name: str, dep) -> str | None:
    """Why Prometheus' samples for this deployment were left out (by name, else served name)."""
    if name in bad:
        return bad[name]
    if dep is not None and dep.served_model_name and dep.served_model_name in bad:
        return bad[dep.served_model_name]
    return None


def _pick(found: dict, name: str, dep):
    m = found.get(name)
    if m is not None:
        return m
    if dep is not None and dep.served_model_name:
        m = found.get(dep.served_model_name)
        if m is not None and m.group_label == "model_name":
            return m
    return None


def local_uptime(dep) -> float | None:
    """Uptime of a local engine from its recorded pid start time (None when not local or not running)."""
    if dep is None or dep.platform != "local" or not dep.pid or dep.pid_start_time is None:
        return None
    from specops.engines.local import alive, uptime_s

    return uptime_s(dep.pid_start_time) if alive(dep.pid, dep.pid_start_time) else None
