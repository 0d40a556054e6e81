"""`specops deployment register|list|show|remove`: deployments in the registry, including engines specops
did not start ("adopted"), so that bench, metrics, validate and monitor work on them too."""

from __future__ import annotations

from typing import Optional

import typer

DB = typer.Option(None, "--db", help="Registry URL or SQLite path (default: SPECOPS_DB, else $SPECOPS_HOME/specops.db).")

deployment_app = typer.Typer(help="Registered deployments: adopt an existing engine, list, show, remove.",
                             no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(deployment_app, name="deployment")


@deployment_app.command("register")
def register_command(
    name: str = typer.Argument(..., help="Deployment name (lowercase letters, digits and '-'; at most 63)."),
    endpoint: str = typer.Option(..., "--endpoint", help="Base URL of the running vLLM server."),
    served_name: str = typer.Option(None, "--served-name", help="Served model name (default: the only one)."),
    target: str = typer.Option(None, "--target", help="Target model NAME@VERSION (registry ref or as given)."),
    draft: str = typer.Option(None, "--draft", help="Draft model NAME@VERSION (registry ref or as given)."),
    method: str = typer.Option(None, "--method", help="Speculative method the engine runs (e.g. eagle3, ngram)."),
    api_key_env: str = typer.Option(None, "--api-key-env", help="NAME of the env var holding the API key."),
    check: bool = typer.Option(True, "--check/--no-check", help="Probe the engine before recording it."),
    db: Optional[str] = DB,
    output: str = typer.Option("table", "--output", "-o", help="table, json or yaml."),
) -> None:
    """Adopt an engine specops did not start (status "adopted")."""
    from specops.api.deployment import adopt
    from specops.cli.output import check_format, emit

    check_format(output)
    row, notes = adopt(name, endpoint, served_name=served_name, target=target, draft=draft, method=method,
                       api_key_env=api_key_env, check=check, db=db)

    def show(r) -> None:
        serving = f"serving {r.served_model_name}" if r.served_model_name else "served model name not recorded"
        typer.echo(f"adopted {r.name}: {r.endpoint} {serving}"
                   + (f", γ={r.num_speculative_tokens}" if r.num_speculative_tokens else ""))
        for n in notes:
            typer.echo(f"note: {n}")

    emit(row, output, show)


@deployment_app.command("list")
def list_command(db: Optional[str] = DB,
                 output: str = typer.Option("table", "--output", "-o", help="table, json or yaml.")) -> None:
    """List deployments (started by specops or adopted)."""
    from specops.api.deployment import list_deployments
    from specops.cli.output import check_format, emit

    check_format(output)
    rows = list_deployments(db=db)
    emit(rows, output, _table)


def _table(rows) -> None:
    from rich.table import Table

    from specops.cli.output import console

    if not rows:
        typer.echo("no deployments (adopt one: specops deployment register NAME --endpoint URL)")
        return
    t = Table()
    for col in ("name", "status", "platform", "endpoint", "served name", "method", "γ", "target", "draft"):
        t.add_column(col)
    for r in rows:
        t.add_row(r.name, r.status, r.platform, r.endpoint or "", r.served_model_name or "", r.method or "",
                  str(r.num_speculative_tokens or ""), r.target_ref or "", r.draft_ref or "")
    console().print(t)


@deployment_app.command("show")
def show_command(name: str = typer.Argument(..., help="Deployment name."), db: Optional[str] = DB,
                 output: str = typer.Option("yaml", "--output", "-o", help="json or yaml.")) -> None:
    """Show one deployment's record."""
    from specops.api.deployment import get_deployment
    from specops.cli.output import emit

    emit(get_deployment(name, db=db), output)


@deployment_app.command("remove")
def remove_command(name: str = typer.Argument(..., help="Deployment name."), db: Optional[str] = DB) -> None:
    """Forget an adopted (or stopped) deployment; its measurements and events are kept."""
    from specops.api.deployment import remove

    how = remove(name, db=db)
    typer.echo(f"{name} {how}")
