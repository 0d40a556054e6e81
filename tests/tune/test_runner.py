"""The runner, resume, report and calibration storage with injected fakes (tests/tune/fakes.py):
a deployer that starts instantly or fails for a nonexistent draft, a measurer generating consistent
counters and timings. The real engine path is tests/tune/test_engine_tune.py."""

from __future__ import annotations

import json

import pytest

from specops.errors import MeasurementError, NotFoundError
from specops.tune.api import TuneOptions, tune
from specops.tune.calibration import load_calibration, newest_calibration, predict_with, to_planner
from specops.tune.plan import GridOptions, plan_grid
from specops.tune.report import figure
from specops.tune.runner import run_grid
from specops.tune.store import PointStore
from specops.tune.types import EngineConfig
from tests.tune.fakes import FakeDeployer, FakeMeasurer


def options(**kw) -> TuneOptions:
    base = dict(model="/models/tiny", draft="/d", methods=["ngram", "draft_model"], gammas=[1, 2, 3],
                concurrency=[1, 4], passes=2, name="fake-cal")
    base.update(kw)
    return TuneOptions(**base)


def test_a_configuration_that_fails_to_start_is_recorded_failed_and_the_grid_continues():
    dep, meas = FakeDeployer(fail_draft="/nonexistent/draft"), FakeMeasurer()
    result = tune(options(draft="/nonexistent/draft", passes=2), deployer=dep, measurer=meas)
    failed = [r for r in result.outcome.results if r.status == "failed"]
    assert failed and all(r.point.config.method == "draft_model" for r in failed)
    assert all(r.error.startswith("engine failed to start") and "does not exist" in r.error for r in failed)
    # every draft_model γ failed once (pass 1) and was not retried in pass 2
    assert len({r.point.config.key for r in failed}) == 3 and len(failed) == 3 * 2
    assert "ngram-g3" in dep.started and dep.started.count("none") == 2
    assert result.report.failed == 3 * 2 and result.report.measured == 4 * 2


def test_a_resumed_run_measures_only_points_not_yet_stored():
    dep, meas = FakeDeployer(), FakeMeasurer()
    first = tune(options(passes=1), deployer=dep, measurer=meas, fit=False)
    n_first = len(meas.calls)
    # lose the last two points, as if the run had been killed mid-way
    store = PointStore(first.run_id)
    lines = store.points_path.read_text().splitlines()
    store.points_path.write_text("\n".join(lines[:-2]) + "\n" + lines[-2][:20])  # + a torn line
    kept = {r.point.key for r in store.load()}
    meas2 = FakeMeasurer()
    again = tune(resume=first.run_id, deployer=FakeDeployer(), measurer=meas2)
    assert len(meas2.calls) == 2 and n_first == len(kept) + 2
    assert again.outcome.reused == len(kept)
    assert {r.point.key for r in again.outcome.results} == {r.point.key for r in first.outcome.results}
    assert again.report is not None and again.calibration.samples == n_first


def test_resuming_an_unknown_run_says_which_runs_exist():
    first = tune(options(passes=1, methods=["ngram"], gammas=[2]), deployer=FakeDeployer(), measurer=FakeMeasurer(),
                 fit=False)
    with pytest.raises(NotFoundError, match="no tune run"):
        tune(resume=first.run_id + "x", deployer=FakeDeployer(), measurer=FakeMeasurer())


def test_a_failed_measurement_fails_one_point_and_the_session_goes_on():
    class Flaky(FakeMeasurer):
        def __call__(self, handle, concurrency):
            if concurrency == 4 and handle.method == "ngram":
                raise MeasurementError("cannot reach the engine", "check it")
            return super().__call__(handle, concurrency)

    result = tune(options(methods=["ngram"], gammas=[2], passes=1), deployer=FakeDeployer(), measurer=Flaky())
    by_key = {r.point.key: r for r in result.outcome.results}
    assert by_key["ngram-g2@c4#r0"].status == "failed" and "cannot reach" in by_key["ngram-g2@c4#r0"].error
    assert by_key["ngram-g2@c1#r0"].status == "ok"


def test_the_budget_stops_before_a_session_that_would_not_fit():
    clock = {"t": 0.0}

    class SlowDeployer(FakeDeployer):
        def start(self, config):
            clock["t"] += 60
            return super().start(config)

    class SlowMeasurer(FakeMeasurer):
        def __call__(self, handle, concurrency):
            clock["t"] += 10
            return super().__call__(handle, concurrency)

    sessions = plan_grid(GridOptions(methods=["ngram"], gammas=[1, 2, 3], concurrency=[1, 4], passes=1))
    out = run_grid(sessions, SlowDeployer(), SlowMeasurer(), PointStore("budget-run"), budget_s=170,
                   clock=lambda: clock["t"])
    assert [r.point.config.key for r in out.results][::2] == ["none", "ngram-g2"]  # 2 sessions × 80 s fit
    assert out.stopped_by_budget and "budget" in out.notes[0]


def test_every_figure_is_a_median_with_its_spread_over_repeats():
    result = tune(options(methods=["ngram"], gammas=[2], passes=3), deployer=FakeDeployer(),
                  measurer=FakeMeasurer(noise=0.2, seed=11))
    row = next(r for r in result.report.rows if r.config.key == "ngram-g2" and r.concurrency == 1)
    values = sorted(r.sample.tokens_per_s for r in result.outcome.results
                    if r.point.config.key == "ngram-g2" and r.point.concurrency == 1)
    assert row.tokens_per_s.n == 3 and row.tokens_per_s.median == values[1]
    assert (row.tokens_per_s.low, row.tokens_per_s.high) == (values[0], values[2])
    f = figure([1.0, 2.0, 3.0, 4.0, 100.0])
    assert f.spread == "iqr" and f.median == 3.0 and (f.low, f.high) == (2.0, 4.0)


def test_the_calibration_is_stored_by_name_with_its_data_and_predicts():
    result = tune(options(), deployer=FakeDeployer(), measurer=FakeMeasurer())
    assert result.calibration_path.name == "fake-cal.json"
    cal = load_calibration("fake-cal")
    assert cal.samples == len(cal.points) == result.report.measured * 2
    assert newest_calibration("/models/tiny").name == "fake-cal"
    p = predict_with(cal, EngineConfig(method="draft_model", gamma=6, draft="/d"), 4)
    assert p.tokens_per_s > 0 and p.tau > 1
    profile, measured = to_planner(cal)
    assert profile.step_overhead_ms == pytest.approx(cal.coefficients.overhead_ms + cal.coefficients.per_seq_ms)
    assert {m.method for m in measured} == {"ngram", "draft_model"}
    doc = json.loads(result.calibration_path.read_text())
    assert doc["coefficients"]["overhead_ms"] == pytest.approx(20.0, rel=1e-6)


def test_the_report_compares_every_point_and_names_the_picks():
    result = tune(options(), deployer=FakeDeployer(), measurer=FakeMeasurer())
    rep = result.report
    assert all(r.error_pct is not None and abs(r.error_pct) < 1e-6 for r in rep.rows)
    assert rep.median_leave_out_error_pct is not None and rep.median_leave_out_error_pct < 1.0
    assert {p.concurrency for p in rep.model_picks} == {1, 4} == {p.concurrency for p in rep.best_measured}
    assert all(v.endswith("ok") for v in rep.pick_within)


def test_loading_a_missing_calibration_suggests_a_known_name():
    tune(options(methods=["ngram"], gammas=[2], passes=1), deployer=FakeDeployer(), measurer=FakeMeasurer())
    with pytest.raises(NotFoundError, match='Did you mean "fake-cal"'):
        load_calibration("fake-cl")
