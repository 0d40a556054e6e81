"""`specops completion SHELL [--install]`: the shell-completion script for a named shell (kubectl's
form), next to typer's `--install-completion` / `--show-completion`, which detect the current shell.

Only typer is imported at module level; the completion scripts are typer's own.
"""

from __future__ import annotations

import typer

PROG = "specops"
COMPLETE_VAR = "_SPECOPS_COMPLETE"  # what the scripts set; click answers it in specops.cli.main.main


def register(app: typer.Typer) -> None:
    app.command("completion", help="Print (or --install) the shell-completion script for bash, zsh, fish or "
                "powershell. Docs: docs/install.md.")(completion_command)


def completion_command(
    shell: str = typer.Argument(..., help="bash, zsh, fish, powershell or pwsh."),
    install: bool = typer.Option(False, "--install", help="Write the script where the shell loads it (bash: "
                                 "~/.bash_completions/specops.sh, sourced from ~/.bashrc) instead of printing it."),
) -> None:
    from typer._completion_shared import Shells, get_completion_script
    from typer._completion_shared import install as install_script

    from specops.errors import InputError, did_you_mean

    shells = tuple(s.value for s in Shells)
    if shell not in shells:
        raise InputError(f'unknown shell "{shell}".{did_you_mean(shell, shells)}', "use one of: " + ", ".join(shells))
    if install:
        shell, path = install_script(shell=shell, prog_name=PROG, complete_var=COMPLETE_VAR)
        typer.echo(f"{shell} completion installed in {path}; it takes effect in a new shell")
        return
    typer.echo(get_completion_script(prog_name=PROG, complete_var=COMPLETE_VAR, shell=shell))
