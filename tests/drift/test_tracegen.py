from specops.drift.observe import Observation, Unseen
from specops.drift.tracegen import DAY, TraceConfig, generate
from specops.speculation import alpha_from_rate, rate_of_alpha


def test_the_same_seed_gives_the_same_trace():
    a = generate(TraceConfig(seed=3), 3600)
    b = generate(TraceConfig(seed=3), 3600)
    c = generate(TraceConfig(seed=4), 3600)
    assert a == b
    assert a != c


def test_a_day_has_counter_resets_gaps_and_diurnal_load():
    trace = generate(TraceConfig(seed=1, resets_per_day=4, gaps_per_day=4), DAY)
    obs = [o for o in trace if isinstance(o, Observation)]
    unseen = [o for o in trace if isinstance(o, Unseen)]
    assert any(o.counter_reset for o in obs)
    assert any("gap" in u.reason for u in unseen)
    loads = [o.total.drafts for o in obs]
    assert max(loads) > 4 * min(loads)  # peak vs trough
    # per-position counters are cumulative: p0 >= p1 >= p2
    w = obs[100].total
    assert w.accepted_per_pos[0] >= w.accepted_per_pos[1] >= w.accepted_per_pos[2]


def test_a_fifteen_point_drop_lowers_the_acceptance_rate_by_fifteen_points():
    base = 0.75
    dropped = alpha_from_rate(rate_of_alpha(base, 3) - 0.15, 3)
    assert abs(rate_of_alpha(base, 3) - rate_of_alpha(dropped, 3) - 0.15) < 1e-6
    trace = generate(TraceConfig(seed=2, noise_std=0, drop_at_s=1800, resets_per_day=0, gaps_per_day=0), 3600)
    obs = [o for o in trace if isinstance(o, Observation)]
    before = [o.total.acceptance_rate for o in obs[5:25]]
    after = [o.total.acceptance_rate for o in obs[-20:]]
    diff = sum(before) / len(before) - sum(after) / len(after)
    assert 0.13 < diff < 0.17


def test_engine_state_decay_recovers_on_restart():
    from specops.drift.tracegen import SimDeployment

    sim = SimDeployment("d", TraceConfig(seed=0, noise_std=0, decay_per_hour=0.05, initial_uptime_s=0))
    sim.advance(4 * 3600)
    decayed = sim.alpha("code", sim.t)
    sim.restart()
    assert sim.alpha("code", sim.t) - decayed > 0.15
