"""Detector behaviour on traces from the seeded generator (specops.drift.tracegen).

What is faked: the engine. The generator draws acceptance from the same acceptance model the monitor
inverts, so these tests prove the detectors' logic on that model's noise, not on a real engine's. On
real recordings (tests/drift/test_recorded_long.py, 20 steady minutes of mixed traffic from the CPU
engine) each 10 s window's acceptance spreads far wider (σ ≈ 0.10): there no false alarm was seen in
144 windows, a 25-point drop is flagged within 90 s, and a 15-point drop is not flagged at all — the
"15 points within five minutes" claim below holds only on the generator's noise.

Numbers measured over more seeds are printed by the slow test at the end (pytest -s -m slow)."""

import statistics

import pytest

from specops.drift.detectors import ChangeDetector, DetectionConfig, FloorDetector, LabelBaseline
from specops.drift.tracegen import DAY, TraceConfig

from .scenarios import alarm_episodes, baseline, detection_delay

SEEDS = range(6)


@pytest.fixture(scope="module")
def base():
    return baseline()


def test_a_fifteen_point_drop_is_flagged_within_five_minutes(base):
    delays = [detection_delay(seed, base) for seed in SEEDS]
    assert all(seen is not None and seen <= 300 for _, seen in delays), delays


def test_twenty_four_stable_hours_raise_no_alarm(base):
    # diurnal load, AR(1) noise, 2 counter resets and 3 scrape gaps a day (defaults)
    alarms = {seed: alarm_episodes(TraceConfig(seed=seed), DAY, base) for seed in SEEDS}
    assert all(not a for a in alarms.values()), alarms


def test_a_floor_is_flagged_only_after_it_is_sustained():
    det = FloorDetector(DetectionConfig(floor_windows=3))
    states = [det.update(t, a, 0.6).active for t, a in enumerate([0.5, 0.5, 0.7, 0.5, 0.5, 0.5])]
    assert states == [False, False, False, False, False, True]


def test_a_floor_alarm_clears_only_above_floor_plus_margin():
    det = FloorDetector(DetectionConfig(floor_windows=2, floor_margin=0.05))
    for t in range(2):
        det.update(t, 0.5, 0.6)
    assert det.state.active
    for t in range(2, 6):
        det.update(t, 0.62, 0.6)  # above the floor but inside the margin
    assert det.state.active
    det.update(6, 0.7, 0.6)
    assert det.update(7, 0.7, 0.6).cleared_now


def test_the_change_detector_holds_its_alarm_until_acceptance_is_back_for_several_windows():
    cfg = DetectionConfig(clear_windows=3)
    det = ChangeDetector(cfg, LabelBaseline(mean=0.75, std=0.02, windows=100))
    for t in range(3):
        det.update(t, 0.6, 0.0)
    assert det.state.active
    det.update(3, 0.75, 0.0)
    det.update(4, 0.75, 0.0)
    assert det.state.active
    assert det.update(5, 0.75, 0.0).cleared_now


@pytest.mark.slow
def test_detection_delay_and_false_alarms_over_twenty_seeds(base):
    delays = [detection_delay(seed, base) for seed in range(20)]
    from_drop = [d for d, _ in delays]
    from_seen = [s for _, s in delays]
    false_alarms = sum(len(alarm_episodes(TraceConfig(seed=s), DAY, base)) for s in range(20))
    print(f"\n15-point drop at a random time of day, 20 seeds: delay from the drop median "
          f"{statistics.median(from_drop):.0f}s max {max(from_drop):.0f}s; from the first visible window median "
          f"{statistics.median(from_seen):.0f}s max {max(from_seen):.0f}s; "
          f"false alarms over 20 stable days: {false_alarms}")
    assert max(from_seen) <= 300
    assert false_alarms == 0
