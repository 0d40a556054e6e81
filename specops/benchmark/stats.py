"""Small statistics helpers (no numpy needed)."""

from __future__ import annotations

from collections.abc import Iterable


def percentile(values: Iterable[float | None], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation; None for no values (never invented)."""
    xs = sorted(v for v in values if v is not None)
    if not xs:
        return None
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median(values: Iterable[float]) -> float | None:
    return percentile(values, 50)


MIN_REQUESTS_FOR_INTERVAL = 3
"""Fewer successful requests than this on either engine: no interval (the speedup cannot be told)."""

TOO_FEW = "too few requests to tell"


def bootstrap_ratio_interval(numerator: list[float], denominator: list[float], *, level: float = 0.95,
                             resamples: int = 2000, seed: int = 0) -> tuple[float, float] | None:
    """Percentile-bootstrap interval of median(numerator) / median(denominator), resampling each side's
    values independently with replacement (``resamples`` times, seeded: the same data gives the same
    interval). None when either side has fewer than MIN_REQUESTS_FOR_INTERVAL values or a median is 0.

    For ``bench`` the sides are the per-request TPOTs of the baseline and the speculating engine, so the
    interval is that of the TPOT speedup reported (a ratio of medians), from the requests it was measured on.
    """
    import random

    num = [v for v in numerator if v is not None]
    den = [v for v in denominator if v is not None]
    if len(num) < MIN_REQUESTS_FOR_INTERVAL or len(den) < MIN_REQUESTS_FOR_INTERVAL:
        return None
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        a = median(rng.choices(num, k=len(num)))
        b = median(rng.choices(den, k=len(den)))
        if a is not None and b:
            ratios.append(a / b)
    if len(ratios) < resamples // 2:
        return None
    tail = (1 - level) / 2 * 100
    return percentile(ratios, tail), percentile(ratios, 100 - tail)


def speedup_verdict(interval: tuple[float, float] | None) -> str:
    """"faster" when the whole interval is above 1, "slower" when below, else TOO_FEW (it spans 1, or there
    is no interval): never read as a speedup."""
    if interval is None or interval[0] <= 1.0 <= interval[1]:
        return TOO_FEW
    return "faster" if interval[0] > 1.0 else "slower"
