"""Registry benchmark: 1,000,000 acceptance measurements over 1,000 deployments (real SQLite file).

Prints the time of the two queries the fleet views run all the time — the latest measurement of every
deployment, and one deployment's 7-day trend — as the median (and max) of repeated runs, through the
public API (`latest_measurements()`, `measurement_trend()`), including building the result objects.
Target: <= 50 ms each.

    .venv/bin/python bench/registry_bench.py [--rows 1000000] [--deployments 1000] [--db URL] [--keep]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import insert  # noqa: E402

from specops.registry import open_registry  # noqa: E402
from specops.registry.schema import Deployment, Measurement  # noqa: E402

TARGET_MS = 50.0


def populate(reg, rows: int, deployments: int, now: datetime) -> float:
    t0 = time.perf_counter()
    with reg.engine.begin() as conn:
        conn.execute(insert(Deployment.__table__), [
            {"name": f"dep-{i:04d}", "platform": "local", "status": "running", "created_at": now, "updated_at": now}
            for i in range(deployments)])
    per = rows // deployments
    step = timedelta(days=30) / per  # each deployment: `per` windows spread over 30 days
    rng = random.Random(0)
    chunk: list[dict] = []
    done = 0
    for d in range(1, deployments + 1):
        for j in range(per):
            end = now - step * (per - 1 - j)
            drafts = rng.randint(50, 150)
            accepted = rng.randint(0, drafts * 3)
            chunk.append({"deployment_id": d, "window_start": end - step, "window_end": end,
                          "acceptance_rate": accepted / (drafts * 3), "mean_acceptance_length": 1 + accepted / drafts,
                          "per_position": None, "num_drafts": drafts, "num_draft_tokens": drafts * 3,
                          "num_accepted_tokens": accepted, "task": None, "source": "bench", "granularity": "raw",
                          "extra": None})
        if len(chunk) >= 50_000 or d == deployments:
            with reg.engine.begin() as conn:
                conn.execute(insert(Measurement.__table__), chunk)
            done += len(chunk)
            chunk = []
            print(f"  inserted {done:,} / {per * deployments:,}", end="\r", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return time.perf_counter() - t0


def timed(fn, repeat: int) -> tuple[float, float, object]:
    """Median and max wall time in ms (and prints the median CPU time: on a busy machine wall time
    includes waiting for a core)."""
    times, cpu, result = [], [], None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        times.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    print(f"  ({getattr(fn, '__name__', 'query')}: median CPU time {statistics.median(cpu):.1f} ms)")
    return statistics.median(times), max(times), result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--deployments", type=int, default=1000)
    ap.add_argument("--db", help="Registry URL (default: a SQLite file in a temp dir).")
    ap.add_argument("--keep", action="store_true", help="Keep the temp database.")
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="specops-bench-")
    url = args.db or f"sqlite:///{tmp}/bench.db"
    reg = open_registry(url)
    now = datetime.now(timezone.utc).replace(microsecond=0)
    print(f"populating {args.rows:,} measurements over {args.deployments:,} deployments ({url})")
    secs = populate(reg, args.rows, args.deployments, now)
    print(f"insert: {secs:.1f} s ({args.rows / secs:,.0f} rows/s)")
    reg.close()
    reg = open_registry(url)  # fresh connections, as a CLI call would have
    rng = random.Random(1)
    lat_med, lat_max, latest = timed(reg.latest_measurements, args.repeat)
    assert len(latest) == args.deployments, len(latest)
    names = [f"dep-{rng.randrange(args.deployments):04d}" for _ in range(args.repeat)]
    it = iter(names)
    tr_med, tr_max, trend = timed(lambda: reg.measurement_trend(next(it), days=7, now=now), args.repeat)
    n_rows = sum(p.measurements for p in trend.points)
    print(f"latest-per-deployment ({len(latest)} rows): median {lat_med:.1f} ms, max {lat_max:.1f} ms "
          f"[target <= {TARGET_MS:.0f} ms: {'ok' if lat_med <= TARGET_MS else 'MISSED'}]")
    print(f"7-day trend (1 deployment, {n_rows} rows -> {len(trend.points)} days): median {tr_med:.1f} ms, "
          f"max {tr_max:.1f} ms [target <= {TARGET_MS:.0f} ms: {'ok' if tr_med <= TARGET_MS else 'MISSED'}]")
    reg.close()
    if not args.keep and not args.db:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if lat_med <= TARGET_MS and tr_med <= TARGET_MS else 1


if __name__ == "__main__":
    raise SystemExit(main())
