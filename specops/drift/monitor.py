"""The monitor control loop: fetch → detect → classify → act, once per cycle, never dying on
transient errors.

- The clock, the measurement source, the policy, the executor and the event sink are injected
  (a ``FakeClock`` drives it in tests).
- ``Monitor.run_cycle()`` returns a ``CycleReport``: what it saw, what it could not see and why,
  findings, γ proposals and actions. A source raising ``Retry`` (or any unexpected exception) makes a
  ``retry`` cycle; ``run()`` then backs off exponentially (capped) and tries again. ``Fatal`` stops the
  loop with its reason.
- The monitor's own metrics live in a dedicated ``CollectorRegistry`` (``MonitorMetrics``): cycle
  duration, last good cycle time, deployments unseen, actions taken; ``serve_metrics`` exposes them.
- ``run_loop`` is the one monitor loop (``Monitor.run`` and ``service.Watcher.run`` both use it).
- ``monitor_once`` is one cycle for cron (after replaying stored history to warm the detectors).
- A leader ``gate`` (``specops.k8s.leader``: a Lease when several replicas run in a cluster) is
  consulted at the start of each cycle. A replica that does not lead observes (fetches, updates its
  detectors, reports findings) but never acts: no policy actions, no action events; its report has
  ``leader: false`` with the gate's reason, ``specops_monitor_is_leader`` is 0, and ``leader``
  tells the caller not to store anything either. ``on_elected`` runs each time it becomes the leader,
  before it acts (e.g. to reload the action ledger the previous leader recorded).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Literal, Protocol

from pydantic import Field

from specops.drift.detectors import BreakEven
from specops.drift.gamma import GammaProposal, Predictor
from specops.drift.observe import MeasurementSource, Observation, Unseen, as_observation
from specops.drift.outcomes import Fatal, Retry
from specops.drift.policy import ActionExecutor, ActionRecord, ActionRunner, EventSink, Policy
from specops.drift.watch import DeploymentWatch, WatchTarget
from specops.models import Finding, Strict


class Clock(Protocol):
    def now(self) -> float: ...
    def monotonic(self) -> float: ...
    def sleep(self, seconds: float) -> None: ...


class Gate(Protocol):
    def is_leader(self) -> bool: ...
    def status(self) -> str: ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class MonitorMetrics:
    """The monitor's own Prometheus metrics, in a dedicated registry (never the global one)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        self.cycle_seconds = Histogram("specops_monitor_cycle_duration_seconds", "Duration of one monitor cycle.",
                                       buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60), registry=self.registry)
        self.last_good = Gauge("specops_monitor_last_good_cycle_timestamp_seconds",
                               "When the last cycle that reached the source finished (epoch seconds).",
                               registry=self.registry)
        self.unseen = Gauge("specops_monitor_deployments_unseen", "Deployments the last cycle could not see.",
                            registry=self.registry)
        self.watched = Gauge("specops_monitor_deployments_watched", "Deployments watched.", registry=self.registry)
        self.actions = Counter("specops_monitor_actions", "Actions decided, by action and outcome.",
                               ["action", "outcome"], registry=self.registry)
        self.cycles = Counter("specops_monitor_cycles", "Cycles, by outcome.", ["outcome"], registry=self.registry)
        self.is_leader = Gauge("specops_monitor_is_leader", "1 when this replica holds the leader lease (or needs "
                               "none) and acts; 0 when it only observes.", registry=self.registry)
        # each watched deployment's expectations (its spec's `expectations` block), for dashboards and alerts
        by = ["specops_deployment"]
        self.expected_rate = Gauge("specops_expected_acceptance_rate", "accepted/drafted the deployment's spec "
                                   "expects (specops recommend's prediction or a measured baseline).", by,
                                   registry=self.registry)
        self.break_even_rate = Gauge("specops_break_even_acceptance_rate", "accepted/drafted below which the "
                                     "deployment decodes slower than without speculation (its spec's).", by,
                                     registry=self.registry)
        self.expected_speedup = Gauge("specops_expected_speedup", "Speedup the deployment's spec expects.", by,
                                      registry=self.registry)
        self.expected_tau = Gauge("specops_expected_mean_acceptance_length", "Tokens per verification step the "
                                  "spec's expected rate gives at its γ: 1 + γ × rate.", by, registry=self.registry)
        self.gamma = Gauge("specops_num_speculative_tokens", "γ (num_speculative_tokens) the monitor watches the "
                           "deployment at.", by, registry=self.registry)
        # the capacity metric (issue 44; docs/capacity.md): what one replica sustains within the spec's SLO at the
        # live acceptance, and the load against it, for a HorizontalPodAutoscaler / KEDA (specops.k8s.autoscale)
        self.capacity = Gauge("specops_capacity_requests_per_second", "Requests/s one replica serves within the "
                              "spec's SLO at the acceptance measured in the last window (the step-cost model's "
                              "capacity by acceptance, in the spec's `capacity` block).", by, registry=self.registry)
        self.load_ratio = Gauge("specops_load_ratio", "Requests/s finished in the last window over one replica's "
                                "capacity: the replicas the load needs at 100% (an autoscaler targets e.g. 0.8 a "
                                "replica).", by, registry=self.registry)

    def export_expectations(self, targets: Sequence[WatchTarget]) -> None:
        """One series per watched deployment and known number (none for what its spec does not say)."""
        for t in targets:
            self.gamma.labels(t.name).set(t.gamma)
            if t.expected_acceptance_rate is not None:
                self.expected_rate.labels(t.name).set(t.expected_acceptance_rate)
                self.expected_tau.labels(t.name).set(1 + t.gamma * t.expected_acceptance_rate)
            if t.break_even_acceptance_rate is not None:
                self.break_even_rate.labels(t.name).set(t.break_even_acceptance_rate)
            if t.expected_speedup is not None:
                self.expected_speedup.labels(t.name).set(t.expected_speedup)

    def export_capacity(self, target: WatchTarget, obs: Observation) -> str | None:
        """Set the capacity gauges of ``target`` from ``obs``; returns why they were not set (None: set).
        Nothing is set without the spec's `capacity` block, a measured acceptance (speculation on) or a window."""
        from specops.drift.capacity import capacity_at

        cap = target.capacity
        if cap is None:
            return "no `capacity` block in the spec"
        rps, why = capacity_at(cap, obs)
        if rps is None:  # fail closed: no stale capacity from an earlier window stays on show
            self.drop_capacity(target.name)
            return why
        self.capacity.labels(target.name).set(rps)
        if obs.requests_finished is not None and obs.window_s > 0 and rps > 0:
            self.load_ratio.labels(target.name).set(obs.requests_finished / obs.window_s / rps)
        else:
            self.drop_capacity(target.name, capacity=False)
        return None

    def drop_capacity(self, name: str, capacity: bool = True) -> None:
        for gauge in ((self.capacity, self.load_ratio) if capacity else (self.load_ratio,)):
            try:
                gauge.remove(name)
            except KeyError:  # never set
                pass

    def exposition(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


def serve_metrics(metrics: MonitorMetrics, port: int, addr: str = "127.0.0.1"):
    """Serve ``/metrics`` for the monitor on a background thread; returns (server, thread)."""
    from prometheus_client import start_http_server

    return start_http_server(port, addr=addr, registry=metrics.registry)


class CycleReport(Strict):
    """What one cycle saw and did."""


    at: float = Field(description="Cycle start (epoch seconds).")
    duration_s: float = Field(0.0, description="Cycle duration (monotonic clock).")
    outcome: Literal["ok", "idle", "partial", "retry", "fatal"] = Field(
        description="ok: saw everything; idle: nothing to watch (no deployment that speculates); partial: some "
        "deployments unseen; retry: the source failed; fatal.")
    seen: list[str] = Field(default_factory=list)
    unseen: dict[str, str] = Field(default_factory=dict, description="Deployment -> why it was not seen.")
    not_watched: dict[str, str] = Field(default_factory=dict, description="Registered deployments deliberately "
                                        "not watched (stopped, no speculation) -> why.")
    findings: list[Finding] = Field(default_factory=list)
    proposals: list[GammaProposal] = Field(default_factory=list)
    actions: list[ActionRecord] = Field(default_factory=list)
    retry_in_s: float | None = Field(None, description="When the loop will try again after a failed cycle.")
    error: str | None = Field(None, description="Why the cycle failed (or, when idle, why nothing was watched).")
    queries: int | None = Field(None, description="Queries the source made, when it counts them.")
    notes: list[str] = Field(default_factory=list, description="Other things worth saying (baselines recorded).")
    leader: bool = Field(True, description="Whether this replica led (held the leader lease, or needs none); "
                         "a non-leader observes and takes no actions.")

    @property
    def exit_code(self) -> int:
        """For ``--once``: 0 when everything was seen (at least one deployment); 2 otherwise, including a
        cycle that watched nothing (an empty registry, or the wrong one, is never a success)."""
        return 0 if self.outcome == "ok" else 2

    @property
    def verdict(self) -> str:
        """The exit code in the shared status words: pass (saw every watched deployment; drift it found is in
        ``findings``) or could not evaluate (something unseen, the source failed, or nothing watched)."""
        return "pass" if self.exit_code == 0 else "could not evaluate"


class Monitor:
    def __init__(self, targets: Sequence[WatchTarget], source: MeasurementSource, policy: Policy,
                 executor: ActionExecutor, clock: Clock, *, events: EventSink | None = None,
                 predictor: Predictor | None = None, break_even: BreakEven | None = None,
                 metrics: MonitorMetrics | None = None, interval_s: float = 60.0,
                 backoff_base_s: float = 5.0, backoff_max_s: float = 300.0, gate: Gate | None = None,
                 on_elected: Callable[[], object] | None = None) -> None:
        self.source, self.policy, self.clock = source, policy, clock
        self.metrics = metrics or MonitorMetrics()
        self.gate, self.on_elected = None, on_elected
        self.leader, self.leader_note = True, ""
        self.use_gate(gate)
        self.interval_s, self.backoff_base_s, self.backoff_max_s = interval_s, backoff_base_s, backoff_max_s
        self.watches = {t.name: DeploymentWatch(t, policy.detection, policy.gamma, predictor, break_even, interval_s)
                        for t in targets}
        self.runner = ActionRunner(policy, executor, events, {t.name: t.restart_allowed for t in targets})
        self.failures = 0
        self.metrics.watched.set(len(self.watches))
        self.metrics.export_expectations(targets)

    def use_gate(self, gate: Gate | None, on_elected: Callable[[], object] | None = None) -> None:
        """Act only while ``gate.is_leader()`` (None: always). Until the first cycle asks, not the leader."""
        self.gate = gate
        if on_elected is not None:
            self.on_elected = on_elected
        self.leader = gate is None
        self.metrics.is_leader.set(1 if self.leader else 0)

    def _check_leader(self) -> None:
        if self.gate is None:
            return
        was, note = self.leader, ""
        try:
            now = bool(self.gate.is_leader())
            if not now:
                note = self.gate.status()
        except Exception as exc:  # a gate that fails must not make this replica act
            now, note = False, f"not the leader: the leader gate failed ({exc.__class__.__name__}: {exc})"
        if now and not was and self.on_elected is not None:
            try:
                self.on_elected()
            except Exception as exc:  # acting without the previous leader's ledger could act twice
                now, note = False, f"not acting yet: elected, but {exc.__class__.__name__}: {exc}"
        self.leader, self.leader_note = now, note
        self.metrics.is_leader.set(1 if now else 0)

    def _still_leader(self) -> bool:
        """Asked again right before acting: a slow fetch must not outlast the lease."""
        if self.gate is None:
            return True
        try:
            if self.gate.is_leader():
                return True
            self.leader_note = self.gate.status()
        except Exception as exc:
            self.leader_note = f"not the leader: the leader gate failed ({exc.__class__.__name__}: {exc})"
        self.leader = False
        self.metrics.is_leader.set(0)
        return False

    def warm(self, history: Iterable[Observation]) -> None:
        """Replay stored observations (oldest first) through the detectors, without acting."""
        for obs in history:
            w = self.watches.get(obs.deployment)
            if w is not None:
                w.update(obs)

    def run_cycle(self) -> CycleReport:
        t0, at = self.clock.monotonic(), self.clock.now()
        self._check_leader()
        names = list(self.watches)
        try:
            fetched = self.source.fetch(names)
        except Fatal as exc:
            return self._finish(CycleReport(at=at, outcome="fatal", error=exc.reason), t0)
        except Retry as exc:
            return self._failed(at, t0, exc.reason, exc.delay if exc.explicit else None)
        except Exception as exc:  # a bug or an unexpected client error: transient until proven otherwise
            return self._failed(at, t0, f"{exc.__class__.__name__}: {exc}", None)
        self.failures = 0
        report = CycleReport(at=at, outcome="ok", queries=getattr(self.source, "queries", None))
        report.notes += [str(n) for n in (getattr(self.source, "notes", None) or [])]  # e.g. Prometheus failed
        for name in names:
            obs = as_observation(name, fetched.get(name))
            if isinstance(obs, Unseen):
                report.unseen[name] = obs.reason
                self.metrics.drop_capacity(name)  # not seen: no capacity on show (issue 44)
                findings = [Finding(code="DEPLOYMENT_UNSEEN", severity="warning",
                                    message=f"{name}: not seen this cycle ({obs.reason})",
                                    fix="check the engine and its metrics endpoint",
                                    evidence={"deployment": name, "at": at})]
            else:
                report.seen.append(name)
                try:
                    findings, proposal = self.watches[name].update(obs)
                except Exception as exc:  # never let one deployment stop the cycle
                    report.unseen[name] = f"could not evaluate: {exc.__class__.__name__}: {exc}"
                    continue
                if proposal is not None:
                    report.proposals.append(proposal)
                self.metrics.export_capacity(self.watches[name].target, obs)
            report.findings += findings
            report.actions += self._act(at, name, findings)
        if report.unseen:
            report.outcome = "partial"
        elif not names:
            report.outcome = "idle"
        return self._finish(report, t0)

    def _act(self, at: float, name: str, findings: list[Finding]) -> list[ActionRecord]:
        if not findings or not self.leader or not self._still_leader():
            return []
        records = self.runner.apply(at, name, findings)
        for rec in records:
            self.metrics.actions.labels(rec.action, rec.outcome).inc()
            if rec.action == "restart_probe" and rec.outcome == "done":
                self.watches[name].start_probe(at)
        return records

    def _failed(self, at: float, t0: float, reason: str, delay: float | None) -> CycleReport:
        self.failures += 1
        backoff = min(self.backoff_max_s, self.backoff_base_s * 2 ** (self.failures - 1))
        report = CycleReport(at=at, outcome="retry", error=reason, retry_in_s=delay if delay is not None else backoff,
                             unseen={n: f"source failed: {reason}" for n in self.watches})
        for n in self.watches:  # nothing measured: no capacity on show (issue 44)
            self.metrics.drop_capacity(n)
        return self._finish(report, t0)

    def _finish(self, report: CycleReport, t0: float) -> CycleReport:
        report.duration_s = max(0.0, self.clock.monotonic() - t0)
        report.leader = self.leader
        if not self.leader and self.leader_note:
            report.notes.append(self.leader_note)
        m = self.metrics
        m.cycle_seconds.observe(report.duration_s)
        m.cycles.labels(report.outcome).inc()
        m.unseen.set(len(report.unseen))
        if report.outcome in ("ok", "idle", "partial"):  # the loop works; --once still exits 2 when idle
            m.last_good.set(self.clock.now())
        return report

    def run(self, max_cycles: int | None = None, stop: Callable[[], bool] | None = None,
            on_report: Callable[[CycleReport], None] | None = None) -> CycleReport | None:
        """Loop until ``stop()``, ``max_cycles`` or a Fatal outcome; returns the last report."""
        return run_loop(self.run_cycle, self.clock, self.interval_s, max_cycles=max_cycles, stop=stop,
                        on_report=on_report)


def run_loop(cycle: Callable[[], CycleReport], clock: Clock, interval_s: float, *, max_cycles: int | None = None,
             stop: Callable[[], bool] | None = None,
             on_report: Callable[[CycleReport], None] | None = None) -> CycleReport | None:
    """The monitor loop, the only one (``Monitor.run`` and ``service.Watcher.run`` both call it): run
    ``cycle`` until ``stop()``, ``max_cycles`` or a Fatal outcome, sleeping ``interval_s`` between
    cycles, or the report's ``retry_in_s`` after a failed one; returns the last report."""
    last, n = None, 0
    while (max_cycles is None or n < max_cycles) and not (stop and stop()):
        last = cycle()
        n += 1
        if on_report:
            on_report(last)
        if last.outcome == "fatal":
            break
        clock.sleep(last.retry_in_s if last.outcome == "retry" else interval_s)
    return last


def monitor_once(targets: Sequence[WatchTarget], source: MeasurementSource, policy: Policy,
                 executor: ActionExecutor, clock: Clock, *, history: Iterable[Observation] = (),
                 **kwargs) -> CycleReport:
    """One cycle (cron / Kubernetes CronJob): warm the detectors from stored history, then run."""
    mon = Monitor(targets, source, policy, executor, clock, **kwargs)
    mon.warm(history)
    return mon.run_cycle()
