"""`specops deploy SPEC`, `status`, `logs`, `stop`, `restart`: a deployment's life.

Exit codes: 0 ok; 1 the lineage gate found the pair incompatible; 2 bad spec, port in use, an engine
that exited during start-up (with the last lines of its log). ``status``: 0 every deployment that should
be serving answered; 1 some did not (each named on stderr); 2 nothing to check (no deployments, or all
stopped) or an unknown name. Only typer and the stdlib are imported
here; specops.api.deploy is imported inside each command.
"""

from __future__ import annotations

import sys
from typing import Optional

import typer

OUTPUT = typer.Option("table", "--output", "-o", help="table, json or yaml.")


def register(app: typer.Typer) -> None:
    app.command("deploy")(deploy_command)
    app.command("status")(status_command)
    app.command("logs")(logs_command)
    app.command("stop")(stop_command)
    app.command("restart")(restart_command)


def _progress(msg: str) -> None:
    from specops.cli.output import progress

    progress(msg)


def deploy_command(
    spec_file: str = typer.Argument(..., help="Deployment spec (YAML)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the exact argv and environment; start nothing."),
    platform: Optional[str] = typer.Option(None, "--platform", help="local or kubernetes (default: the spec's)."),
    force: bool = typer.Option(False, "--force", help="Deploy even if the lineage gate fails (needs --reason)."),
    reason: Optional[str] = typer.Option(None, "--reason", help="Why --force; recorded in the event log."),
    canary_of: Optional[str] = typer.Option(None, "--canary-of", help="Kubernetes: deploy as a canary of NAME."),
    replicas: Optional[int] = typer.Option(None, "--replicas", help="Kubernetes: replicas (canary size)."),
    no_check: bool = typer.Option(False, "--no-check", help="Skip vLLM's own argument/config check."),
    force_conflicts: bool = typer.Option(
        False, "--force-conflicts",
        help="Kubernetes: take over fields another field manager changed (server-side apply force)."),
    server_dry_run: bool = typer.Option(
        False, "--server-dry-run",
        help="Kubernetes: have the API server check every object (dryRun=All); nothing is stored."),
    output: str = typer.Option("table", "--output", "-o", help="table or json."),
) -> None:
    """Deploy a spec: exact vLLM launch, lineage gate, local process or Kubernetes.

    Example: specops deploy deploy.yaml --dry-run
    """
    from specops.api.deploy import deploy
    from specops.cli.output import check_format

    output = check_format(output, ("table", "json"))  # before any work: a bad -o never half-deploys
    result = deploy(spec_file, platform=platform, dry_run=dry_run, force=force, reason=reason, canary_of=canary_of,
                    replicas=replicas, check=not no_check, progress=_progress, force_conflicts=force_conflicts,
                    server_dry_run=server_dry_run)
    if output == "json":
        from specops.cli.output import emit

        emit(result, "json")
        return
    for line in result.summary_lines():
        typer.echo(line)


def _fmt_uptime(s: float | None) -> str:
    if s is None:
        return "-"
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _status_table(rows) -> None:
    from rich.table import Table

    from specops.cli.output import console

    t = Table("name", "status", "health", "uptime", "method", "γ", "acceptance", "τ", "drafts")
    notes = []
    for r in rows:
        status = r.status if r.process != "gone" or r.status != "running" else "running (process gone)"
        where = r.status if r.platform == "local" else f"{r.status} ({r.platform})"
        acc = f"{r.acceptance_rate:.3f}" if r.acceptance_rate is not None else "-"
        if r.note:
            notes.append(f"{r.name}: {r.note}")
        t.add_row(r.name, status if r.platform == "local" else where, r.health, _fmt_uptime(r.uptime_s),
                  r.method or "-", str(r.num_speculative_tokens or "-"), acc,
                  f"{r.mean_acceptance_length:.2f}" if r.mean_acceptance_length is not None else "-",
                  str(int(r.num_drafts)) if r.num_drafts is not None else "-")
    console().print(t)
    for n in notes:
        typer.echo(n)
    if rows and any(r.acceptance_rate is not None for r in rows):
        typer.echo("acceptance = accepted / drafted tokens since start; τ = mean tokens per verify step")


def status_command(
    name: Optional[str] = typer.Argument(None, help="Deployment name (default: all)."),
    output: str = OUTPUT,
) -> None:
    """Health, uptime and live acceptance (from /metrics) of deployments.

    Example: specops status tiny
    """
    from specops.api.deploy import status, status_exit_code
    from specops.cli.output import check_format, emit

    check_format(output)
    rows = status(name)
    code, lines = status_exit_code(rows)
    if rows or output != "table":
        emit(rows, output, _status_table)
    for line in lines:
        typer.echo(line, err=True)
    raise typer.Exit(code)


def logs_command(
    name: str = typer.Argument(..., help="Deployment name."),
    lines: int = typer.Option(50, "--lines", "-n", help="How many lines from the end."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new lines (Ctrl-C to stop)."),
) -> None:
    """Print the engine log of a local deployment.

    Example: specops logs tiny -n 20
    """
    from specops.api.deploy import follow_log, tail

    for line in tail(name, lines):
        typer.echo(line)
    if follow:
        for chunk in follow_log(name):
            sys.stdout.write(chunk)
            sys.stdout.flush()


def stop_command(
    name: str = typer.Argument(..., help="Deployment name."),
    grace: float = typer.Option(30.0, "--grace", help="Seconds between SIGTERM and SIGKILL."),
) -> None:
    """Stop a local engine (only the process specops started: pid and start time verified).

    Example: specops stop tiny
    """
    from specops.api.deploy import stop

    how = stop(name, grace_s=grace, progress=_progress)
    typer.echo(f"{name}: {how}")


def restart_command(
    name: str = typer.Argument(..., help="Deployment name."),
    force: bool = typer.Option(False, "--force", help="Override a failed lineage check (needs --reason)."),
    reason: str = typer.Option(None, "--reason", help="Why the override is acceptable (recorded)."),
) -> None:
    """Stop and start a local engine again from its saved spec (warm compile cache). A lineage
    override recorded for the same target/draft pair still holds.

    Example: specops restart tiny
    """
    from specops.api.deploy import restart

    result = restart(name, progress=_progress, force=force, reason=reason)
    for line in result.summary_lines():
        typer.echo(line)
