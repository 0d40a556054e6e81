"""Native runtimes (llama.cpp, MLX, T5X, gpt-fast-style PyTorch: published rows of engine ``other``) are not the HF
paper harness: their own engine class (specops.planner.uncertainty.engine_class), so their rows form their own strata
and Mondrian groups and are no published run near an `--engine hf` request; and a published row that does not state γ
is bounded by physics over every γ its source may have run (evidence.gamma_bounds), not at the model's best γ only.

Synthetic calibration points where a property needs one of known shape (the test says so); the shipped published
rows and acceptance model for the γ bounds. Nothing is faked."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from specops.planner.catalog import load_catalogs
from specops.planner.evidence import fit_priors, gamma_bounds, predict_at_best_gamma, prior_of
from specops.planner.published_runs import near_runs, query_for
from specops.planner.uncertainty import (
    RangeCalibration,
    ResidualPoint,
    assess,
    calibration_rows,
    engine_class,
    stratum_of,
    tau_ceiling,
)


@pytest.mark.parametrize(("engine", "cls"), [("vllm", "serving"), ("sglang", "serving"), ("tensorrt-llm", "serving"),
                                              ("hf", "harness"), ("other", "native")])
def test_a_native_runtime_is_an_engine_class_of_its_own(engine, cls):
    assert engine_class(engine) == cls
    assert stratum_of(engine=engine, method="mtp", kind="dense", moe=False, batch=1).engine == cls


def _run(engine: str) -> ResidualPoint:
    """One published MTP run of Qwen3-8B at batch 1 on an RTX 4090 (1.5x; predicted 1.4x), on ``engine``."""
    s = stratum_of(engine=engine, method="mtp", kind="dense", moe=False, batch=1)
    return ResidualPoint("a source", math.log(1.5 / 1.4), s, speedup=1.4, tau=2.0, tau_high=2.4, method="mtp",
                         target="Qwen3-8B", gpu="RTX4090", batch=1, batch_known=True, published=1.5)


def test_a_native_runtimes_run_is_no_published_run_near_an_hf_harness_request():
    """The same target, method, GPU and batch: an HF-harness run is near an `--engine hf` request, a llama.cpp/MLX
    one (engine other) is not (they shared the harness class until native runtimes had their own)."""
    q = query_for(names=["Qwen/Qwen3-8B"], method="mtp", gpu="RTX4090", engine=engine_class("hf"), batch=1)
    assert [r.speedup for r in near_runs([_run("hf")], q, 1.4)] == [1.5]
    assert near_runs([_run("other")], q, 1.4) == []
    native = query_for(names=["Qwen/Qwen3-8B"], method="mtp", gpu="RTX4090", engine=engine_class("other"), batch=1)
    assert [r.speedup for r in near_runs([_run("other")], native, 1.4)] == [1.5]


@pytest.fixture(scope="module")
def unstated_draft_row():
    """TensorRT-LLM's Llama-3.1-405B with a Llama-3.2-1B draft (NVIDIA's blog; γ not stated), its source held out."""
    rows = calibration_rows()
    row = next(r for r in rows if r.method == "draft_model" and not r.gamma and "405B" in r.target
               and r.engine == "tensorrt-llm" and "3.2-1B" in (r.draft_id or ""))
    return row, fit_priors([r for r in rows if r.source != row.source], held_out={row.source}), load_catalogs()


def test_a_row_without_gamma_is_bounded_over_every_gamma_its_source_may_have_run(unstated_draft_row):
    row, priors, cat = unstated_draft_row
    e, _ = predict_at_best_gamma(row, priors, cat, None)
    best_ceiling = tau_ceiling(prior_of(replace(row, gamma=e.gamma), priors, cat), e.gamma, e.tau)
    floor, ceiling = gamma_bounds(row, priors, cat)
    assert ceiling > best_ceiling  # a draft model's τ keeps growing past the model's best γ
    assert floor < e.speedup / e.tau
    s = stratum_of(engine=row.engine, method=row.method, kind="dense", moe=False, batch=row.batch)
    cal = RangeCalibration([replace(_run("vllm"), source=f"s{i}", log_ratio=0.05 * (-1) ** i) for i in range(20)])
    at_best = assess(e.speedup, e.tau, s, cal, tau_high=best_ceiling, method=row.method)
    either = assess(e.speedup, e.tau, s, cal, tau_high=best_ceiling, method=row.method, bounds=(floor, ceiling))
    assert at_best.tau_high == pytest.approx(best_ceiling, abs=1e-3)
    assert either.tau_high == pytest.approx(ceiling, abs=1e-3) and either.floor == pytest.approx(floor, abs=1e-3)
    assert either.bias == at_best.bias  # the bounds move, not the centre: μ reads τ's spread at the best γ
