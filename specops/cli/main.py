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
# typer reads the variable once, when it is imported: it is set for that import only, so importing
# this module leaves the process environment (and what child processes inherit) as it was.
_RICH = os.environ.get("TYPER_USE_RICH")
if _RICH is None:
    os.environ["TYPER_USE_RICH"] = "0"
try:
    import typer
finally:
    if _RICH is None:
        os.environ.pop("TYPER_USE_RICH", None)

app = typer.Typer(
    name="specops",
    help="Run speculative-decoding LLM deployments on vLLM: recommend, deploy, track lineage, "
    "validate, watch and heal.",
    no_args_is_help=True,
    add_completion=True,
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
    "config",
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
    from specops.cli import completion  # the CLI's own (typer's shell scripts): no library API behind it

    completion.register(app)


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


MAX_ARG_CHARS = 4096
"""Longest single command-line argument accepted (a longer one is refused before anything runs)."""


def check_argv(args: list[str]) -> None:
    """Refuse arguments no command can use: longer than MAX_ARG_CHARS or not valid UTF-8."""
    from specops.errors import InputError

    for i, a in enumerate(args, 1):
        if len(a) > MAX_ARG_CHARS:
            raise InputError(f"argument {i} is {len(a)} characters long, more than specops accepts "
                             f"({MAX_ARG_CHARS})", "shorten it (put long values in a file)")
        try:
            a.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(f"argument {i} is not valid UTF-8 text", "pass UTF-8 text (check the shell's locale "
                             "and the bytes of the value)") from None


def _usage_error(exc: Exception):
    """click's usage error as the one-line form: what is wrong, and the --help to read."""
    from specops.errors import InputError

    ctx = getattr(exc, "ctx", None)
    where = ctx.command_path if ctx is not None else "specops"
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    return InputError(message or "invalid usage", f"see `{where} --help` for its arguments and options")


def main(argv: list[str] | None = None) -> None:
    import errno

    from specops.errors import SpecopsError, missing_dependency

    _register_all()
    command = typer.main.get_command(app)
    debug = os.environ.get("SPECOPS_DEBUG") == "1"
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        check_argv(args)
        rv = command.main(args=args, prog_name="specops", standalone_mode=False)
    except SpecopsError as exc:
        if debug:
            raise
        typer.echo(f"error: {exc.one_line()}", err=True)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.TyperException as exc:  # usage errors (unknown option, bad value): one line, like ours
        if debug:
            raise
        typer.echo(f"error: {_usage_error(exc).one_line()}", err=True)
        sys.exit(getattr(exc, "exit_code", 2) or 2)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("interrupted", err=True)
        sys.exit(130)
    except ModuleNotFoundError as exc:  # an extra or a driver that is not installed: exit 2, name it
        missing = missing_dependency(exc)
        if debug or missing is None:
            _internal(exc, debug)
        typer.echo(f"error: {missing.one_line()}", err=True)
        sys.exit(missing.exit_code)
    except OSError as exc:  # the file system refused a path the user gave: input, not a bug
        if debug or exc.errno not in (errno.ENAMETOOLONG, errno.EACCES, errno.EROFS, errno.ENOSPC, errno.EISDIR,
                                      errno.ENOTDIR, errno.ENOENT, errno.ELOOP, errno.EPERM):
            _internal(exc, debug)
        name = str(exc.filename or "")[:120].encode("unicode_escape").decode()
        typer.echo(f"error: cannot use {name or 'a path'}: {exc.strerror}. To fix: give a path that exists, is "
                   "short enough and may be written.", err=True)
        sys.exit(2)
    except UnicodeError as exc:  # text that cannot be encoded or decoded (a file name, an output stream)
        if debug:
            raise
        typer.echo(f"error: text that is not valid UTF-8 ({exc.__class__.__name__}). To fix: use UTF-8 names "
                   "and values (and a UTF-8 locale, e.g. LANG=C.UTF-8).", err=True)
        sys.exit(2)
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
