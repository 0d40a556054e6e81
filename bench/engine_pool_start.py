"""How long the test suite's engine pool (tests/engines/pool.py) takes to start: both engines one after
the other, then both at once, on the committed tiny models. Four real vLLM CPU engine starts (≈ 4–8 min
on 2 cores); not part of `make bench`. Prints the seconds and the machine's load average.

    .venv/bin/python bench/engine_pool_start.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=1, help="serial + parallel pairs to time (1)")
    args = p.parse_args()
    from tests.engines.pool import start_pool

    models = {n: REPO / "tests" / "assets" / "tiny-models" / n for n in ("target-v1", "draft-v1")}
    for _ in range(args.rounds):
        for serial in ("1", "0"):
            os.environ["SPECOPS_TEST_POOL_SERIAL"] = serial
            load = os.getloadavg()[0]
            with tempfile.TemporaryDirectory(prefix="pool-bench-") as tmp:
                pool = start_pool(Path(tmp), models)
                pool.stop()
            print(f"engine pool ({'serial' if serial == '1' else 'parallel'}): spec + base healthy in "
                  f"{pool.started_in_s:.0f} s (load average {load:.1f} -> {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
