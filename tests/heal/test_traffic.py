"""Traffic for the canary test: replicas from the spec's share, the spec's ``canary:`` block validated,
and window samples paired in time. Pure functions and the real spec loader; nothing is faked."""

from __future__ import annotations

import pytest

from specops.engines.spec import CanaryBlock
from specops.errors import InputError
from specops.heal.traffic import canary_replicas, sequential_params, window_samples


@pytest.mark.parametrize(("stable", "share", "want"), [(1, 0.1, 1), (9, 0.1, 1), (18, 0.1, 2), (4, 0.5, 4),
                                                        (1, 0.9, 9), (3, 0.25, 1)])
def test_the_canary_gets_the_replica_count_whose_share_is_closest(stable, share, want):
    assert canary_replicas(stable, share) == want
    others = [n for n in range(1, 50) if n != want]
    assert all(abs(n / (n + stable) - share) >= abs(want / (want + stable) - share) for n in others)


def test_the_spec_block_becomes_the_sequential_test():
    t = sequential_params(CanaryBlock(share=0.2, alpha=0.01, min_gain=0.05, budget=96))
    assert (t.alpha, t.min_gain, t.budget) == (0.01, 0.05, 96)


def test_windows_are_paired_in_time_and_an_empty_window_is_no_sample():
    assert window_samples([(10, 20), (0, 0)], [(15, 20), (5, 10)]) == [0.25, None]
    with pytest.raises(ValueError, match="same windows"):
        window_samples([(1, 2)], [])


@pytest.mark.parametrize(("block", "word"), [("{share: 1.5}", "share"), ("{alpha: 0.9}", "alpha"),
                                             ("{budget: 1}", "budget"), ("{shares: 0.1}", "shares")])
def test_a_bad_canary_block_is_one_clear_error(tmp_path, block, word):
    from specops.engines.spec import load_spec

    path = tmp_path / "c.yaml"
    path.write_text("name: c\nplatform: kubernetes\ntarget: {model: org/t, revision: " + "a" * 40 + "}\n"
                    f"speculative: {{method: ngram, num_speculative_tokens: 3}}\ncanary: {block}\n")
    with pytest.raises(InputError, match=word):
        load_spec(path)
