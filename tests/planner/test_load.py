"""`--qps` (Little's law to a fixed point) and `--engine` (which step-time profile predicts). Shipped
catalogs, priors and profiles; the CLI through a real subprocess. Nothing is faked."""

from __future__ import annotations

import math

import pytest

from specops.planner import RecommendRequest, recommend


def _plan(**kw):
    return recommend(RecommendRequest(model="llama-3.1-8b-instruct", gpu="H100", context_len=1024, **kw))


def _share(plan, qps: float) -> float:
    """Share of the GPU the prefills take from decode: qps × what a prefill costs a decode step it rides on
    (chunked prefill, planner/chunked_prefill.py, tested in tests/planner/test_capacity_chunked.py)."""
    from specops.planner.chunked_prefill import prefill_cost_ms

    req = RecommendRequest(model="llama-3.1-8b-instruct", gpu="H100", context_len=1024, qps=qps)
    return qps * prefill_cost_ms(req, plan)[0] / 1000


def _latency(plan, qps: float) -> float:
    """Latency at a rate, recomputed from a fixed-batch plan: prefills take a share s of the decode's time, decode
    steps stretch by 1/(1 − s), a request waits for the whole prefills queued ahead (M/D/1: TTFT·ρ/(2(1 − ρ)),
    ρ = qps × TTFT)."""
    p = plan.predicted
    rho = qps * p.ttft_ms / 1000
    return (p.ttft_ms * (1 + rho / (2 * (1 - rho))) + 256 * p.tpot_ms / (1 - _share(plan, qps))) / 1000


@pytest.mark.parametrize("qps", [0.5, 3, 8, 12])
def test_the_batch_is_the_concurrency_the_rate_keeps_in_flight(qps):
    plan = _plan(qps=qps)
    ld = plan.load
    assert ld is not None and ld.converged and ld.qps == qps
    # recompute independently: the plan at that fixed batch, its latency under the load, and Little's law
    again = _plan(batch_size=ld.concurrency)
    latency = _latency(again, qps)
    assert ld.latency_s == pytest.approx(latency, rel=1e-3)
    assert ld.prefill_share == pytest.approx(_share(again, qps), abs=2e-3)
    assert ld.prefill_share <= qps * again.predicted.ttft_ms / 1000  # never more than the whole prefills
    assert ld.tpot_ms > again.predicted.tpot_ms and ld.ttft_ms >= again.predicted.ttft_ms
    n = ld.concurrency
    assert max(1, math.ceil(qps * latency)) <= n  # n in flight keep up with the rate ...
    if n > 1:  # ... and one fewer does not
        assert math.ceil(qps * _latency(_plan(batch_size=n - 1), qps)) > n - 1
    assert plan.predicted.effective_batch == n


def test_a_rate_the_prefill_cannot_serve_is_not_converged_and_names_the_limit():
    """Issue 37: 20 req/s of 4K prompts on one H100 need ~82K prompt tokens/s, more than the model's own TTFT says
    one GPU prefills; that is "not converged" with the limit named, and the rate it names converges."""
    plan = recommend(RecommendRequest(model="llama-3.1-8b-instruct", gpu="H100", context_len=4096, qps=20))
    ld = plan.load
    assert not ld.converged and ld.latency_s is None and ld.prefill_share > 1
    assert "prefill alone cannot keep up above" in ld.note and "81,920 prompt tokens/s" in ld.note
    limit = float(ld.note.split("keep up above ")[1].split(" req/s")[0])
    assert limit == pytest.approx(1000 / plan.predicted.ttft_ms, rel=0.02)
    under = recommend(RecommendRequest(model="llama-3.1-8b-instruct", gpu="H100", context_len=4096, qps=limit * 0.3))
    assert under.load.converged


def test_a_rate_the_decode_cannot_serve_beside_its_prefills_names_both():
    """25 req/s of 1K prompts: the prefills take ~46% of the decode's time (chunked: less than the ~78% their whole
    forwards would) and the decode left over cannot produce the 6,400 tokens/s the rate asks at any batch that
    fits."""
    ld = _plan(qps=25).load
    assert not ld.converged and 0.3 < ld.prefill_share < 1
    assert "prefills take" in ld.note and "6,400 the rate asks" in ld.note


def test_more_requests_per_second_keep_more_in_flight():
    ns = [_plan(qps=q).load.concurrency for q in (0.5, 3, 8, 12)]
    assert ns == sorted(ns) and ns[0] < ns[-1]


def test_a_rate_beyond_what_fits_is_not_converged_and_says_so_and_the_fix_helps():
    big = recommend(RecommendRequest(model="llama-3.1-8b-instruct", gpu="H100", context_len=4096, output_len=4096,
                                     qps=3))
    assert big.load.prefill_share < 1  # the prefills keep up; the requests in flight do not fit
    assert not big.load.converged and "queue grows" in big.load.note
    assert any("queue grows" in w for w in big.warnings)
    assert big.load.concurrency <= big.memory.max_batch_that_fits
    shorter = recommend(RecommendRequest(model="llama-3.1-8b-instruct", gpu="H100", context_len=512, output_len=64, qps=3))
    assert shorter.load.converged


def test_shorter_prompts_raise_the_prefill_limit():
    limit = {}
    for ctx in (4096, 512):
        ld = recommend(RecommendRequest(model="llama-3.1-8b-instruct", gpu="H100", context_len=ctx, qps=2000)).load
        assert not ld.converged and "prefill alone cannot keep up" in ld.note
        limit[ctx] = float(ld.note.split("keep up above ")[1].split(" req/s")[0])
    assert limit[512] > 3 * limit[4096]


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
