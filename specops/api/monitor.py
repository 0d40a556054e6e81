"""What `specops monitor` and `specops runbook list|show|run` call.

``monitor_options`` resolves flags > SPECOPS_* > config.yaml into :class:`MonitorOptions`; ``monitor``
runs the drift control loop (specops.drift.service.Watcher) with what a process around it needs: the
leader election of a replicated monitor (specops.k8s.leader: SPECOPS_LEADER_LEASE, SPECOPS_NAMESPACE,
SPECOPS_POD_NAME), the monitor's own /metrics server (SPECOPS_METRICS_PORT; all interfaces inside a
pod, else 127.0.0.1; SPECOPS_METRICS_ADDR overrides) and SIGTERM handling that still releases the
lease.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

from specops.drift.monitor import CycleReport
from specops.drift.service import MonitorOptions, run_runbook_on
from specops.errors import InputError
from specops.models import status_word
from specops.registry import open_registry
from specops.settings import setting

__all__ = ["CycleReport", "MonitorOptions", "list_runbooks", "monitor", "monitor_options", "run_runbook",
           "show_runbook", "status_word"]


MAX_BASELINE_HOURS = 24 * 366.0
"""Longest stored history a recorded baseline may average over (a year)."""


def monitor_options(*, interval: float | None = None, prometheus_url: str | None = None, policy: str | None = None,
                    dry_run: bool = False, profile: str | None = None, record_baseline: bool = False,
                    baseline_hours: float = 1.0, deployments: list[str] | None = None,
                    metrics_port: int | str | None = None) -> tuple[MonitorOptions, int | None]:
    """The monitor's options and the port of its own /metrics (None: not served)."""
    try:
        interval_s = float(setting("interval", interval, 60.0))
        port = setting("metrics_port", metrics_port)
        port = int(port) if port not in (None, "") else None
    except ValueError:
        raise InputError("--interval and --metrics-port must be numbers", "e.g. --interval 60 --metrics-port 9108") \
            from None
    if not (math.isfinite(interval_s) and 0 < interval_s <= 7 * 86400):
        raise InputError(f"--interval {interval_s:g} is not a positive number of seconds (at most a week)",
                         "e.g. --interval 60")
    if not (math.isfinite(baseline_hours) and 0 < baseline_hours <= MAX_BASELINE_HOURS):
        raise InputError(f"--baseline-hours {baseline_hours:g} is out of range",
                         f"give between 0 (exclusive) and {MAX_BASELINE_HOURS:g} hours")
    opts = MonitorOptions(policy=str(setting("policy", policy, "default")), interval_s=interval_s,
                          prometheus_url=setting("prometheus_url", prometheus_url), dry_run=dry_run,
                          profile=setting("profile", profile), record_baseline=record_baseline,
                          baseline_hours=baseline_hours, retrain_data=setting("retrain_data"),
                          deployments=list(deployments) if deployments else None)
    return opts, port


def monitor(opts: MonitorOptions, *, once: bool = False, metrics_port: int | None = None, db: str | None = None,
            on_report: Callable[[CycleReport], None] | None = None,
            on_start: Callable[[str], None] | None = None) -> CycleReport | None:
    """One cycle (``once``: returns its report) or the loop until interrupted (every report goes to
    ``on_report``; ``on_start`` gets one line saying what is watched)."""
    from specops.k8s.leader import leader_gate
    from specops.retrain.lease import signals_as_exceptions

    gate = leader_gate()
    watcher = _watcher(opts, db)
    if gate.lease:
        watcher.monitor.use_gate(gate)
    if metrics_port is not None:
        from specops.drift.monitor import serve_metrics

        in_pod = bool(os.environ.get("KUBERNETES_SERVICE_HOST"))  # probes and Prometheus reach the pod IP
        serve_metrics(watcher.monitor.metrics, metrics_port,
                      addr=str(setting("metrics_addr", None, "0.0.0.0" if in_pod else "127.0.0.1")))
    try:
        with signals_as_exceptions():  # SIGTERM (pod deletion) still releases the lease
            if gate.lease:
                gate.start()  # renews in the background, so a long cycle or action keeps the lease
            if once:
                report = watcher.once()
                if on_report:
                    on_report(report)
                return report
            if on_start:
                lease = f"; leader lease {gate.lease} as {gate.elector.identity}" if gate.lease else ""
                from specops.secrets import redact_url

                source = f"Prometheus {redact_url(opts.prometheus_url)}" if opts.prometheus_url else "direct /metrics"
                on_start(f"watching {len(watcher.targets)} deployment(s) every {opts.interval_s:g}s ({source}; "
                         f"policy {opts.policy}{', dry run' if opts.dry_run else ''}{lease})")
            watcher.run(on_report=on_report)
            return None
    finally:
        gate.close()


def gamma_predictor(profile: str | None):
    """The performance model behind `specops monitor`'s γ proposals (``GAMMA_CHANGE_PROPOSED``):
    Leviathan et al. 2023 §3 on the measured per-position acceptance, with the validation profile's
    draft cost ratio c (``speedup = E[tokens per step] / (1 + γ·c)``, the model of the monitor's
    break-even floor, specops.drift.fleet.Floors). None without a profile: then no γ change is proposed.
    Batch-independent: the planner's per-GPU model (checks.thresholds.planner_model) is per deployment,
    and the monitor takes one predictor for all."""
    from specops.drift.fleet import profile_floors
    from specops.drift.gamma import reference_predictor

    c = profile_floors(profile).draft_cost_ratio
    if c is None:
        return None
    return reference_predictor(draft_cost=c, overhead=0.0, verify_per_token_batch=0.0)


def _watcher(opts: MonitorOptions, db: str | None):
    from specops.drift.service import Watcher

    return Watcher(open_registry(db), opts, predictor=gamma_predictor(opts.profile))


# --- runbooks --------------------------------------------------------------------------------------

def list_runbooks() -> list[dict]:
    """Every runbook (playbooks/runbooks/*.yaml): name, title, what raises it, how many steps."""
    from specops.drift.runbooks import list_runbooks as names
    from specops.drift.runbooks import load_runbook

    books = [load_runbook(n) for n in names()]
    return [{"name": b.name, "title": b.title, "triggers": b.triggers, "steps": len(b.steps)} for b in books]


def show_runbook(name: str) -> str:
    """A runbook as markdown, for on-call reading."""
    from specops.drift.runbooks import load_runbook, render_markdown

    return render_markdown(load_runbook(name))


def run_runbook(name: str, deployment: str, *, allow_restart: bool = False, prometheus_url: str | None = None,
                db: str | None = None, progress: Callable[[str], None] | None = None):
    """Run a runbook's diagnostic steps on a registered deployment (a RunbookResult)."""
    with open_registry(db) as reg:
        return run_runbook_on(reg, name, deployment, allow_restart=allow_restart,
                              prometheus_url=setting("prometheus_url", prometheus_url), progress=progress)
