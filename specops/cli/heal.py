"""`specops heal` and `specops canary watch`: retrain a local deployment's stale draft, validate it, canary it, promote or roll back.

Exit codes: 0 the run ended (promoted, or rolled back with the reason printed); 2 bad input, a heal
or retraining job already running for the deployment (the holder is named), or a step failed (the
incumbent keeps serving); 130 interrupted (the incumbent keeps serving, the leases are released).
Only typer and the stdlib are imported here.
"""

from __future__ import annotations

from typing import Optional

import typer

canary_app = typer.Typer(help="Kubernetes canaries: decide promotion on live traffic with the sequential test.",
                         no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.command("heal")(heal)
    canary_app.command("watch")(canary_watch)
    app.add_typer(canary_app, name="canary")


def heal(
    deployment: str = typer.Option(..., "--deployment", "-d", help="Local deployment to heal."),
    data: Optional[str] = typer.Option(None, "--data", help="JSONL prompts file ({\"prompt\": ...} per line)."),
    from_traffic: bool = typer.Option(False, "--from-traffic", help="Use the deployment's recorded prompts "
                                      "($SPECOPS_HOME/deployments/NAME/prompts.jsonl)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what would run; run nothing, take no lease."),
    params: Optional[str] = typer.Option(None, "--params", help="Local backend parameters as JSON, e.g. "
                                         "'{\"steps\": 300}' (see docs/retrain.md)."),
    heldout: int = typer.Option(24, "--heldout", help="Prompts kept out of training: the held-out check and the "
                                "canary test's prompts."),
    min_gain: float = typer.Option(0.05, "--min-gain", help="Acceptance gain over the incumbent the canary test must "
                                   "show to promote (its margin)."),
    alpha: float = typer.Option(0.05, "--alpha", help="The canary test's stated false-promotion rate."),
    budget: Optional[int] = typer.Option(None, "--budget", help="Most prompt pairs the canary test may use "
                                         "(default: --heldout); spent without a decision it rolls back."),
    floor: float = typer.Option(0.0, "--floor", help="Acceptance rate the candidate must reach anyway."),
    max_tokens: int = typer.Option(48, "--max-tokens", help="Tokens generated per canary prompt."),
    handover: str = typer.Option("restart", "--handover", help="restart: restart the deployment on its port with "
                                 "the new draft; adopt: the canary engine becomes the deployment (no extra start, "
                                 "new port)."),
    reason: Optional[str] = typer.Option(None, "--reason", help="Why (recorded in the event log)."),
    db: Optional[str] = typer.Option(None, "--db", help="Registry URL or SQLite path."),
    output: str = typer.Option("table", "--output", "-o", help="table or json."),
) -> None:
    """Heal a stale draft: retrain it, validate, canary against the incumbent, promote or roll back."""
    from specops.api.heal import heal as run
    from specops.cli.output import check_format, emit

    check_format(output, ("table", "json"))
    from specops.cli.output import progress as show

    progress = show if output == "table" else None
    outcome = run(deployment, data=data, from_traffic=from_traffic, params=params, heldout=heldout, min_gain=min_gain,
                  floor=floor, max_tokens=max_tokens, handover=handover, dry_run=dry_run, reason=reason, alpha=alpha,
                  budget=budget, db=db, progress=progress)
    emit(outcome, output, _table)


def _table(o) -> None:
    echo = typer.echo
    if o.status == "dry-run":
        echo(f"dry run: heal of {o.deployment} (target {o.live_target}, incumbent {o.incumbent_draft}) would run:")
        for i, line in enumerate(o.plan, 1):
            echo(f"  {i}. {line}")
        return
    for s in o.steps:
        echo(f"{s.step:<17} {s.status:<7} {s.seconds:>6.1f}s  {s.detail}")
    c = o.canary
    if c is not None:
        inc = f"{c.incumbent.acceptance.acceptance_rate:.3f}" if c.incumbent else "-"
        echo(f"canary acceptance (engine counters, {c.candidate_run.acceptance.num_prompts} prompts): incumbent "
             f"{c.incumbent.draft if c.incumbent else '-'} {inc}, candidate {c.candidate} "
             f"{c.candidate_run.acceptance.acceptance_rate:.3f}")
        if c.verdict is not None:
            v = c.verdict
            echo(f"canary test {c.canary_test_id}: {v.line()}; false-promotion rate <= {v.alpha:g} (stated); wealth "
                 f"better {v.wealth_better:.3g} / worse {v.wealth_worse:.3g} (stops at {1 / v.alpha:g}); traffic: "
                 f"{c.traffic}")
    echo(f"{o.deployment}: {o.status}; serving {o.serving_draft} at {o.endpoint} ({o.seconds:.0f}s)")
    if o.reason:
        echo(f"reason: {o.reason}")


def canary_watch(
    canary: str = typer.Argument(..., help="The canary (deployed with `specops deploy SPEC --platform kubernetes "
                                 "--canary-of STABLE`)."),
    namespace: Optional[str] = typer.Option(None, "--namespace", "-n",
                                            help="Namespace (default: from the registry, else 'default')."),
    prometheus_url: Optional[str] = typer.Option(None, "--prometheus-url", help="Prometheus base URL that scrapes "
                                                 "both arms (default: SPECOPS_PROMETHEUS_URL / config)."),
    window_s: Optional[int] = typer.Option(None, "--window-s", help="Seconds per window, one sample (default: the "
                                           "spec's canary.window_s, 300)."),
    alpha: Optional[float] = typer.Option(None, "--alpha", help="Stated false-promotion rate (default: the spec's "
                                          "canary.alpha, 0.05)."),
    min_gain: Optional[float] = typer.Option(None, "--min-gain", help="Acceptance-rate gain over the stable needed "
                                             "to promote (default: the spec's canary.min_gain, 0)."),
    budget: Optional[int] = typer.Option(None, "--budget", help="Most windows (default: the spec's canary.budget, "
                                         "48); spent without a decision the canary is rolled back."),
    timeout: float = typer.Option(600, "--timeout", help="Seconds to wait for the stable's rollout on promotion."),
    db: Optional[str] = typer.Option(None, "--db", help="Registry URL or SQLite path."),
    output: str = typer.Option("table", "--output", "-o", help="table or json."),
) -> None:
    """Read both arms' acceptance from Prometheus every window, test; promote on "better", else roll back."""
    from specops.api.heal import canary_watch as run
    from specops.cli.output import check_format, emit
    from specops.cli.output import progress as show

    check_format(output, ("table", "json"))
    outcome = run(canary, namespace=namespace, prometheus_url=prometheus_url, window_s=window_s, alpha=alpha,
                  min_gain=min_gain, budget=budget, timeout_s=timeout, db=db,
                  progress=show if output == "table" else None)
    emit(outcome, output, _watch_table)


def _watch_table(o) -> None:
    v = o.verdict
    typer.echo(f"canary test {o.canary_test_id}: {v.line()}; false-promotion rate <= {v.alpha:g} (stated); wealth "
               f"better {v.wealth_better:.3g} / worse {v.wealth_worse:.3g} (stops at {1 / v.alpha:g}); "
               f"{o.windows} windows of {o.window_s}s ({o.empty_windows} without a sample)")
    for line in o.lines:
        typer.echo(line)
    typer.echo(f"{o.canary}: {o.status} (stable {o.stable}, namespace {o.namespace})")
