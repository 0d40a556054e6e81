"""How long `specops recommend` takes against `specops --help`, as subprocesses in the same run.

Prints the median wall time of N runs of each and their ratio (the goal: recommend within 2x of --help),
plus a mistyped --gpu (refused before the planner loads) and the floor: recommend refused before specops
imports anything (typer's option parsing alone). Bytecode goes to a temporary
PYTHONPYCACHEPREFIX, warmed by one untimed run of each, as an installed package has its .pyc files
(the test environment sets PYTHONDONTWRITEBYTECODE). The registry is an empty SPECOPS_HOME: nothing
learned is read. No time is asserted.

    python bench/recommend_bench.py [N]
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECOMMEND = ["recommend", "--model", "llama-3.1-8b-instruct", "--gpu", "H100", "-o", "json"]
MISTYPED = ["recommend", "--model", "llama-3.1-8b-instruct", "--gpu", "H1000"]
FLOOR = ["recommend", "--model", "llama-3.1-8b-instruct", "--gpu", ""]
"""Refused ("no GPU given") before specops imports anything: what typer's parsing of recommend's options
costs by itself (typer 0.29 imports pydantic and builds one TypeAdapter per option), the floor under any
recommend run."""


CPU: dict[str, list[float]] = {}


def timed(args: list[str], env: dict[str, str], runs: int) -> list[float]:
    """Wall seconds of each run; the child's CPU seconds (user + sys) go to CPU[args[0]] (on a shared
    machine wall time includes waiting for a core, CPU time does not)."""
    out = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "specops", *args], cwd=str(ROOT), env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        out.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        CPU.setdefault(" ".join(args), []).append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return out


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as pyc:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(SPECOPS_HOME=home, PYTHONPYCACHEPREFIX=pyc, PYTHONPATH=str(ROOT))
        for args in (["--help"], RECOMMEND, MISTYPED, FLOOR):  # warm: bytecode and $SPECOPS_HOME/cache
            timed(args, env, 1)
        CPU.clear()
        help_t, rec_t, bad_t, floor_t = [], [], [], []
        for _ in range(runs):  # interleaved, so load on the machine hits all four alike
            help_t += timed(["--help"], env, 1)
            rec_t += timed(RECOMMEND, env, 1)
            bad_t += timed(MISTYPED, env, 1)
            floor_t += timed(FLOOR, env, 1)
    h, r, b, fl = (statistics.median(t) for t in (help_t, rec_t, bad_t, floor_t))
    print(f"specops --help: median {h * 1000:.0f} ms over {runs} runs")
    print(f"specops {' '.join(RECOMMEND)}: median {r * 1000:.0f} ms")
    print(f"specops {' '.join(MISTYPED)} (refused): median {b * 1000:.0f} ms")
    print(f"specops {' '.join(FLOOR)} (refused, floor): median {fl * 1000:.0f} ms")
    print(f"wall: recommend / --help = {r / h:.2f} (goal <= 2); mistyped --gpu / --help = {b / h:.2f}; "
          f"floor / --help = {fl / h:.2f}")
    ch, cr, cb, cf = (statistics.median(CPU[" ".join(a)]) for a in (["--help"], RECOMMEND, MISTYPED, FLOOR))
    print(f"cpu (user+sys): --help {ch * 1000:.0f} ms, recommend {cr * 1000:.0f} ms, mistyped {cb * 1000:.0f} ms, "
          f"floor {cf * 1000:.0f} ms; recommend / --help = {cr / ch:.2f}; mistyped / --help = {cb / ch:.2f}; "
          f"floor / --help = {cf / ch:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
