"""The grid planner: order, interleaving, loads inside one engine life, budget, parsing."""

from __future__ import annotations

import pytest

from specops.errors import InputError
from specops.tune.plan import GridOptions, gamma_order, parse_gammas, parse_methods, plan_grid


def test_gamma_order_puts_the_middle_first_then_extremes_then_bisects():
    assert gamma_order([1, 2, 3, 4, 6]) == [3, 1, 6, 2, 4]
    assert gamma_order(list(range(1, 9))) == [4, 1, 8, 6, 2, 3, 5, 7]
    assert gamma_order([2]) == [2]


def test_baseline_then_each_method_at_the_middle_gamma_come_first():
    sessions = plan_grid(GridOptions(methods=["none", "ngram", "draft_model"], gammas=[1, 2, 3, 4, 6],
                                     concurrency=[1, 4], draft="/d", passes=1))
    keys = [s.config.key for s in sessions]
    assert keys[:3] == ["none", "ngram-g3", "draft_model-g3"]
    assert keys[3:7] == ["ngram-g1", "draft_model-g1", "ngram-g6", "draft_model-g6"]
    assert len(keys) == len(set(keys)) == 11


def test_load_changes_stay_inside_one_engine_life_and_loads_interleave():
    sessions = plan_grid(GridOptions(methods=["ngram"], gammas=[2], concurrency=[4, 1], passes=1, inner_repeats=2))
    assert [s.config.key for s in sessions] == ["none", "ngram-g2"]  # one session per configuration
    assert [(p.concurrency, p.repeat) for p in sessions[1].points] == [(1, 0), (4, 0), (1, 1), (4, 1)]


def test_repeat_passes_interleave_configurations_a_b_a_b_with_distinct_repeat_numbers():
    sessions = plan_grid(GridOptions(methods=["ngram"], gammas=[2], concurrency=[1], passes=3))
    assert [s.config.key for s in sessions] == ["none", "ngram-g2"] * 3
    keys = [p.key for s in sessions for p in s.points]
    assert len(keys) == len(set(keys))
    assert [s.points[0].repeat for s in sessions] == [0, 0, 1, 1, 2, 2]


def test_a_budget_keeps_the_most_informative_sessions():
    opts = GridOptions(methods=["ngram", "draft_model"], gammas=[1, 2, 3, 4, 6], concurrency=[1, 4], draft="/d",
                       passes=2, restart_s=60, run_s=10, budget_s=4 * 80 + 5)
    sessions = plan_grid(opts)
    assert [s.config.key for s in sessions] == ["none", "ngram-g3", "draft_model-g3", "ngram-g1"]


def test_a_draft_method_without_a_draft_is_refused():
    with pytest.raises(InputError, match="needs a draft"):
        plan_grid(GridOptions(methods=["draft_model"], gammas=[2], concurrency=[1]))


@pytest.mark.parametrize("text,expected", [("1-8", list(range(1, 9))), ("1,2,3,4,6", [1, 2, 3, 4, 6]),
                                           ("2-4,6", [2, 3, 4, 6]), ("3", [3])])
def test_gammas_parse_ranges_and_lists(text, expected):
    assert parse_gammas(text) == expected


@pytest.mark.parametrize("text", ["0-3", "a", "1-x", "17", ""])
def test_bad_gammas_are_refused_with_a_fix(text):
    with pytest.raises(InputError, match="--gammas"):
        parse_gammas(text)


def test_unknown_methods_get_a_did_you_mean():
    with pytest.raises(InputError, match='Did you mean "ngram"'):
        parse_methods("ngarm")
