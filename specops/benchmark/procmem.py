"""Memory of an engine's processes from ``/proc`` (Linux; no psutil): the pid and all descendants."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from specops.models import Strict


class ProcessMemory(Strict):
    pid: int = Field(description="Root pid (the server).")
    processes: int = Field(description="Processes counted (the pid and its descendants).")
    rss_mib: float = Field(description="Sum of VmRSS now (MiB); shared pages count once per process.")
    peak_rss_mib: float = Field(description="Sum of VmHWM (peak RSS) (MiB).")


def _status_kib(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return out


def descendants(pid: int) -> list[int]:
    seen, todo = [], [pid]
    while todo:
        p = todo.pop()
        if p in seen or not Path(f"/proc/{p}").exists():
            continue
        seen.append(p)
        todo += _children(p)
    return seen


def process_memory(pid: int) -> ProcessMemory | None:
    """RSS of ``pid`` and its descendants, or None when the process is not visible here."""
    pids = descendants(pid)
    if not pids:
        return None
    rss = sum(_status_kib(p, "VmRSS") for p in pids)
    hwm = sum(_status_kib(p, "VmHWM") for p in pids)
    return ProcessMemory(pid=pid, processes=len(pids), rss_mib=round(rss / 1024, 1), peak_rss_mib=round(hwm / 1024, 1))
