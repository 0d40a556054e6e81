"""Traffic for the canary test on Kubernetes: the canary's replicas from the spec's ``canary.share``, and
the time-paired window samples.

A canary Deployment carries the stable's app label, so the stable's Service sends it a share of the
requests in proportion to ready replicas (kube-proxy picks endpoints uniformly). ``canary_replicas``
turns the spec's share into the replica count whose share is closest (at least 1). One sample of the
test is one window (``canary.window_s``) seen by *both* arms: the canary's and the stable's
accepted/drafted tokens over the same interval, so a change in the traffic (a new mix of prompts,
sampling temperature, load) reaches both arms at once and cancels in the difference
(bench/aa_bench.py shows what happens when windows are not paired in time).
"""

from __future__ import annotations

from specops.heal.sequential import SequentialTest, rate_difference


def canary_replicas(stable: int, share: float) -> int:
    """Canary replicas next to ``stable`` replicas whose traffic share is closest to ``share`` (>= 1);
    what `specops deploy --canary-of` applies (:meth:`specops.engines.spec.CanaryBlock.replicas_next_to`)."""
    from specops.engines.spec import CanaryBlock

    return CanaryBlock(share=share).replicas_next_to(stable)


def sequential_params(block) -> SequentialTest:
    """The sequential test of a spec's ``canary:`` block (:class:`specops.engines.spec.CanaryBlock`)."""
    return SequentialTest(alpha=block.alpha, min_gain=block.min_gain, budget=block.budget)


def window_samples(stable: list[tuple[float, float]], canary: list[tuple[float, float]]) -> list[float | None]:
    """One sample per window from each arm's (accepted, drafted) token deltas over the *same* windows;
    None where an arm drafted nothing (no sample)."""
    if len(stable) != len(canary):
        raise ValueError("the two arms must be measured over the same windows")
    return [rate_difference(c, s) for s, c in zip(stable, canary, strict=True)]
