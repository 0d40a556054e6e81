"""The TPOT speedup's interval from its requests (specops/benchmark/stats.py): a percentile bootstrap of the
ratio of medians. The ground truth here is the data's construction (two clearly separated TPOT
populations, or overlapping ones), not the bootstrap's own arithmetic."""

from __future__ import annotations

import random

from specops.benchmark.stats import TOO_FEW, bootstrap_ratio_interval, median, speedup_verdict


def _tpots(centre: float, spread: float, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [centre * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def test_separated_runs_give_an_interval_around_the_speedup_entirely_above_one():
    base, spec = _tpots(0.020, 0.05, 32, 1), _tpots(0.010, 0.05, 32, 2)  # speculation halves TPOT
    low, high = bootstrap_ratio_interval(base, spec)
    point = median(base) / median(spec)
    assert low <= point <= high and 1.8 < low and high < 2.2
    assert speedup_verdict((low, high)) == "faster"
    assert speedup_verdict(bootstrap_ratio_interval(spec, base)) == "slower"


def test_four_noisy_requests_cannot_tell_a_small_speedup_from_none():
    base = [0.0080, 0.0102, 0.0106, 0.0140]  # 4 requests each, overlapping: medians 10.4 vs 10.0 ms, 1.04x
    spec = [0.0070, 0.0098, 0.0102, 0.0135]
    assert round(median(base) / median(spec), 2) == 1.04
    interval = bootstrap_ratio_interval(base, spec)
    assert interval is not None and interval[0] < 1 < interval[1]
    assert speedup_verdict(interval) == TOO_FEW == "too few requests to tell"


def test_fewer_than_three_requests_give_no_interval_and_no_verdict_but_too_few():
    assert bootstrap_ratio_interval([0.02, 0.021], [0.01, 0.011, 0.012]) is None
    assert speedup_verdict(None) == TOO_FEW


def test_the_interval_is_seeded_and_the_same_data_gives_the_same_interval():
    base, spec = _tpots(0.02, 0.3, 8, 5), _tpots(0.012, 0.3, 8, 6)
    assert bootstrap_ratio_interval(base, spec, seed=1) == bootstrap_ratio_interval(base, spec, seed=1)


def _run(role: str, tpots: list[float]):
    from datetime import datetime, timezone

    from specops.benchmark.client import RequestResult
    from specops.benchmark.stats import percentile
    from specops.benchmark.types import CrossCheck, RunResult

    now = datetime.now(timezone.utc)
    reqs = [RequestResult(index=i, ok=True, completion_tokens=32, tpot_s=t) for i, t in enumerate(tpots)]
    return RunResult(role=role, endpoint="http://e", served_name="m", concurrency=1, requests=len(tpots),
                     ok=len(tpots), failed=0, started_at=now, ended_at=now, duration_s=1.0, output_tokens=32,
                     tpot_p50_s=percentile(tpots, 50), request_results=reqs,
                     crosscheck=CrossCheck(client_usage_tokens=32, client_chunk_tokens=32, agree=True))


def test_bench_comparisons_carry_the_interval_and_say_too_few_requests_when_it_spans_one():
    from specops.benchmark.runner import compare

    (few,) = compare([_run("spec", [0.0070, 0.0098, 0.0102, 0.0135]), _run("baseline", [0.0080, 0.0102, 0.0106, 0.0140])])
    assert round(few.tpot_speedup, 2) == 1.04 and few.tpot_speedup_low < 1 < few.tpot_speedup_high
    assert few.speedup_verdict == "too few requests to tell"
    (many,) = compare([_run("spec", _tpots(0.010, 0.05, 32, 2)), _run("baseline", _tpots(0.020, 0.05, 32, 1))])
    assert many.speedup_verdict == "faster" and many.tpot_speedup_low > 1.8
