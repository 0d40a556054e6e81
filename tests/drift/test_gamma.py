from specops.drift.gamma import AcceptanceProfile, GammaController, GammaPolicy, reference_predictor, single
from specops.drift.observe import Observation
from specops.drift.tracegen import DAY, TraceConfig, generate

PRED = reference_predictor()


def _changes(controller, cfg, seconds):
    return [p for o in generate(cfg, seconds) if isinstance(o, Observation) and (p := controller.step(o))]


def _start(kind):
    best = GammaController("d", GammaPolicy(kind=kind), PRED, single(3)).best(AcceptanceProfile(0.75))
    return best


def test_adaptive_gamma_does_not_flap_over_a_noisy_day():
    for seed in range(3):
        for kind in ("schedule", "gamma"):
            c = GammaController("d", GammaPolicy(kind=kind), PRED, _start(kind))
            assert _changes(c, TraceConfig(seed=seed), DAY) == [], (seed, kind)


def test_adaptive_gamma_moves_down_when_acceptance_drops_and_says_why():
    c = GammaController("d", GammaPolicy(kind="gamma"), PRED, _start("gamma"))
    before = c.current[0][2]
    props = _changes(c, TraceConfig(seed=1, drop_at_s=4 * 3600, drop_points=0.2), 10 * 3600)
    assert len(props) == 1
    p = props[0]
    assert p.proposed[0][2] < before
    assert p.score_proposed >= p.score_current * 1.05
    assert p.alpha < 0.7 and p.speedup_by_gamma and p.conditional


def test_a_new_choice_waits_for_the_minimum_dwell_time():
    pol = GammaPolicy(kind="gamma", confirm_evaluations=1, evaluate_every_windows=1, min_dwell_minutes=120, halflife_minutes=1, min_gain=0.0)
    c = GammaController("d", pol, PRED, single(1))
    props = _changes(c, TraceConfig(seed=2, drop_at_s=1800, drop_points=0.3, resets_per_day=0, gaps_per_day=0),
                     3 * 3600)
    assert len(props) >= 1
    assert all(b.at - a.at >= 120 * 60 for a, b in zip(props, props[1:], strict=False))


def test_the_schedule_stops_speculating_at_high_batch():
    c = GammaController("d", GammaPolicy(kind="schedule"), PRED, single(3))
    sched = c.best(AcceptanceProfile(0.6))
    assert sched[0][0] == 1 and sched[-1][1] == 1024
    assert sched[-1][2] == 0 and sched[0][2] > 0
