"""`make bench`: run every benchmark script in bench/ and print their numbers.

Each script prints its own figures; nothing here asserts a time. A script that fails is reported
and the others still run; the exit code is 1 when any failed.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    scripts = sorted(p for p in HERE.glob("*_bench.py"))
    failed = []
    for script in scripts:
        print(f"\n=== {script.name} ===", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.run([sys.executable, str(script)], cwd=str(HERE.parent)).returncode
        print(f"--- {script.name}: exit {rc}, {time.perf_counter() - t0:.1f} s", flush=True)
        if rc != 0:
            failed.append(script.name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
