"""`specops validate`, `specops gate` and `specops report`: checklists as executable CI gates.

Exit codes: 0 every check passed (warnings may be shown); 1 a check (severity error) ran and failed;
2 a check could not be evaluated (unreachable endpoint or Prometheus, no samples, missing metric) and
none failed, or bad input.
"""

from __future__ import annotations

import typer


def _table(reports) -> None:
    from rich.table import Table

    from specops.api.validate import status_word
    from specops.cli.output import console

    out = console()
    colors = {"pass": "green", "warn": "yellow", "fail": "red", "could not evaluate": "magenta", "skipped": "dim"}
    for rep in reports:
        t = Table(title=f"{rep.checklist} · {rep.deployment} · profile {rep.profile}", show_lines=False)
        for col in ("status", "check", "severity", "result"):
            t.add_column(col, overflow="fold")
        words = {w: 0 for w in colors}
        for r in rep.results:
            word = status_word(r.status, r.severity)
            words[word] += 1
            text = r.message + (f" To fix: {r.fix}" if r.fix and r.status != "pass" else "")
            t.add_row(f"[{colors[word]}]{word}[/]", r.id, r.severity, text)
        out.print(t)
        out.print(", ".join(f"{n} {w}" for w, n in words.items()) + f" -> {rep.verdict} (exit {rep.exit_code})")


def _check_outputs(fmt: str, junit: str | None) -> None:
    from specops.cli.output import check_format, check_writable

    check_format(fmt, ("table", "json"))
    if junit:
        check_writable(junit, "--junit", makes_folders=True)


def _finish(reports, fmt: str, junit: str | None) -> None:
    from specops.cli.output import emit

    if junit:
        from specops.api.validate import write_junit

        write_junit(reports, junit)
    data = [r.model_dump(mode="json") | {"exit_code": r.exit_code} for r in reports]
    emit(data if len(data) > 1 else data[0], fmt, lambda _d: _table(reports))
    raise typer.Exit(max(r.exit_code for r in reports))


def register(app: typer.Typer) -> None:
    @app.command("validate")
    def validate_cmd(
        checklist: str = typer.Option(..., "--checklist", "-c", help="train, deploy, ops, or a checklist YAML path."),
        deployment: str = typer.Option(..., "--deployment", "-d", help="Registered deployment to validate."),
        profile: str = typer.Option("gpu-default", "--profile", "-p",
                                    help="Threshold profile from playbooks/profiles.yaml (gpu-default, cpu-tiny)."),
        output: str = typer.Option("table", "--output", "-o", help="table or json."),
        junit: str = typer.Option(None, "--junit", help="Also write JUnit XML to this file (for CI)."),
        prometheus_url: str = typer.Option(None, "--prometheus-url",
                                           help="Prometheus to read metrics from (else SPECOPS_PROMETHEUS_URL; "
                                                "without one, /metrics is sampled live)."),
        baseline_endpoint: str = typer.Option(None, "--baseline-endpoint",
                                              help="The same target served without speculation (lossless check)."),
        window: str = typer.Option(None, "--window", help="Read this much metrics history instead of the "
                                   "profile's (e.g. 30s, 2m; at least 5s, at most the profile's window): a shorter "
                                   "live sample of /metrics."),
    ) -> None:
        """Run a checklist against a deployment; exit 0 pass, 1 a check failed, 2 could not evaluate."""
        from specops.api.validate import parse_duration, validate
        from specops.cli.output import progress

        _check_outputs(output, junit)  # before the run is recorded
        window_s = parse_duration(window) if window is not None else None
        report = validate(checklist, deployment, profile=profile, prometheus_url=prometheus_url,
                          baseline_endpoint=baseline_endpoint, window_s=window_s, progress=progress)
        _finish([report], output, junit)

    @app.command("gate")
    def gate_cmd(
        spec: str = typer.Option(..., "--spec", "-s", help="Deployment spec YAML (the file changed in the PR)."),
        endpoint: str = typer.Option(None, "--endpoint", help="A running engine for this spec: also run the deploy "
                                     "checklist against it."),
        profile: str = typer.Option("gpu-default", "--profile", "-p", help="Threshold profile."),
        output: str = typer.Option("table", "--output", "-o", help="table or json."),
        junit: str = typer.Option(None, "--junit", help="Also write JUnit XML to this file."),
        prometheus_url: str = typer.Option(None, "--prometheus-url", help="Prometheus scraping the endpoint."),
        baseline_endpoint: str = typer.Option(None, "--baseline-endpoint", help="Baseline without speculation."),
    ) -> None:
        """CI gate for a deployment spec: schema, vLLM capabilities, lineage, and with --endpoint the deploy checklist."""
        from specops.api.validate import gate
        from specops.cli.output import progress

        _check_outputs(output, junit)
        reports = gate(spec, endpoint=endpoint, profile=profile, prometheus_url=prometheus_url,
                       baseline_endpoint=baseline_endpoint, progress=progress)
        _finish(reports, output, junit)

    @app.command("report")
    def report_cmd(
        deployment: str = typer.Option(..., "--deployment", "-d", help="Registered deployment."),
        out: str = typer.Option(None, "--out", help="HTML file to write (default: <deployment>-report.html)."),
    ) -> None:
        """Write a self-contained HTML report: acceptance plots, TPOT with vs without speculation, checklist results."""
        from specops.api.validate import report

        typer.echo(str(report(deployment, out)))
