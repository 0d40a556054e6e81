"""`--qps` (Little's law to a fixed point) and `--engine` (which step-time profile predicts). Shipped
catalogs, priors and profiles; the CLI through a real subprocess. Nothing is faked."""

from __future__ import annotations

import math

import pytest

from specops.planner import RecommendRequest, recommend


def _plan(**kw):
    return recommend(RecommendRequest(model="llama-3.1-8b-instruct", gpu="H100", context_len=1024, **kw))


@pytest.mark.parametrize("qps", [0.5, 5, 20, 30])
def test_the_batch_is_the_concurrency_the_rate_keeps_in_flight(qps):
    plan = _plan(qps=qps)
    ld = plan.load
    assert ld is not None and ld.converged and ld.qps == qps
    # recompute independently: the plan at that fixed batch, its latency, and Little's law
    again = _plan(batch_size=ld.concurrency)
    latency = (again.predicted.ttft_ms + 256 * again.predicted.tpot_ms) / 1000
    assert ld.latency_s == pytest.approx(latency, rel=1e-3)
    n = ld.concurrency
    assert max(1, math.ceil(qps * latency)) <= n  # n in flight keep up with the rate ...
    if n > 1:  # ... and one fewer does not
        fewer = _plan(batch_size=n - 1)
        assert math.ceil(qps * (fewer.predicted.ttft_ms + 256 * fewer.predicted.tpot_ms) / 1000) > n - 1
    assert plan.predicted.effective_batch == n


def test_more_requests_per_second_keep_more_in_flight():
    ns = [_plan(qps=q).load.concurrency for q in (0.5, 5, 20, 30)]
    assert ns == sorted(ns) and ns[0] < ns[-1]


def test_a_rate_beyond_what_fits_is_not_converged_and_says_so_and_the_fix_helps():
    big = recommend(RecommendRequest(model="llama-3.1-8b-instruct", gpu="H100", context_len=4096, qps=2000))
    assert not big.load.converged and "queue grows" in big.load.note
    assert any("queue grows" in w for w in big.warnings)
    assert big.load.concurrency <= big.memory.max_batch_that_fits
    shorter = recommend(RecommendRequest(model="llama-3.1-8b-instruct", gpu="H100", context_len=512, output_len=64, qps=2000))
    assert shorter.load.concurrency > big.load.concurrency


def test_the_path_names_the_engine_profile_and_it_changes_the_prediction():
    v, s, h = (_plan(engine=e) for e in ("vllm", "sglang", "hf"))
    cost = {e: next(x for x in p.decision_path if x.rule == "cost_model").input for e, p in
            (("vllm", v), ("sglang", s), ("hf", h))}
    assert "profile=vllm" in cost["vllm"] and "profile=sglang" in cost["sglang"] and "profile=eager" in cost["hf"]
    assert v.predicted.tpot_ms < s.predicted.tpot_ms < h.predicted.tpot_ms
    assert v.vllm.argv[:2] == s.vllm.argv[:2]  # the rendered launch stays vLLM


def test_cli_refuses_qps_with_batch_size_and_an_unknown_engine(cli):
    r = cli("recommend", "--model", "llama-3.1-8b-instruct", "--gpu", "H100", "--qps", "2", "--batch-size", "3")
    assert r.returncode == 2 and "--qps and --batch-size" in r.stderr and "To fix:" in r.stderr
    r = cli("recommend", "--model", "llama-3.1-8b-instruct", "--gpu", "H100", "--engine", "sglng")
    assert r.returncode == 2 and "sglang" in r.stderr
    r = cli("recommend", "--model", "llama-3.1-8b-instruct", "--gpu", "H100", "--qps", "5", "-o", "json")
    assert r.returncode == 0 and '"load"' in r.stdout
