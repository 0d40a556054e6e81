"""The evaluator on real parsed metric windows and a real registry file (see helpers.py for the data)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from specops.checks.evaluate import compare_outputs, run_checklist
from specops.checks.playbook import get_profile, load_checklist
from specops.checks.sources import Sources, deployment_facts
from specops.errors import MeasurementError
from tests.checks.helpers import matched_windows, stale_windows


def _sources(reg, name, windows_fn, **kw):
    facts = deployment_facts(reg.get_deployment(name))
    return Sources(deployment=facts, windows=windows_fn, registry=reg, **kw)


def _deploy(reg, name, windows_fn, only=None, profile="cpu-tiny", **kw):
    cl = load_checklist("deploy")
    if only:
        cl = cl.model_copy(update={"checks": [c for c in cl.checks if c.id in only]})
    return run_checklist(cl, profile, get_profile(profile), _sources(reg, name, windows_fn, **kw))


ACCEPTANCE = ["deploy.spec-counters", "deploy.acceptance-p50", "deploy.acceptance-p5", "deploy.acceptance-floor",
              "deploy.position0", "deploy.lineage", "deploy.gamma"]


def test_matched_draft_passes_the_acceptance_and_lineage_checks(registry):
    rep = _deploy(registry, "tiny-matched", lambda w, n: matched_windows(n), only=ACCEPTANCE)
    assert [r.status for r in rep.results] == ["pass"] * len(ACCEPTANCE), [r.message for r in rep.results]
    assert rep.exit_code == 0
    p50 = next(r for r in rep.results if r.id == "deploy.acceptance-p50")
    assert 0.6 < p50.observed < 0.75 and p50.threshold == 0.40


def test_stale_draft_fails_acceptance_and_lineage_with_exit_1(registry):
    rep = _deploy(registry, "tiny-stale", lambda w, n: stale_windows(n), only=ACCEPTANCE)
    status = {r.id: r.status for r in rep.results}
    assert status["deploy.acceptance-p50"] == "fail"
    assert status["deploy.acceptance-floor"] == "fail"
    assert status["deploy.lineage"] == "fail"
    assert "STALE_DRAFT" in next(r.message for r in rep.results if r.id == "deploy.lineage")
    assert rep.exit_code == 1


def test_acceptance_floor_is_the_alpha_where_predicted_speedup_crosses_one(registry):
    rep = _deploy(registry, "tiny-matched", lambda w, n: matched_windows(n), only=["deploy.acceptance-floor"])
    r = rep.results[0]
    assert 0.38 < r.threshold < 0.40  # cpu-tiny: c=0.2, γ=3 -> 1+α+α²+α³ = 1.6
    assert "γ=3" in r.threshold_source


def test_unreachable_prometheus_makes_every_metric_check_an_error_and_exit_2(registry):
    def down(w, n):
        raise MeasurementError("cannot reach Prometheus at http://127.0.0.1:1 (ConnectionError)", "start it")
    rep = _deploy(registry, "tiny-matched", down, only=ACCEPTANCE)
    metric = [r for r in rep.results if r.kind == "metric"]
    assert metric and all(r.status == "error" for r in metric)
    assert all("cannot reach Prometheus" in r.message for r in metric)
    assert rep.exit_code == 2


def test_too_few_samples_is_an_error_not_a_pass(registry):
    rep = _deploy(registry, "tiny-matched", lambda w, n: matched_windows(2), only=["deploy.acceptance-p50"])
    assert rep.results[0].status == "error" and "too few samples" in rep.results[0].message
    assert rep.exit_code == 2


def test_no_baseline_makes_the_lossless_check_an_error(registry):
    rep = _deploy(registry, "tiny-matched", lambda w, n: matched_windows(n), only=["deploy.lossless"])
    assert rep.results[0].status == "error" and "baseline" in rep.results[0].message


@functools.cache
def _hf(path: Path):
    """(tokenizer, float32 model) of a tiny model folder, loaded once per test session."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(path), torch_dtype=torch.float32).eval()
    return AutoTokenizer.from_pretrained(str(path)), model


def _hf_endpoints(served: dict[str, tuple[Path, Path | None]], calls: list):
    """``complete`` for the lossless check, answered by real models in-process instead of HTTP servers:
    endpoint -> (target folder, draft folder or None). With a draft, transformers' assisted generation
    (real speculative decoding: the draft proposes, the target verifies); without, plain greedy decoding.
    Faked: only the HTTP hop (http_complete is tested against real engines in test_engine_e2e.py)."""
    import torch

    loaded = {ep: (_hf(t)[0], _hf(t)[1], _hf(d)[1] if d else None) for ep, (t, d) in served.items()}

    def complete(endpoint, model, prompts, max_tokens, headers):
        calls.append((endpoint, tuple(prompts), max_tokens))
        tok, target, draft = loaded[endpoint]
        out = []
        for p in prompts:
            ids = tok(p, return_tensors="pt").input_ids
            kw = {"assistant_model": draft} if draft is not None else {}
            with torch.no_grad():
                gen = target.generate(ids, max_new_tokens=max_tokens, min_new_tokens=max_tokens, do_sample=False,
                                      pad_token_id=tok.eos_token_id, **kw)[0, ids.shape[1]:].tolist()
            out.append({"text": tok.decode(gen), "tokens": [f"token_id:{i}" for i in gen]})
        return out
    return complete


@pytest.mark.slow  # torch + assisted generation on 2 CPU cores: 25-40 s
def test_lossless_check_passes_real_speculative_decoding_against_the_same_target(registry, tiny_models):
    calls: list = []
    complete = _hf_endpoints({"http://127.0.0.1:9": (tiny_models["target-v1"], tiny_models["draft-v1"]),
                              "http://base:8000": (tiny_models["target-v1"], None)}, calls)
    rep = _deploy(registry, "tiny-matched", None, only=["deploy.lossless"], baseline_endpoint="http://base:8000",
                  complete=complete)
    assert rep.results[0].status == "pass", rep.results[0].message
    assert calls[0][1] == calls[1][1] and len(calls[0][1]) == 4 + 2 and calls[0][2] == 32  # + json, tool-call
    assert {calls[0][0], calls[1][0]} == {"http://127.0.0.1:9", "http://base:8000"}


@pytest.mark.slow  # torch + assisted generation on 2 CPU cores: 25-40 s
def test_lossless_check_fails_when_the_baseline_serves_another_target(registry, tiny_models):
    complete = _hf_endpoints({"http://127.0.0.1:9": (tiny_models["target-v1"], tiny_models["draft-v1"]),
                              "http://base:8000": (tiny_models["target-v2"], None)}, [])
    rep = _deploy(registry, "tiny-matched", None, only=["deploy.lossless"], baseline_endpoint="http://base:8000",
                  complete=complete)
    r = rep.results[0]
    assert r.status == "fail" and rep.exit_code == 1, r.message
    assert r.evidence["differences"] and all(d["first_difference_at"] < 32 for d in r.evidence["differences"])


def test_output_comparison_reports_where_greedy_tokens_diverge():
    same = [{"text": "ab", "tokens": ["token_id:1", "token_id:2"]}]
    other = [{"text": "ax", "tokens": ["token_id:1", "token_id:9"]}]
    assert compare_outputs(same, same).ok
    out = compare_outputs(same, other)
    assert not out.ok and out.evidence["differences"] == [{"prompt": 0, "first_difference_at": 1}]
    assert "token ids" in out.message


def test_missing_benchmark_is_an_error_and_a_stored_one_is_judged(registry):
    # gpu-default gates on TPOT speedup (cpu-tiny skips it: the tiny CPU engines are too noisy)
    rep = _deploy(registry, "tiny-matched", None, only=["deploy.tpot-speedup"], profile="gpu-default")
    assert rep.results[0].status == "error" and "specops bench" in rep.results[0].fix
    registry.record_event("bench", "tiny-matched", "bench code", data={
        "workload": "code", "crosscheck_ok": True,
        "comparisons": [{"concurrency": 1, "tpot_speedup": 1.3, "spec_tpot_p50_s": 0.01, "baseline_tpot_p50_s": 0.013},
                        {"concurrency": 4, "tpot_speedup": 0.4, "spec_tpot_p50_s": 0.03, "baseline_tpot_p50_s": 0.012}]})
    rep = _deploy(registry, "tiny-matched", None, only=["deploy.tpot-speedup"], profile="gpu-default")
    r = rep.results[0]
    assert r.status == "fail" and r.observed == 0.4 and r.evidence["by_concurrency"] == {1: 1.3, 4: 0.4}
    assert rep.data["tpot_by_concurrency"][1] == {"concurrency": 4, "spec": 0.03, "baseline": 0.012}


def test_a_speedup_whose_interval_spans_one_cannot_be_evaluated_never_a_pass(registry):
    registry.record_event("bench", "tiny-matched", "bench code", data={"workload": "code", "crosscheck_ok": True,
        "comparisons": [{"concurrency": 1, "tpot_speedup": 1.5, "tpot_speedup_low": 0.8, "tpot_speedup_high": 2.6,
                         "speedup_verdict": "too few requests to tell", "spec_tpot_p50_s": 0.01,
                         "baseline_tpot_p50_s": 0.015}]})
    rep = _deploy(registry, "tiny-matched", None, only=["deploy.tpot-speedup"], profile="gpu-default")
    r = rep.results[0]
    assert r.status == "error" and rep.exit_code == 2 and "too few requests to tell" in r.message, r.message
    assert "--requests" in r.fix


def test_profile_skips_are_shown_as_skipped_never_as_pass(registry):
    rep = _deploy(registry, "tiny-matched", None, only=["deploy.long-outputs"])
    assert rep.results[0].status == "skipped" and "max_model_len" in rep.results[0].message
    rep = _deploy(registry, "tiny-matched", None, only=["deploy.long-outputs"], profile="gpu-default",
                  bench_events=[])
    assert rep.results[0].status == "fail" and rep.exit_code == 0  # warning severity: reported, not fatal


def test_fallback_check_reads_the_per_batch_schedule(registry):
    registry.upsert_deployment("tiny-matched", platform="local", status="running", engine_config={
        "speculative_config": {"method": "draft_model", "num_speculative_tokens": 3,
                               "num_speculative_tokens_per_batch_size": [[1, 8, 3], [9, 256, 0]]}})
    rep = _deploy(registry, "tiny-matched", None, only=["deploy.fallback"])
    assert rep.results[0].status == "pass" and "batch 9-256" in rep.results[0].message


def test_plot_data_holds_per_position_rates_and_alpha_over_time(registry):
    rep = _deploy(registry, "tiny-matched", lambda w, n: matched_windows(n), only=["deploy.acceptance-p50"])
    pp = rep.data["per_position"]
    assert len(pp) == 3 and pp[0] > pp[1] > pp[2] > 0
    assert len(rep.data["over_time"]) == 6 and all(0.6 < p["alpha"] < 0.75 for p in rep.data["over_time"])


def test_train_and_ops_checklists_judge_registry_records(registry):
    prof = get_profile("cpu-tiny")
    train = run_checklist(load_checklist("train"), "cpu-tiny", prof, _sources(registry, "tiny-matched", None))
    status = {r.id: r.status for r in train.results}
    assert status == {"train.lineage": "pass", "train.data-recorded": "pass", "train.retrain-plan": "pass",
                      "train.offline-acceptance": "fail"}
    ops = run_checklist(load_checklist("ops"), "cpu-tiny", prof,
                        _sources(registry, "tiny-stale", lambda w, n: stale_windows(n)))
    status = {r.id: r.status for r in ops.results}
    assert status["ops.versions-in-sync"] == "fail" and status["ops.weekly-review"] == "fail"
    assert ops.exit_code == 1
