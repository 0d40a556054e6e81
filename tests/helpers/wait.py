"""Polling with a deadline, for tests that wait on something outside the test process (a Prometheus
scrape, a subprocess, a server): ask again every ``interval`` until the answer is truthy, fail with
what was awaited once ``timeout`` has passed. Never a fixed sleep that hopes the thing happened."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(pred: Callable[[], T], timeout: float, what: str, interval: float = 0.2) -> T:
    """Return ``pred()``'s first truthy value; raise AssertionError naming ``what`` after ``timeout``
    seconds. Exceptions from ``pred`` propagate (a broken probe is not a slow one)."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what} (last answer: {value!r})")
        time.sleep(interval)
