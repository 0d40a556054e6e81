"""The decision tree is validated on load (playbooks/decision-tree.yaml, copied and broken in real files):
a misspelled method or a pipeline step out of order is one clear error naming the file, not a KeyError
later in recommend."""

from __future__ import annotations

import shutil

import pytest

from specops.errors import InputError
from specops.planner.tree import CHECK_ORDER, load_tree
from specops.playbooks import playbook_path


def _copy(tmp_path, edit) -> str:
    path = tmp_path / "decision-tree.yaml"
    shutil.copy(playbook_path("decision-tree.yaml"), path)
    text = path.read_text()
    edited = edit(text)
    assert edited != text, "the edit did not apply: the shipped tree changed, update the test"
    path.write_text(edited)
    return str(path)


def test_the_shipped_tree_loads_with_its_steps_in_order():
    tree = load_tree()
    assert [r.check for r in tree.rules if r.check] == list(CHECK_ORDER)


def test_a_misspelled_method_is_refused_with_a_suggestion(tmp_path):
    path = _copy(tmp_path, lambda t: t.replace("eagle3", "eagel3", 1))
    with pytest.raises(InputError) as e:
        load_tree(path)
    assert 'names method "eagel3"' in e.value.one_line() and 'Did you mean "eagle3"' in e.value.one_line()
    assert "decision-tree.yaml" in e.value.one_line()


def test_pipeline_steps_out_of_order_are_refused(tmp_path):
    path = _copy(tmp_path, lambda t: t.replace("check: kv_cache", "check: TMP").replace(
        "check: drafts", "check: kv_cache").replace("check: TMP", "check: drafts"))
    with pytest.raises(InputError) as e:
        load_tree(path)
    assert "must be ['vllm_capabilities', 'drafts', 'kv_cache', 'cost_model', 'evidence']" in e.value.one_line()


def test_a_missing_step_is_refused(tmp_path):
    path = _copy(tmp_path, lambda t: t.replace("    check: evidence\n", ""))
    with pytest.raises(InputError):
        load_tree(path)
