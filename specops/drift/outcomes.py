"""Typed outcomes for the control loop (kopf's pattern): raise ``Retry`` for transient trouble (the
loop backs off and tries again), ``Fatal`` for trouble retrying cannot fix."""

from __future__ import annotations


class Retry(Exception):
    """Transient failure: try again after ``delay`` seconds (None: the loop's backoff decides)."""

    def __init__(self, delay: float | None = None, reason: str = "transient failure") -> None:
        super().__init__(reason)
        self.delay = 60.0 if delay is None else float(delay)
        self.explicit = delay is not None
        self.reason = reason


class Fatal(Exception):
    """Permanent failure: retrying will not help (bad configuration, refused action)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
