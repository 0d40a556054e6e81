"""Ask the installed vLLM itself whether it accepts a launch, before launching.

vLLM's own argument parser (``FlexibleArgumentParser`` + ``make_arg_parser``, then
``validate_parsed_serve_args``) and its config validation (``EngineArgs.from_cli_args(args)
.create_engine_config()``, which reads the model's and the draft's config.json and builds the
speculative config) run in a child process: importing vLLM takes seconds, configures logging and
reads environment variables, none of which should leak into the specops process. The child prints
one JSON line: ``{"ok": true}`` or ``{"ok": false, "stage": ..., "message": ...}``.

Nothing is loaded onto a device and no weights are read.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys

from specops.errors import CapabilityError, EngineError

# Where the serve parser lives moved between releases.
_PARSER_MODULES = ("vllm.entrypoints.openai.cli_args", "vllm.entrypoints.launchers.cli_args")
_ARGPARSE_MODULES = ("vllm.utils.argparse_utils", "vllm.utils")


def _import_first(names: tuple[str, ...], attr: str):
    import importlib

    for name in names:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(mod, attr):
            return getattr(mod, attr)
    raise ImportError(f"{attr} not found in {', '.join(names)}")


def _one_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    # argparse: "usage: ..." lines then "prog: error: ..."; keep the error.
    errs = [ln for ln in lines if "error:" in ln]
    return " ".join(errs[-1:] or lines[-2:])[:600]


def check_in_this_process(flags: list[str]) -> dict:
    """Parse and validate ``flags`` (everything after ``vllm serve``, with ``--model``)."""
    try:
        parser_cls = _import_first(_ARGPARSE_MODULES, "FlexibleArgumentParser")
        make_arg_parser = _import_first(_PARSER_MODULES, "make_arg_parser")
        validate = _import_first(_PARSER_MODULES, "validate_parsed_serve_args")
        from vllm.engine.arg_utils import EngineArgs
    except ImportError as exc:
        return {"ok": False, "stage": "import", "message": f"cannot import vLLM's parser ({exc})"}
    parser = make_arg_parser(parser_cls(prog="vllm serve", description="specops check"))
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            args = parser.parse_args(flags)
    except SystemExit:
        return {"ok": False, "stage": "arguments", "message": _one_line(err.getvalue()) or "rejected"}
    try:
        validate(args)
        EngineArgs.from_cli_args(args).create_engine_config()
    except Exception as exc:  # vLLM raises ValueError, TypeError, pydantic errors, ...
        text = str(exc).strip().splitlines()
        msg = " ".join(ln.strip() for ln in text[:4])[:600] or exc.__class__.__name__
        return {"ok": False, "stage": "config", "message": f"{exc.__class__.__name__}: {msg}"}
    return {"ok": True}


def check_argv(flags: list[str], env: dict[str, str], *, python: str = sys.executable,
               timeout_s: float = 300) -> None:
    """Run :func:`check_in_this_process` in a child with the engine's environment.

    Raises CapabilityError (exit 2) with vLLM's own message on one line when vLLM rejects the launch.
    ``SPECOPS_TEST_SKIP_VLLM_CHECK=1`` skips it: a test-only hook (docs/development.md) for the suite's
    engine tests whose subject is not this check; users skip it with ``--no-check``.
    """
    import os
    import time

    if os.environ.get("SPECOPS_TEST_SKIP_VLLM_CHECK") == "1":
        return

    from specops.engines.local import note_for_tests

    t0 = time.monotonic()
    try:
        proc = subprocess.run([python, "-m", "specops.engines.vllm_check", json.dumps(flags)],
                              capture_output=True, text=True, env=env, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise EngineError(f"vLLM's argument check took longer than {timeout_s:.0f} s",
                          "retry, or skip it with --no-check") from None
    finally:
        note_for_tests("vllm_check", time.monotonic() - t0)
    result = None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{") and '"ok"' in line:
            result = json.loads(line)
            break
    if result is None:
        raise EngineError(f"vLLM's argument check crashed (exit {proc.returncode}): "
                          f"{_one_line(proc.stderr) or 'no output'}", "retry with --no-check to skip it")
    if not result["ok"]:
        raise CapabilityError(f"vLLM rejects this launch ({result['stage']}): {result['message']}",
                              "fix the spec field that renders this flag (see `specops deploy SPEC --dry-run`)")


if __name__ == "__main__":  # the child
    out = check_in_this_process(json.loads(sys.argv[1]))
    sys.stdout.write("\n" + json.dumps(out) + "\n")
