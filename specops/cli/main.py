"""Entry point: builds the typer app, runs it, maps errors to one line and an exit code.

Exit codes: 0 ok; 1 a check ran and failed (incompatible lineage, failed validation);
2 bad input, something could not be evaluated, or a missing extra/driver (named, with the pip
command); 3 an internal error (with the SPECOPS_DEBUG=1 hint); 130 interrupted.
Tracebacks only with SPECOPS_DEBUG=1.
"""

from __future__ import annotations

import importlib
import os
import sys

# Plain help and usage errors: rich-formatted help costs ~0.3 s of imports on every `--help`
# (STYLE: `specops --help` starts in <= 0.3 s). Set TYPER_USE_RICH=1 to get the boxed help back.
os.environ.setdefault("TYPER_USE_RICH", "0")

import typer  # noqa: E402

app = typer.Typer(
    name="specops",
    help="Run speculative-decoding LLM deployments on vLLM: recommend, deploy, track lineage, "
    "validate, watch and heal.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# Each module defines `register(app)`; order is the order in `specops --help`.
COMMAND_MODULES = [
    "recommend",
    "deploy",
    "lineage",
    "deployment",
    "measure",
    "validate",
    "tune",
    "monitor",
    "retrain",
    "heal",
    "kube",
]


_registered: list[str] = []


def _register_all() -> None:
    if _registered:  # main() may run many times in one process (tests); register once
        return
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"specops.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"specops.cli.{name}":
                continue  # capability not built yet
            raise
        module.register(app)
        _registered.append(name)


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", help="Print the specops version and exit."),
) -> None:
    """specops command-line interface."""
    if version:
        from specops import __version__

        typer.echo(f"specops {__version__}")
        raise typer.Exit(0)
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(0)


def main(argv: list[str] | None = None) -> None:
    from specops.errors import SpecopsError, missing_dependency

    _register_all()
    command = typer.main.get_command(app)
    debug = os.environ.get("SPECOPS_DEBUG") == "1"
    try:
        rv = command.main(args=argv, prog_name="specops", standalone_mode=False)
    except SpecopsError as exc:
        if debug:
            raise
        typer.echo(f"error: {exc.one_line()}", err=True)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.TyperException as exc:  # usage errors (unknown option, bad value): typer's own message
        show = getattr(exc, "show", None)
        if show is not None:
            show()
        else:
            typer.echo(f"error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("interrupted", err=True)
        sys.exit(130)
    except ModuleNotFoundError as exc:  # an extra or a driver that is not installed: exit 2, name it
        missing = missing_dependency(exc)
        if debug or missing is None:
            _internal(exc, debug)
        typer.echo(f"error: {missing.one_line()}", err=True)
        sys.exit(missing.exit_code)
    except Exception as exc:  # never a traceback for users
        _internal(exc, debug)
    sys.exit(rv if isinstance(rv, int) else 0)


def _internal(exc: Exception, debug: bool) -> None:
    """An internal error: exit 3 (1 is a failed check), one line with the SPECOPS_DEBUG hint."""
    if debug:
        raise exc
    typer.echo(
        f"error: internal error ({exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}). "
        "To fix: re-run with SPECOPS_DEBUG=1 for the traceback and report it.",
        err=True,
    )
    sys.exit(3)


if __name__ == "__main__":  # pragma: no cover
    main()
