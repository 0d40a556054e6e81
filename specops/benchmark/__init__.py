"""The A/B benchmark (`specops bench`): speculation on vs off, measured from both ends.

See docs/measure.md. Entry point: :func:`run_bench` (async) / :func:`bench` (sync).
"""

from __future__ import annotations

import asyncio

from specops.benchmark.types import BenchOptions, BenchResult, BenchTarget

__all__ = ["BenchOptions", "BenchResult", "BenchTarget", "bench"]


def bench(opts: BenchOptions, progress=None) -> BenchResult:
    from specops.benchmark.runner import run_bench

    return asyncio.run(run_bench(opts, progress))
