"""recommend uses what the installation learned: a `specops tune` calibration (named, or the newest
for the model on CPU) and says so; an unknown calibration is bad input."""

from __future__ import annotations

import json

from specops.planner.api import build_request, recommend_with_defaults
from specops.tune.calibration import save_calibration
from specops.tune.types import Acceptance, Calibration, Coefficients


def _calibration(name: str, model: str, p0: float) -> Calibration:
    return Calibration(
        name=name, created_at="2026-11-29T12:00:00+00:00", hardware="cpu: 2 cores", model=model,
        engine_version="0.32.0", workload="code", samples=12,
        coefficients=Coefficients(overhead_ms=20.0, per_seq_ms=1.0, per_token_ms=0.5,
                                  draft_ms_per_token={"draft_model": 3.0}, draft_ms_per_seq={"ngram": 0.1}),
        acceptance=[Acceptance(method="ngram", per_position=[p0, p0 * 0.8, p0 * 0.6], drafts=[500, 500, 500])],
    )


def test_named_calibration_is_used_and_reported():
    save_calibration(_calibration("tiny-cpu", "meta-llama/Llama-3.1-8B-Instruct", 0.9))
    req = build_request(model="meta-llama/Llama-3.1-8B-Instruct", gpu="cpu", method="ngram")
    plan = recommend_with_defaults(req, calibration="tiny-cpu")
    assert any("calibration tiny-cpu: 12 measured points" in n for n in plan.learned_from)
    assert "measured" in plan.predicted.acceptance_prior_source


def test_newest_calibration_for_the_model_applies_by_default_on_cpu_only():
    save_calibration(_calibration("auto-cal", "meta-llama/Llama-3.1-8B-Instruct", 0.9))
    on_cpu = recommend_with_defaults(build_request(model="meta-llama/Llama-3.1-8B-Instruct", gpu="cpu"))
    on_gpu = recommend_with_defaults(build_request(model="meta-llama/Llama-3.1-8B-Instruct", gpu="H100"))
    assert any("auto-cal" in n for n in on_cpu.learned_from)
    assert on_gpu.learned_from == []


def test_measured_acceptance_in_the_calibration_changes_the_prediction():
    req = build_request(model="meta-llama/Llama-3.1-8B-Instruct", gpu="cpu", method="ngram",
                        num_speculative_tokens=3)
    save_calibration(_calibration("high", "x", 0.95))
    save_calibration(_calibration("low", "x", 0.2))
    high = recommend_with_defaults(req, calibration="high").predicted.mean_acceptance_length
    low = recommend_with_defaults(req, calibration="low").predicted.mean_acceptance_length
    assert high > low


def test_unknown_calibration_is_one_line_exit_2(cli):
    r = cli("recommend", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "cpu", "--calibration", "nope")
    assert r.returncode == 2
    assert "To fix:" in r.stderr and "Traceback" not in r.stderr


def test_json_output_lists_what_it_learned_from(cli):
    save_calibration(_calibration("cli-cal", "meta-llama/Llama-3.1-8B-Instruct", 0.9))
    r = cli("recommend", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "cpu", "-o", "json")
    assert r.returncode == 0, r.stderr
    assert any("cli-cal" in n for n in json.loads(r.stdout)["learned_from"])
