"""The metrics caveats of vLLM's counters (shared/reference 'Corrections and additions'): τ is per
drafted step, and per-position rates are lower bounds when drafts are shorter than K. Real counter
arithmetic on hand-written window counts; nothing faked."""

from __future__ import annotations

from datetime import datetime, timezone

from specops.metrics.derive import fill_rates, per_position_caveat
from specops.metrics.types import Measurement

T0, T1 = datetime(2026, 1, 1, tzinfo=timezone.utc), datetime(2026, 1, 1, 0, 1, tzinfo=timezone.utc)


def _m(drafts, draft_tokens, accepted, per_pos):
    return fill_rates(Measurement(deployment="d", source="metrics", window_start=T0, window_end=T1, speculation=True,
                                  num_drafts=drafts, num_draft_tokens=draft_tokens, num_accepted_tokens=accepted,
                                  num_speculative_tokens=len(per_pos), accepted_per_position=per_pos))


def test_full_length_drafts_carry_no_caveat():
    m = _m(100, 300, 150, [70, 50, 30])
    assert not m.short_drafts and not any("lower bound" in n for n in m.notes)
    assert m.per_position_rate == [0.7, 0.5, 0.3]


def test_short_drafts_flag_per_position_rates_and_alpha_as_lower_bounds():
    # an n-gram window: 100 drafted steps, but only 180 tokens drafted at K=3 (many 1- and 2-token drafts)
    m = _m(100, 180, 90, [60, 20, 10])
    assert m.short_drafts
    note = next(n for n in m.notes if "lower bound" in n)
    assert "drafts averaged 1.80 tokens of K=3" in note and "α solved at K" in note
    assert m.mean_acceptance_length == 1.9  # per drafted step: steps that drafted nothing are not in it


def test_prompt_lookup_methods_are_flagged_even_when_this_window_drafted_full_length():
    assert per_position_caveat(100, 300, 3, "suffix").startswith("method suffix drafts from the prompt")
    assert per_position_caveat(100, 300, 3, "ngram") and per_position_caveat(100, 300, 3, "ngram_gpu")
    assert per_position_caveat(100, 300, 3, "eagle3") is None
    assert per_position_caveat(0, 0, 3) is None  # no drafts: nothing to say (the window is empty)
