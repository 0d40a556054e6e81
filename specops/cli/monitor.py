"""`specops monitor` (the drift control loop, or one cycle with --once) and `specops runbook list|show|run`.

Exit codes of `monitor --once`: 0 the cycle saw every deployment (at least one); 2 it could not see
some (each is named on stderr), the source failed, or there was nothing to watch (an empty registry,
or the wrong one). The loop itself runs until interrupted (130). `runbook run`
exits 0 when every step ran (whatever it found), 2 when a step could not evaluate (engine down, no
traffic, no baseline, nothing recorded to compare) or on bad input. Only typer and the stdlib are imported here.

In a cluster (manifests/monitor/) the settings come from the environment: SPECOPS_LEADER_LEASE,
SPECOPS_NAMESPACE and SPECOPS_POD_NAME elect one acting replica (the others observe only, and say
so), SPECOPS_POLICY, SPECOPS_METRICS_PORT, SPECOPS_PROMETHEUS_URL/_TOKEN, SPECOPS_DB; see
specops.api.monitor.
"""

from __future__ import annotations

from typing import Optional

import typer

runbook_app = typer.Typer(help="On-call runbooks: list, read, and run their diagnostic steps on a deployment.",
                          no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.command("monitor")(monitor)
    app.add_typer(runbook_app, name="runbook")


def monitor(
    once: bool = typer.Option(False, "--once", help="Run one cycle and exit (cron / Kubernetes CronJob): "
                              "0 saw everything, 2 could not see some deployment or had nothing to watch."),
    interval: Optional[float] = typer.Option(None, "--interval", help="Seconds between cycles, also the "
                                             "measurement window (default 60; SPECOPS_INTERVAL)."),
    prometheus_url: Optional[str] = typer.Option(None, "--prometheus-url", help="Prometheus base URL "
                                                 "(SPECOPS_PROMETHEUS_URL); engines it lacks are scraped directly."),
    policy: Optional[str] = typer.Option(None, "--policy", help="Policy playbook name or YAML file "
                                         "(default: default; SPECOPS_POLICY)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Decide and record actions, carry none out."),
    metrics_port: Optional[int] = typer.Option(None, "--metrics-port", help="Serve the monitor's own /metrics "
                                               "on this port (SPECOPS_METRICS_PORT)."),
    profile: Optional[str] = typer.Option(None, "--profile", help="Validation profile for the acceptance floors "
                                          "(playbooks/profiles.yaml; SPECOPS_PROFILE)."),
    record_baseline: bool = typer.Option(False, "--record-baseline", help="After the cycle, record each seen "
                                         "deployment's acceptance baseline from its stored windows."),
    baseline_hours: float = typer.Option(1.0, "--baseline-hours", help="Hours of stored windows a recorded "
                                         "baseline is computed from."),
    deployment: Optional[list[str]] = typer.Option(None, "--deployment", "-d", help="Watch only this deployment "
                                                    "(repeatable; default: every deployment that speculates)."),
    db: Optional[str] = typer.Option(None, "--db", help="Registry URL or SQLite path."),
    output: str = typer.Option("table", "--output", "-o", help="table or json (one JSON report per cycle)."),
) -> None:
    """Watch acceptance of every registered deployment, detect drift, tell its cause, act within a policy."""
    import logging

    from specops.api.monitor import monitor as run
    from specops.api.monitor import monitor_options
    from specops.cli.output import check_format

    check_format(output, ("table", "json"))
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    opts, port = monitor_options(interval=interval, prometheus_url=prometheus_url, policy=policy, dry_run=dry_run,
                                 profile=profile, record_baseline=record_baseline, baseline_hours=baseline_hours,
                                 deployments=deployment, metrics_port=metrics_port)
    report = run(opts, once=once, metrics_port=port, db=db, on_report=lambda r: _show(r, output),
                 on_start=lambda line: typer.echo(line, err=True))
    if report is not None:
        raise typer.Exit(report.exit_code)


def _show(report, output: str) -> None:
    if output == "json":
        import json

        from specops.cli.output import versioned

        typer.echo(json.dumps(versioned(report), allow_nan=False))
    else:
        _table(report)
    if report.outcome == "idle" and report.error:
        typer.echo(f"error: {report.error}", err=True)
    for name, why in report.unseen.items():
        typer.echo(f"unseen: {name}: {why}", err=True)
    for name, why in report.not_watched.items():
        typer.echo(f"not watched: {name}: {why}", err=True)


def _table(r) -> None:
    import time

    echo = typer.echo
    when = time.strftime("%H:%M:%S", time.localtime(r.at))
    q = f", {r.queries} queries" if r.queries is not None else ""
    echo(f"{when} cycle {r.outcome}: {len(r.seen)} seen, {len(r.unseen)} unseen, {len(r.not_watched)} not watched "
         f"({r.duration_s:.2f}s{q}) -> {r.verdict}")
    if r.error and r.outcome != "idle":  # idle: said on stderr (the _show above)
        echo(f"  source: {r.error}" + (f"; retry in {r.retry_in_s:.0f}s" if r.retry_in_s else ""))
    for f in r.findings:
        if f.code != "DEPLOYMENT_UNSEEN":
            echo(f"  {f.one_line()}")
    for n in r.notes:
        echo(f"  note: {n}")
    for a in r.actions:
        echo(f"  action {a.action} on {a.deployment} ({a.rule}, {a.finding}): {a.outcome}"
             + (f" - {a.detail}" if a.detail else ""))


# --- runbooks --------------------------------------------------------------------------------------

@runbook_app.command("list")
def runbook_list(output: str = typer.Option("table", "--output", "-o", help="table, json or yaml.")) -> None:
    """List the runbooks (playbooks/runbooks/*.yaml) and what raises them."""
    from specops.api.monitor import list_runbooks
    from specops.cli.output import emit

    rows = list_runbooks()

    def table(rows) -> None:
        for r in rows:
            typer.echo(f"{r['name']:<28} {r['title']}" + (f"  [{', '.join(r['triggers'])}]" if r["triggers"] else ""))

    emit(rows, output, table)


@runbook_app.command("show")
def runbook_show(name: str = typer.Argument(..., help="Runbook name (see `specops runbook list`).")) -> None:
    """Print a runbook for on-call reading (markdown)."""
    from specops.api.monitor import show_runbook

    typer.echo(show_runbook(name), nl=False)


@runbook_app.command("run")
def runbook_run(
    name: str = typer.Argument(..., help="Runbook name (see `specops runbook list`)."),
    deployment: str = typer.Option(..., "--deployment", "-d", help="Registered deployment to diagnose."),
    allow_restart: bool = typer.Option(False, "--allow-restart", help="Let restart_probe steps restart the engine."),
    prometheus_url: Optional[str] = typer.Option(None, "--prometheus-url", help="Prometheus base URL "
                                                 "(SPECOPS_PROMETHEUS_URL); otherwise the engine's /metrics."),
    db: Optional[str] = typer.Option(None, "--db", help="Registry URL or SQLite path."),
    output: str = typer.Option("table", "--output", "-o", help="table, json or yaml."),
) -> None:
    """Run a runbook's diagnostic steps on a deployment; print findings and the recommended next action."""
    from specops.api.monitor import run_runbook
    from specops.cli.output import check_format, emit, progress

    check_format(output)
    result = run_runbook(name, deployment, allow_restart=allow_restart, prometheus_url=prometheus_url, db=db,
                         progress=progress)
    emit(result, output, _runbook_table)
    raise typer.Exit(result.exit_code)


def _runbook_table(r) -> None:
    from specops.api.monitor import status_word

    echo = typer.echo
    echo(f"runbook {r.runbook} on {r.deployment}")
    for i, s in enumerate(r.steps, 1):
        status = status_word(s.status)
        echo(f"{i}. {s.title} [{status}]" + (f" - {s.detail}" if s.detail else ""))
        for f in s.findings:
            echo(f"   {f.one_line()}")
    a = r.next_action
    blind = len(r.unevaluated)
    echo(f"next{f' (incomplete: {blind} step(s) could not evaluate)' if blind else ''}: {a.recommend}")
    if a.command:
        echo(f"  run: {a.command.replace('NAME', r.deployment)}")
