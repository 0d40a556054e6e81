"""What ``specops monitor`` and ``specops runbook`` call: the drift library wired to the registry, the
metrics layer and the engines.

``Watcher(options)`` builds one monitor over the registered deployments that speculate: targets and
baselines from the registry (:mod:`.fleet`), a ``MetricsSource`` (Prometheus for what it has, direct
``/metrics`` for the rest), the policy playbook, an ``EngineExecutor`` and the registry as event log.
Each cycle's windows are stored in the registry (:class:`.store.HistoryStore`); ``once()`` replays
the stored history first, so a cron job's detectors remember the previous runs.

With a leader gate (``gate=``, or ``watcher.monitor.use_gate``: specops.k8s.leader) a replica that
does not lead stores nothing: no windows (the leader stores them; two replicas would store each
twice) and no baselines. When it becomes the leader it reloads the action ledger from the registry
before acting, so it does not repeat what the previous leader just did.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import Field

from specops.drift.actions import EngineExecutor, RegistryEvents, restore_ledger
from specops.drift.fleet import LiveFingerprints, profile_floors, watch_targets
from specops.drift.monitor import Clock, CycleReport, Monitor, MonitorMetrics, SystemClock, run_loop
from specops.drift.observe import ALL, Observation
from specops.drift.policy import load_policy
from specops.drift.sources import MetricsSource
from specops.drift.store import HistoryStore
from specops.errors import SpecopsError
from specops.models import Strict


class MonitorOptions(Strict):
    """Settings of one monitor (flags > SPECOPS_* > config.yaml, resolved by the CLI)."""


    policy: str = Field("default", description="Policy playbook name or YAML path.")
    prometheus_url: str | None = Field(None, description="Prometheus base URL; None: direct /metrics only.")
    interval_s: float = Field(60.0, gt=0, description="Seconds between cycles (and the measurement window).")
    dry_run: bool = Field(False, description="Decide and record actions, do nothing.")
    profile: str | None = Field(None, description="Validation profile for the floors (playbooks/profiles.yaml).")
    history_hours: float = Field(6.0, ge=0, description="Stored history replayed at start.")
    record_baseline: bool = Field(False, description="After the cycle, record each seen deployment's baseline.")
    baseline_hours: float = Field(1.0, gt=0, description="Stored windows the baseline is computed from.")
    retrain_data: str | None = Field(None, description="Prompts file for retraining jobs the policy opens.")
    deployments: list[str] | None = Field(None, description="Only these deployments (default: all that speculate).")


class Watcher:
    def __init__(self, reg, options: MonitorOptions, *, clock: Clock | None = None,
                 metrics: MonitorMetrics | None = None, reader=None, executor=None, gate=None,
                 predictor=None) -> None:
        from specops.settings import specops_home

        self.reg, self.options, self.clock = reg, options, clock or SystemClock()
        policy = load_policy(options.policy)
        if options.dry_run:
            policy = policy.model_copy(update={"dry_run": True})
        self.store = HistoryStore(reg)
        self.fps = LiveFingerprints()
        self.skipped: dict[str, str] = {}
        self.ignored: dict[str, str] = {}
        targets, self.rows = watch_targets(reg, floors=profile_floors(options.profile), store=self.store,
                                           names=options.deployments, skipped=self.skipped, ignored=self.ignored)
        if reader is None and options.prometheus_url:
            from specops.metrics.prometheus import PrometheusReader

            reader = PrometheusReader.from_settings(options.prometheus_url)
        self.source = MetricsSource(self.rows, self.clock, reader=reader, window_s=options.interval_s,
                                    fingerprint=self.fps.of, state_path=specops_home() / "monitor" / "scrapes.json")
        self.timings: dict[str, float] = {}
        self.recording = _Recording(self.source, self.store, self.timings, store_if=lambda: self.monitor.leader)
        self.monitor = Monitor(targets, self.recording, policy,
                               executor or EngineExecutor(reg, retrain_data=options.retrain_data), self.clock,
                               events=RegistryEvents(reg), metrics=metrics, interval_s=options.interval_s,
                               predictor=predictor)
        restore_ledger(self.monitor.runner, reg, list(self.rows))
        self.monitor.on_elected = lambda: restore_ledger(self.monitor.runner, reg, list(self.rows))
        if gate is not None:
            self.monitor.use_gate(gate)

    @property
    def targets(self) -> list[str]:
        return list(self.rows)

    def warm(self) -> int:
        since = self.clock.now() - self.options.history_hours * 3600
        n = 0
        for name in self.rows:
            hist = self.store.history(name, since=since)
            self.monitor.warm(hist)
            n += len(hist)
        return n

    def cycle(self, *, wait_store: bool = True) -> CycleReport:
        """One cycle; with ``wait_store`` (the default) its windows are in the registry on return."""
        report = self.monitor.run_cycle()
        report.not_watched.update(self.ignored)
        if self.skipped:  # rows that could not be watched are unseen, named with why (exit 2 for --once)
            report.unseen.update(self.skipped)
            if report.outcome in ("ok", "idle"):
                report.outcome = "partial"
        if report.outcome == "idle":
            from specops.registry.db import redact_url

            where = redact_url(str(getattr(self.reg, "url", "") or "the registry"))
            report.error = (f"nothing to watch: {where} holds no deployment that speculates"
                            + (f" ({len(self.ignored)} not watched)" if self.ignored else "")
                            + ". To fix: point --db / SPECOPS_HOME at the registry your deployments are in, or "
                            "register one (`specops deployment register NAME --endpoint URL --method METHOD`)")
        if wait_store or self.options.record_baseline:
            report.notes += [f"windows not stored: {e}" for e in self.recording.flush()]
        if self.options.record_baseline and report.leader and report.outcome in ("ok", "partial"):
            now = self.clock.now()
            for name in report.seen:
                try:
                    base = self.store.record_baseline(name, since=now - self.options.baseline_hours * 3600,
                                                      until=now + 1)
                except SpecopsError as exc:
                    report.notes.append(f"baseline not recorded: {exc.one_line()}")
                    continue
                a = base.labels[ALL]
                report.notes.append(f"{name}: baseline recorded (α {a.mean:.3f} ± {a.std:.3f}, {a.windows} windows)")
                watch = self.monitor.watches[name]
                watch.target.baseline = base
                watch.labels.clear()  # detectors start again against the new baseline
        return report

    def once(self) -> CycleReport:
        self.warm()
        return self.cycle()

    def run(self, *, stop: Callable[[], bool] | None = None, max_cycles: int | None = None,
            on_report: Callable[[CycleReport], None] | None = None) -> CycleReport | None:
        self.warm()
        return run_loop(lambda: self.cycle(wait_store=False), self.clock, self.options.interval_s,
                        max_cycles=max_cycles, stop=stop, on_report=on_report)


class _Recording:
    """Passes the source's answers through; a background writer stores the observed windows in the
    registry (one transaction per window today: ~3 ms each on SQLite, so 1,000 deployments would
    triple the cycle if stored inline). ``flush()`` waits for the writer; a cycle first waits for the
    previous cycle's writes, so the backlog never grows beyond one cycle."""

    def __init__(self, inner: MetricsSource, store: HistoryStore, timings: dict[str, float],
                 store_if: Callable[[], bool] = lambda: True) -> None:
        import queue
        import threading

        self.inner, self.store, self.timings, self.store_if = inner, store, timings, store_if
        self.errors: list[str] = []
        self._q: queue.Queue = queue.Queue()
        threading.Thread(target=self._writer, daemon=True, name="specops-monitor-store").start()

    @property
    def queries(self) -> int:
        return self.inner.queries

    @property
    def notes(self) -> list[str]:
        return list(getattr(self.inner, "notes", []))

    def _writer(self) -> None:
        import time

        while True:
            batch = self._q.get()
            t0 = time.perf_counter()
            try:
                self.store.record(batch)
            except Exception as exc:  # noqa: BLE001 - storage trouble must not stop the monitor
                self.errors.append(f"{exc.__class__.__name__}: {exc}")
            finally:
                self.timings["store_s"] = time.perf_counter() - t0
                self._q.task_done()

    def flush(self) -> list[str]:
        """Wait until every window handed over so far is stored; returns (and clears) storage errors."""
        self._q.join()
        errors, self.errors = self.errors, []
        return errors

    def fetch(self, deployments):
        import time

        self._q.join()
        t0 = time.perf_counter()
        out = self.inner.fetch(deployments)
        self.timings["fetch_s"] = time.perf_counter() - t0
        if self.store_if():  # a replica that does not lead leaves storing to the leader
            self._q.put([o for o in out.values() if isinstance(o, Observation)])
        return out


def run_runbook_on(reg, name: str, deployment: str, *, allow_restart: bool = False,
                   prometheus_url: str | None = None, window_s: float = 60.0, progress=None):
    """Run runbook ``name`` against a registered deployment with the real steps."""
    from specops.drift.runbooks import RunbookContext, load_runbook, run_runbook
    from specops.drift.steps import RegistrySteps
    from specops.settings import specops_home

    book = load_runbook(name)
    reg.get_deployment(deployment)  # NotFoundError with did-you-mean before any step runs
    reader = None
    if prometheus_url:
        from specops.metrics.prometheus import PrometheusReader

        reader = PrometheusReader.from_settings(prometheus_url)
    fps = LiveFingerprints()

    def source_for(dep):
        return MetricsSource({dep.name: dep}, SystemClock(), reader=reader, window_s=window_s, fingerprint=fps.of,
                             state_path=specops_home() / "monitor" / "scrapes.json", save_state=False)

    steps = RegistrySteps(reg, source_for, fingerprints=fps, progress=progress)
    return run_runbook(book, deployment, RunbookContext(steps, allow_restart=allow_restart))
