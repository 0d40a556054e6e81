"""Run the real CLI entry point in this process (fast enough for many parametrized and hypothesis
cases): returns (exit code, stdout, stderr)."""

from __future__ import annotations

import contextlib
import io


def run_main(*args: str) -> tuple[int, str, str]:
    from specops.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, out.getvalue(), err.getvalue()
