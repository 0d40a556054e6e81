"""`specops retrain`: retrain a deployment's draft, register it with its lineage, check it.

Exit codes: 0 the candidate was trained, registered and checked (the decision is printed: promote
or rollback); 2 bad input, a retraining job already running (the holder is named), or a step failed;
130 interrupted (the lease is released). Only typer and the stdlib are imported here.
"""

from __future__ import annotations

from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    app.command("retrain")(retrain)


def retrain(
    deployment: str = typer.Option(..., "--deployment", "-d", help="Deployment whose draft to retrain."),
    backend: str = typer.Option("local", "--backend", help="local (CPU/GPU torch loop), speculators or specforge."),
    data: Optional[str] = typer.Option(None, "--data", help="JSONL prompts file ({\"prompt\": ...} per line)."),
    from_traffic: bool = typer.Option(False, "--from-traffic",
                                      help="Use the deployment's recorded prompts ($SPECOPS_HOME/deployments/NAME/"
                                           "prompts.jsonl)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the exact commands; run nothing, take no lease."),
    params: Optional[str] = typer.Option(None, "--params", help="Backend parameters as a JSON object, e.g. "
                                                                "'{\"steps\": 300}' (see docs/retrain.md)."),
    heldout: int = typer.Option(8, "--heldout", help="Prompts held out for the train-stage acceptance check."),
    floor: float = typer.Option(0.0, "--floor", help="Acceptance rate the candidate must reach to be promoted."),
    min_gain: float = typer.Option(0.0, "--min-gain", help="Acceptance gain over the incumbent needed to promote."),
    reason: Optional[str] = typer.Option(None, "--reason", help="Why (recorded in the event log)."),
    db: Optional[str] = typer.Option(None, "--db", help="Registry URL or SQLite path."),
    output: str = typer.Option("table", "--output", "-o", help="table or json."),
) -> None:
    """Retrain the draft of a deployment from recent prompts, register it, and check it on held-out prompts."""
    from specops.api.retrain import retrain as run
    from specops.cli.output import check_format, emit, progress

    check_format(output)
    outcome = run(deployment, backend=backend, data=data, from_traffic=from_traffic, params=params, heldout=heldout,
                  floor=floor, min_gain=min_gain, reason=reason, dry_run=dry_run, db=db,
                  progress=progress if output == "table" else None)
    emit(outcome, output, _table)


def _table(outcome) -> None:
    import shlex

    echo = typer.echo
    if outcome.status == "dry-run":
        echo(f"dry run: {outcome.backend} retraining of {outcome.deployment} against {outcome.target} would run:")
        for argv in outcome.result.commands:
            echo("  " + shlex.join(argv))
        return
    echo(f"job {outcome.job_id}: trained {outcome.draft} ({outcome.result.method}) for {outcome.target} "
         f"on {outcome.result.trained_on}")
    if outcome.comparison is not None:
        c = outcome.comparison
        inc = c.incumbent_acceptance.acceptance_rate if c.incumbent_acceptance else None
        echo(f"held-out acceptance: incumbent {'-' if inc is None else f'{inc:.3f}'}, "
             f"candidate {c.candidate_acceptance.acceptance_rate:.3f} ({outcome.heldout_prompts} prompts)")
    if outcome.decision is not None:
        echo(f"decision: {outcome.decision.action} — {outcome.decision.reason}")
