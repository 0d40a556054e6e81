"""The realized-gain judgement (issue 40 item 1, adaptive verification) on traces recorded from the REAL
CPU engine (tests/assets/drift-traces/, provenance in each file), replayed through the real
MetricsSource, Monitor and detectors (tests/drift/recorded.py).

What is assumed, and where: adaptive verification needs a GPU (full CUDA graphs), so no recording has
it on. The monitor is told the launch enables it (``WatchTarget.adaptive_verification``), which is
what it would read from a recorded 0.33 launch; the counters it then judges (``num_accepted_tokens``,
``generation_tokens``) are the ones vLLM 0.33.0's scheduler fills the same way with or without
trimming (read from ``v1/core/sched/scheduler.py``, not run): that reading is the assumption, and
every finding carries it. The varying drafted length is real: ngram-schedule-load.json's γ schedule
moved it from ≈ 2.97 to ≈ 1.09 tokens per step with the load.
"""

from __future__ import annotations

import pytest

from specops.drift.detectors import Baseline
from specops.drift.gain import GAIN_ASSUMPTION
from specops.drift.watch import WatchTarget

from .recorded import load, observations, run_monitor

SCHEDULE = [(1, 1, 3), (2, 4, 1)]
DRIFT = {"ACCEPTANCE_DROP", "ACCEPTANCE_BELOW_FLOOR", "BELOW_BREAK_EVEN", "WORKLOAD_DRIFT", "DRIFT_CAUSE_UNKNOWN",
         "ACCEPTANCE_COLLAPSE", "GAIN_DROP"}


def _totals(trace, scrape) -> tuple[float, float]:
    """(accepted, generated) cumulative, straight from the file."""
    def tot(name):
        return sum(v for k, v in zip(trace["series"], scrape["values"], strict=True)
                   if k.split("{", 1)[0] == name and v is not None)

    return tot("vllm:spec_decode_num_accepted_tokens_total"), tot("vllm:generation_tokens_total")


def _share(trace, phase: str) -> float:
    ok = [s for s in trace["scrapes"] if s["ok"] and s["phase"] == phase]
    (a0, g0), (a1, g1) = _totals(trace, ok[0]), _totals(trace, ok[-1])
    return (a1 - a0) / (g1 - g0)


def test_a_budget_that_moves_with_the_load_is_no_gain_drop():
    """Adaptive verification on, the drafted length moving 2.97 ↔ 1.09 with the load: the draft share of
    the output moves less than the threshold, τ (3.14 ↔ 1.84) is not judged, and nothing is raised."""
    trace = load("ngram-schedule-load.json")
    assert 0.4 < _share(trace, "high-1") / _share(trace, "low-1") < 0.8  # the recording: a budget change
    first = [s for s in trace["scrapes"] if s["phase"] in ("low-1", "high-1")]
    base = Baseline.from_observations(observations(trace, first))
    assert base.labels[""].share_mean is not None
    target = WatchTarget(name="tiny", gamma=3, schedule=SCHEDULE, method="ngram", baseline=base,
                         adaptive_verification=True)
    steps = run_monitor(trace, target, scrapes=[s for s in trace["scrapes"] if s["phase"] in ("low-2", "high-2")])
    false = [(s.phase, s.codes) for s in steps if DRIFT & set(s.codes)]
    assert not false, false
    assert {s.phase for s in steps} == {"low-2", "high-2"}


def test_a_draft_that_stopped_working_is_a_gain_drop_within_three_windows():
    """The same assumption on draft-model-swap.json: after the untrained draft is swapped in, the draft
    share falls to 0 and GAIN_DROP is raised by the third window, carrying the assumption."""
    trace = load("draft-model-swap.json")
    steady = [s for s in trace["scrapes"] if s["phase"] == "steady"]
    base = Baseline.from_observations(observations(trace, steady))
    target = WatchTarget(name="tiny", gamma=3, method="draft_model", draft_method="draft_model", kv_connector=False,
                         baseline=base, adaptive_verification=True)
    steps = run_monitor(trace, target)
    assert not any("GAIN_DROP" in s.codes for s in steps if s.phase == "steady")
    stale = [s for s in steps if s.phase == "stale" and s.report.outcome == "ok"]
    hit = [i for i, s in enumerate(stale) if "GAIN_DROP" in s.codes]
    assert hit and hit[0] <= 2, [s.codes for s in stale]
    f = next(f for f in stale[hit[0]].report.findings if f.code == "GAIN_DROP")
    assert f.evidence["basis"] == "realized_gain" and f.evidence["assumption"] == GAIN_ASSUMPTION
    assert f.evidence["draft_share"] < 0.05 < f.evidence["baseline_draft_share"]
    assert GAIN_ASSUMPTION in f.message
    # never judged as an acceptance drop on this basis
    assert not any("ACCEPTANCE_DROP" in s.codes for s in steps)


def test_without_a_baseline_share_the_gain_is_not_evaluated_and_not_passed():
    trace = load("draft-model-swap.json")
    steady = [s for s in trace["scrapes"] if s["phase"] == "steady"]
    base = Baseline.from_observations(observations(trace, steady))
    old = base.model_copy(update={"labels": {k: v.model_copy(update={"share_mean": None, "share_std": None})
                                             for k, v in base.labels.items()}})
    from specops.drift.detectors import DetectionConfig
    from specops.drift.gamma import GammaPolicy
    from specops.drift.watch import DeploymentWatch

    watch = DeploymentWatch(WatchTarget(name="tiny", gamma=3, baseline=old, adaptive_verification=True),
                            DetectionConfig(), GammaPolicy(mode="off"), None)
    for o in observations(trace, [s for s in trace["scrapes"] if s["phase"] == "stale"]):
        if getattr(o, "total", None) is not None:
            findings, _ = watch.update(o)
            assert "GAIN_DROP" not in {f.code for f in findings}
    assert watch.gain.last["verdict"] == "could not evaluate", watch.gain.last
    assert "record it again" in watch.gain.last["why"]


@pytest.mark.parametrize("phase", ["low-1", "high-1"])
def test_the_share_the_monitor_reads_is_the_recordings(phase):
    trace = load("ngram-schedule-load.json")
    scrapes = [s for s in trace["scrapes"] if s["phase"] == phase]
    obs = observations(trace, scrapes)[1:]  # the windows between the phase's first and last scrape
    assert all(getattr(o, "total", None) is not None for o in obs)
    got = sum(o.total.accepted for o in obs) / sum(o.generated for o in obs)
    assert got == pytest.approx(_share(trace, phase), rel=1e-9)
