"""Run the real CLI entry point (``specops.cli.main.main``) in the test process.

A ``python -m specops`` subprocess costs ≈ 0.8 s of CPU before the command does anything (interpreter,
typer, pydantic, sqlmodel imports); the suite makes a few hundred such calls. In-process, only the
command's own work is paid. What a fresh process would give a call is rebuilt around each one:

- ``os.environ`` gets ``env`` on top and is **restored as a whole** afterwards (a call's ``env``
  must not reach the next call; the library itself changes nothing: tests/retrain/test_environment.py); COLUMNS=80 unless
  ``env`` sets it (the width a piped subprocess saw: click and rich read it);
- stdin/stdout/stderr are fresh UTF-8 text streams over bytes (``.buffer`` exists; stdout strict,
  stderr backslashreplace, as CPython's), newlines read back as ``text=True`` reads them;
- cwd is the repository root (as ``run_cli``'s subprocess had), ``sys.argv`` that of ``python -m specops``;
- every ``functools.lru_cache`` in ``specops.*`` is cleared and the registry's per-process counters
  reset (a fresh process has none of them); typer's HAS_RICH is what a fresh process reads (plain help);
- the root logger has no handlers and level WARNING (pytest's capture handlers are set aside, so
  ``logging.basicConfig`` in the CLI takes effect and ``logging.lastResort`` prints to the captured
  stderr); loggers' levels/handlers, warning filters (the interpreter's defaults, printed to stderr)
  and every signal handler are put back afterwards;
- ``SystemExit`` becomes the return code (``None`` → 0, a string → printed, 1; modulo 256), an
  exception escaping ``main`` (only with SPECOPS_DEBUG=1, or a bug) prints its traceback to stderr
  and returns 1, as the interpreter would;
- ``timeout`` is enforced with SIGALRM and raises :class:`subprocess.TimeoutExpired`, as
  ``subprocess.run`` does.

What cannot be rebuilt in a process that has already started: environment variables read at
interpreter start or import time (see :func:`needs_subprocess`), calls from a thread other than the
main one (the streams and environment are process-wide). Those calls go through a real subprocess,
as do all calls when ``SPECOPS_TEST_CLI=subprocess`` is set (to check that both ways agree).
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
import signal
import subprocess
import sys
import threading
import traceback
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MAIN_PY = REPO / "specops" / "__main__.py"

# Read when the interpreter or a library starts (locale, encodings, hash seed, typer's HAS_RICH,
# huggingface_hub's constants, time zone, the registry's crash hook that parks a writer forever):
# changing them in a live process does not do what a fresh one would.
START_ENV_PREFIXES = ("PYTHON", "LC_", "TYPER_", "_TYPER", "HF_", "HUGGINGFACE_", "TRANSFORMERS_", "TORCH",
                      "OMP_", "MKL_", "VLLM_")
START_ENV_NAMES = frozenset({"LANG", "LANGUAGE", "TZ", "TERMINAL_WIDTH", "SPECOPS_TEST_PAUSE_BEFORE_COMMIT"})

# The warning filters a fresh `python -m specops` has (captured before pytest installs its own).
_FRESH_WARNING_FILTERS = list(warnings.filters)


def needs_subprocess(env: dict | None) -> bool:
    """True when this call cannot be run faithfully in the test process (module docstring)."""
    if os.environ.get("SPECOPS_TEST_CLI") == "subprocess":
        return True
    if threading.current_thread() is not threading.main_thread():
        return True
    return any(k in START_ENV_NAMES or k.startswith(START_ENV_PREFIXES) for k in (env or {}))


def run_subprocess(*args: str, env: dict | None = None, timeout: float = 120,
                   input: str | None = None) -> subprocess.CompletedProcess:
    """The real `specops` CLI in a subprocess (argv list, no shell), cwd the repository root."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return subprocess.run([sys.executable, "-m", "specops", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout, input=input, cwd=str(REPO))


class _Timeout(BaseException):
    """SIGALRM during an in-process call (a BaseException: the CLI's `except Exception` does not eat it)."""


def _exit_code(code) -> tuple[int, str]:
    if code is None:
        return 0, ""
    if isinstance(code, int):
        return code % 256, ""
    return 1, f"{code}\n"


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    raw = stream.buffer.getvalue().decode("utf-8", errors="replace")
    return raw.replace("\r\n", "\n").replace("\r", "\n")  # what text=True's universal newlines give


# Module-level state that a call may change, put back to what a fresh import has before each call
# (tests/cli/test_inproc_state.py fails when specops grows module state that is in neither list).
FRESH_STATE = {
    "specops.registry.db": {"_write_count": lambda: 0},  # the crash hook's write counter
    "specops.cli.output": {"_last": lambda: {"t": 0.0, "waiting": False}},  # the progress line's throttle
}
CLEARED_STATE = {("specops.registry.db", "_checked_engines"),  # engines already integrity-checked
                 ("specops.planner.stepcost", "_HW")}  # baseline rows' (model, GPU) looked up once
HARMLESS_STATE = {("specops.cli.main", "_registered")}  # commands registered once; the same every time


def _clear_caches() -> None:
    for name, module in list(sys.modules.items()):
        if not (name == "specops" or name.startswith("specops.")) or module is None:
            continue
        for value in list(vars(module).values()):
            if isinstance(value, functools._lru_cache_wrapper) and getattr(value, "__module__", "") == name:
                value.cache_clear()
    for name, attrs in FRESH_STATE.items():
        module = sys.modules.get(name)
        for attr, fresh in attrs.items() if module is not None else ():
            setattr(module, attr, fresh())
    for name, attr in CLEARED_STATE:
        module = sys.modules.get(name)
        if module is not None:
            getattr(module, attr).clear()


@contextlib.contextmanager
def _fresh_logging():
    root = logging.getLogger()
    manager = logging.Logger.manager
    saved = {name: (lg.level, list(lg.handlers), lg.propagate, lg.disabled)
             for name, lg in manager.loggerDict.items() if isinstance(lg, logging.Logger)}
    saved_root = (root.level, list(root.handlers))
    saved_disable = manager.disable
    root.handlers = []
    root.setLevel(logging.WARNING)
    manager.disable = logging.NOTSET
    try:
        yield
    finally:
        for h in root.handlers:
            if h not in saved_root[1]:
                with contextlib.suppress(Exception):
                    h.close()
        root.handlers = saved_root[1]
        root.setLevel(saved_root[0])
        manager.disable = saved_disable
        for name, lg in manager.loggerDict.items():
            if not isinstance(lg, logging.Logger):
                continue
            level, handlers, propagate, disabled = saved.get(name, (logging.NOTSET, [], True, False))
            lg.setLevel(level)
            lg.handlers = handlers
            lg.propagate = propagate
            lg.disabled = disabled


@contextlib.contextmanager
def _fresh_warnings():
    with warnings.catch_warnings():
        warnings.filters[:] = _FRESH_WARNING_FILTERS
        warnings._filters_mutated()

        def show(message, category, filename, lineno, file=None, line=None):
            sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

        warnings.showwarning = show
        yield


@contextlib.contextmanager
def _signals_restored():
    saved = {}
    for sig in signal.Signals:
        with contextlib.suppress(OSError, ValueError, TypeError):
            saved[sig] = signal.getsignal(sig)
    try:
        yield
    finally:
        for sig, handler in saved.items():
            if handler is not None and signal.getsignal(sig) is not handler:
                with contextlib.suppress(OSError, ValueError, TypeError):
                    signal.signal(sig, handler)


@contextlib.contextmanager
def _environment(env: dict | None):
    before = dict(os.environ)
    os.environ["COLUMNS"] = "80"  # what a piped subprocess's click and rich fell back to
    os.environ.update(env or {})
    try:
        yield
    finally:
        for key in [k for k in os.environ if k not in before]:
            del os.environ[key]
        for key, value in before.items():
            if os.environ.get(key) != value:
                os.environ[key] = value


@contextlib.contextmanager
def _typer_as_started():
    """typer reads TYPER_USE_RICH once, when it is first imported: in a fresh `python -m specops` that is
    after specops.cli.main set it to "0" (plain help); in this process any earlier import of typer may
    have read it unset (boxed rich help). Use what the fresh process would have read."""
    import typer.core
    import typer.main
    from typer.utils import parse_boolean_env_var

    fresh = parse_boolean_env_var(os.environ.get("TYPER_USE_RICH", "0"), default=True)
    saved = typer.core.HAS_RICH, typer.main.HAS_RICH
    typer.core.HAS_RICH = typer.main.HAS_RICH = fresh
    try:
        yield
    finally:
        typer.core.HAS_RICH, typer.main.HAS_RICH = saved


@contextlib.contextmanager
def _alarm(timeout: float | None):
    if not timeout or threading.current_thread() is not threading.main_thread():
        yield  # signals reach only the main thread: a caller on another thread bounds the run itself (a join)
        return

    def ring(_signum, _frame):
        raise _Timeout()

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_inprocess(*args: str, env: dict | None = None, timeout: float | None = 120, input: str | None = None,
                  cwd: Path | None = REPO) -> subprocess.CompletedProcess:
    """``specops ARGS`` in this process; the same result as :func:`run_subprocess` (module docstring).
    ``cwd=None`` runs in the current folder."""
    from specops.cli.main import main

    argv = [sys.executable, "-m", "specops", *args]
    stdin = io.TextIOWrapper(io.BytesIO((input or "").encode("utf-8")), encoding="utf-8")
    stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)
    stderr = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace", write_through=True)
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_argv, saved_cwd = sys.argv, os.getcwd()
    code, timed_out = 0, False
    with _environment(env), _signals_restored(), _fresh_logging(), _typer_as_started():
        _clear_caches()
        sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
        sys.argv = [str(MAIN_PY), *args]
        if cwd is not None:
            os.chdir(cwd)
        try:
            with _fresh_warnings(), _alarm(timeout):
                main(list(args))
        except SystemExit as exc:
            code, extra = _exit_code(exc.code)
            stderr.write(extra)
        except _Timeout:
            timed_out = True
        except BaseException:  # noqa: BLE001 - what the interpreter does with an uncaught exception
            traceback.print_exc(file=stderr)
            code = 1
        finally:
            sys.stdin, sys.stdout, sys.stderr = saved_streams
            sys.argv = saved_argv
            os.chdir(saved_cwd)
    out, err = _text(stdout), _text(stderr)
    if timed_out:
        raise subprocess.TimeoutExpired(argv, timeout, output=out, stderr=err)
    return subprocess.CompletedProcess(argv, code, out, err)


def run_cli(*args: str, env: dict | None = None, timeout: float = 120,
            input: str | None = None) -> subprocess.CompletedProcess:
    """The real `specops` CLI: in this process where that is faithful, else a subprocess (module docstring)."""
    if needs_subprocess(env):
        return run_subprocess(*args, env=env, timeout=timeout, input=input)
    return run_inprocess(*args, env=env, timeout=timeout, input=input)


def run_main(*args: str) -> tuple[int, str, str]:
    """In-process, for many parametrized and hypothesis cases: (exit code, stdout, stderr)."""
    r = run_inprocess(*args, cwd=None)
    return r.returncode, r.stdout, r.stderr
