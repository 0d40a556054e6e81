"""`specops config show`: every setting, its value and where it came from.

Precedence (specops/settings.py): a command's flag, then ``SPECOPS_<NAME>``, then
``$SPECOPS_HOME/config.yaml``, then the default. Only typer is imported at module level.
"""

from __future__ import annotations

import typer

config_app = typer.Typer(help="Settings: what each one is set to and where that came from.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config")


@config_app.command("show")
def show(output: str = typer.Option("table", "--output", "-o", help="table or json.")) -> None:
    """Each setting, its value and its source: SPECOPS_<NAME>, config.yaml, default or unset (a
    command's own flag, in the flag column, wins over all of them). Secrets are redacted."""
    from specops.api.config import show as run
    from specops.cli.output import check_format, emit

    fmt = check_format(output, ("table", "json"))
    emit(run(), fmt, _table)


def _table(data: dict) -> None:
    from rich.markup import escape
    from rich.table import Table

    from specops.cli.output import console

    out = console()
    config = data["config_file"] + ("" if data["config_file_exists"] else " (none)")
    out.print(escape(f"SPECOPS_HOME: {data['home']} ({data['home_source']}); config file: {config}"))
    t = Table(title="settings (a command's flag wins over the source shown)")
    for column in ("setting", "value", "source", "flag"):
        t.add_column(column, overflow="fold")
    for row in data["settings"]:
        t.add_row(escape(row["name"]), escape("-" if row["value"] is None else str(row["value"])),
                  escape(row["source"]), escape(row["flag"] or "-"))
    out.print(t)
