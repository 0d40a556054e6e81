"""The progress protocol between the library and the CLI: a long step calls ``progress(text)`` (the CLI
shows it on stderr, specops.cli.output.progress). A wait says what it waits for and the time left, in the
one form the CLI updates in place (:func:`waiting`); the library never prints."""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[str], None]


def waiting(what: str, waited_s: float, total_s: float) -> str:
    """"waiting for WHAT (Ns of Ts, Ns left)": the text of one wait, repeated as it goes on."""
    return f"waiting for {what} ({waited_s:.0f}s of {total_s:.0f}s, {max(0.0, total_s - waited_s):.0f}s left)"
