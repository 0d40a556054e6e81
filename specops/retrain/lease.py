"""The retraining lease: one running job per deployment, released on every way out.

Built on the registry's ``start_retrain_job`` / ``finish_retrain_job`` (a unique active key per
deployment). Released:

- normally and on exceptions: ``finally`` finishes the job (``failed`` with the error);
- on SIGTERM / SIGINT / SIGHUP: :func:`signals_as_exceptions` turns them into an exception, so the
  ``finally`` runs (a Kubernetes pod deletion or Ctrl-C);
- on SIGKILL or a machine crash nothing in the process can run, so a later request takes over: when
  the holder (``host:pid``) is on this host and its process is gone, the job is marked ``failed``
  and the lease taken at once; a holder on another host is taken over when its lease expires
  (``lease_seconds``, default 2 h: size it above the longest expected run).
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager


class Interrupted(KeyboardInterrupt):
    """A termination signal arrived; raised so that cleanup runs (a KeyboardInterrupt: the CLI exits 130)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by signal {signal.Signals(signum).name}")
        self.signum = signum


@contextmanager
def signals_as_exceptions() -> Iterator[None]:
    """Within the block, SIGTERM/SIGINT/SIGHUP raise :class:`Interrupted` (main thread only)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}

    def handler(signum, _frame):
        raise Interrupted(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def holder_is_dead(holder: str | None) -> bool:
    """True only when the holder is ``host:pid`` on this host and no such process exists."""
    if not holder or ":" not in holder:
        return False
    host, _, pid = holder.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def take_lease(reg, deployment: str, *, backend: str, reason: str | None, params: dict | None,
               lease_seconds: int, actor: str | None = None):
    """Start a retraining job (the lease). A job whose holder process died on this host is ended as
    ``failed`` and taken over; a live holder makes this raise LeaseHeldError naming it."""
    from specops.registry.measurements import LeaseHeldError

    kw = dict(backend=backend, reason=reason, params=params, holder=holder_id(), lease_seconds=lease_seconds,
              actor=actor)
    try:
        return reg.start_retrain_job(deployment, **kw)
    except LeaseHeldError:
        running = [j for j in reg.retrain_jobs(deployment, limit=10) if j.status == "running"]
        if not running or not holder_is_dead(running[0].holder):
            raise
        reg.finish_retrain_job(running[0].id, status="failed", actor=actor,
                               message=f"holder {running[0].holder} is gone (killed or crashed); lease released")
        return reg.start_retrain_job(deployment, **kw)
