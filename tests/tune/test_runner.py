"""The runner, resume, report and calibration storage with injected fakes (tests/tune/fakes.py):
a deployer that starts instantly or fails for a nonexistent draft, a measurer generating consistent
counters and timings. The real engine path is tests/tune/test_engine_tune.py."""

from __future__ import annotations

import json
import statistics

import pytest

from specops.api.tune import TuneOptions, tune
from specops.errors import InputError, MeasurementError, NotFoundError
from specops.registry import open_registry
from specops.tune.calibration import (
    list_calibrations,
    load_calibration,
    newest_calibration,
    predict_with,
    to_planner,
)
from specops.tune.plan import GridOptions, plan_grid
from specops.tune.report import figure, naive_leave_one_config_out
from specops.tune.runner import run_grid
from specops.tune.store import PointStore, list_runs
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


def test_an_interrupted_run_resumes_from_the_registry_without_re_measuring():
    class Interrupted(FakeMeasurer):
        def __call__(self, handle, concurrency):
            if len(self.calls) == 5:
                raise KeyboardInterrupt  # Ctrl-C in the middle of the sixth point
            return super().__call__(handle, concurrency)

    dep, meas = FakeDeployer(), Interrupted()
    with pytest.raises(KeyboardInterrupt):
        tune(options(passes=1), deployer=dep, measurer=meas)
    assert dep.running == 0  # the engine of the interrupted session was stopped
    (run,) = list_runs()
    stored = PointStore(run.run_id).load()
    assert run.points == len(stored) == 5 and len({r.point.key for r in stored}) == 5
    meas2 = FakeMeasurer()
    again = tune(resume=run.run_id, deployer=FakeDeployer(), measurer=meas2)
    assert again.outcome.reused == 5 and again.outcome.measured_now == len(meas2.calls)
    keys = [r.point.key for r in PointStore(run.run_id).load()]
    assert len(keys) == len(set(keys)) == 5 + len(meas2.calls)  # nothing measured twice
    assert again.report is not None and again.calibration.samples == len(keys)


def test_a_file_based_run_from_an_older_version_is_imported_and_resumed(specops_home):
    first = tune(options(passes=1, methods=["ngram"], gammas=[2]), deployer=FakeDeployer(), measurer=FakeMeasurer(),
                 fit=False)
    points = PointStore(first.run_id).load()
    legacy = specops_home / "tune" / "20250101-000000-abcd"
    legacy.mkdir(parents=True)
    (legacy / "run.json").write_text(json.dumps({"options": options(passes=1, methods=["ngram"], gammas=[2])
                                                 .model_dump(mode="json"), "hardware": "old box", "created": 1.7e9}))
    lines = [r.model_copy(update={"run_id": legacy.name}).model_dump_json() for r in points[:3]]
    (legacy / "points.jsonl").write_text("\n".join(lines) + "\n" + lines[-1][:25])  # + a torn last line
    meas = FakeMeasurer()
    again = tune(resume=legacy.name, deployer=FakeDeployer(), measurer=meas)
    assert again.outcome.reused == 3 and len(meas.calls) == len(points) - 3
    assert {r.run_id for r in list_runs()} == {first.run_id, legacy.name}
    assert PointStore(legacy.name).meta()["hardware"] == "old box"


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
    store = PointStore("budget-run")
    store.create({"options": {}})
    out = run_grid(sessions, SlowDeployer(), SlowMeasurer(), store, budget_s=170,
                   clock=lambda: clock["t"])
    assert [r.point.config.key for r in out.results][::2] == ["none", "ngram-g2"]  # 2 sessions × 80 s fit
    assert out.stopped_by_budget and "budget" in out.notes[0]


def test_every_figure_is_a_median_with_its_spread_over_repeats():
    result = tune(options(methods=["ngram"], gammas=[2], passes=3, max_passes=3), deployer=FakeDeployer(),
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
    assert result.calibration.ref == "fake-cal@1"
    cal = load_calibration("fake-cal")
    assert cal.samples == len(cal.points) == result.report.measured * 2
    assert newest_calibration("/models/tiny").name == "fake-cal"
    p = predict_with(cal, EngineConfig(method="draft_model", gamma=6, draft="/d"), 4)
    assert p.tokens_per_s > 0 and p.tau > 1
    profile, measured = to_planner(cal)
    assert profile.step_overhead_ms == pytest.approx(cal.coefficients.overhead_ms + cal.coefficients.per_seq_ms)
    assert {m.method for m in measured} == {"ngram", "draft_model"}
    row = open_registry().get_calibration("fake-cal")
    assert row.document["coefficients"] == result.calibration.coefficients.model_dump(mode="json")
    assert row.samples == cal.samples and row.run_id == result.run_id


def test_refitting_under_the_same_name_adds_a_revision_and_keeps_the_old_one():
    first = tune(options(methods=["ngram"], gammas=[2], passes=1), deployer=FakeDeployer(), measurer=FakeMeasurer())
    second = tune(options(methods=["ngram"], gammas=[2, 3], passes=1), deployer=FakeDeployer(),
                  measurer=FakeMeasurer())
    assert (first.calibration.ref, second.calibration.ref) == ("fake-cal@1", "fake-cal@2")
    assert load_calibration("fake-cal").run_id == second.run_id
    assert load_calibration("fake-cal@1").run_id == first.run_id
    assert [c.ref for c in list_calibrations()] == ["fake-cal@2"]


def test_a_calibration_file_from_an_older_version_is_imported(specops_home):
    result = tune(options(methods=["ngram"], gammas=[2], passes=1, name="old-cal"), deployer=FakeDeployer(),
                  measurer=FakeMeasurer())
    d = specops_home / "calibrations"
    d.mkdir()
    (d / "file-cal.json").write_text(result.calibration.model_copy(update={"name": "file-cal", "revision": None})
                                     .model_dump_json())
    (d / "notes.json").write_text("{}")  # not a calibration: left alone
    cal = load_calibration("file-cal")
    assert cal.ref == "file-cal@1" and cal.samples == result.calibration.samples
    assert {c.name for c in list_calibrations()} == {"old-cal", "file-cal"}


def test_the_report_compares_every_point_and_names_the_picks():
    result = tune(options(), deployer=FakeDeployer(), measurer=FakeMeasurer())
    rep = result.report
    # the fake's truth is not the fitter's form (tests/tune/fakes.py): the yardstick is the naive predictor
    # (the mean of the other configurations at the same concurrency), which the fit must beat
    naive = statistics.median(abs(h.error_pct) for h in naive_leave_one_config_out(result.calibration.points))
    assert all(r.error_pct is not None and abs(r.error_pct) < naive for r in rep.rows), naive
    assert rep.median_leave_out_error_pct is not None and rep.median_leave_out_error_pct < naive
    assert {p.concurrency for p in rep.model_picks} == {1, 4} == {p.concurrency for p in rep.best_measured}
    assert all(v.endswith("ok") for v in rep.pick_within)


def test_loading_a_missing_calibration_suggests_a_known_name():
    tune(options(methods=["ngram"], gammas=[2], passes=1), deployer=FakeDeployer(), measurer=FakeMeasurer())
    with pytest.raises(NotFoundError, match='Did you mean "fake-cal"'):
        load_calibration("fake-cl")


def test_refit_fits_the_stored_points_without_starting_an_engine():
    first = tune(options(passes=1), deployer=FakeDeployer(), measurer=FakeMeasurer())
    dep, meas = FakeDeployer(), FakeMeasurer()
    again = tune(resume=first.run_id, deployer=dep, measurer=meas, measure=False)
    assert dep.started == [] and meas.calls == []
    assert again.calibration.ref == "fake-cal@2" and again.calibration.samples == first.calibration.samples
    assert again.report.median_error_pct == pytest.approx(first.report.median_error_pct)


def test_refit_of_a_partial_run_says_what_was_never_measured():
    class Interrupted(FakeMeasurer):
        def __call__(self, handle, concurrency):
            if len(self.calls) == 6:
                raise KeyboardInterrupt
            return super().__call__(handle, concurrency)

    with pytest.raises(KeyboardInterrupt):
        tune(options(passes=1), deployer=FakeDeployer(), measurer=Interrupted())
    (run,) = list_runs()
    again = tune(resume=run.run_id, measure=False)
    assert again.outcome.measured_now == 0 and again.calibration.samples == 6
    assert any("never measured" in n for n in again.report.notes)
    with pytest.raises(InputError, match="--refit works on a stored run"):
        tune(options(), measure=False)


def test_noisy_configurations_get_extra_interleaved_passes_until_the_spread_is_known():
    class NoisyNgram(FakeMeasurer):
        """Only ngram-g2 at c=4 is noisy (±40%); everything else is exact."""

        def __call__(self, handle, concurrency):
            s = super().__call__(handle, concurrency)
            if handle.key == "ngram-g2" and concurrency == 4:
                n = sum(1 for c in self.calls if c == ("ngram-g2", 4))
                s = s.model_copy(update={"tokens_per_s": s.tokens_per_s * (1.4 if n % 2 else 0.6)})
            return s

    dep = FakeDeployer()
    result = tune(options(methods=["ngram"], gammas=[2, 3], passes=2), deployer=dep, measurer=NoisyNgram())
    assert dep.started == ["none", "ngram-g2", "ngram-g3"] * 2 + ["ngram-g2"] * 2  # passes 3 and 4: only it
    extra = [r.point.key for r in result.outcome.results if r.point.repeat > 1]
    assert extra == ["ngram-g2@c1#r2", "ngram-g2@c4#r2", "ngram-g2@c1#r3", "ngram-g2@c4#r3"]
    assert any("pass 3: repeated ngram-g2" in n for n in result.report.notes)


def test_extra_passes_stop_when_the_spread_is_small_or_at_max_passes():
    dep = FakeDeployer()
    tune(options(methods=["ngram"], gammas=[2], passes=1), deployer=dep, measurer=FakeMeasurer())
    assert dep.started == ["none", "ngram-g2"] * 2  # one value: spread unknown, one more pass; then exact
    dep2 = FakeDeployer()
    tune(options(methods=["ngram"], gammas=[2], passes=1, max_passes=2), deployer=dep2,
         measurer=FakeMeasurer(noise=0.5, seed=3))
    assert dep2.started == ["none", "ngram-g2"] * 2  # noisy, but max_passes=2 stops after the second pass


def test_a_resumed_run_can_be_given_a_budget_of_its_own():
    clock = {"t": 0.0}

    class Slow(FakeDeployer):
        def start(self, config):
            clock["t"] += 100
            return super().start(config)

    first = tune(options(methods=["ngram"], gammas=[1, 2, 3], passes=1, budget_s=250), deployer=Slow(),
                 measurer=FakeMeasurer(), clock=lambda: clock["t"])
    assert first.outcome.stopped_by_budget
    dep = Slow()
    again = tune(resume=first.run_id, deployer=dep, measurer=FakeMeasurer(), clock=lambda: clock["t"],
                 budget_s=10_000)
    assert not again.outcome.stopped_by_budget and dep.started  # it measured what the first budget left
    keys = {r.point.config.key for r in again.outcome.results}
    assert keys == {"none", "ngram-g1", "ngram-g2", "ngram-g3"}
