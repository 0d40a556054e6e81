"""The EAGLE-1/2 head's full-vocabulary LM head (issue 37, the SGLang batch case): an EAGLE-1/2 head (method
``eagle``) scores the target's whole vocabulary at every draft step, an EAGLE-3 head a 32K draft vocabulary, so the
EAGLE-1 draft step reads (V − 32K)·h more weights (perfmodel.lm_head_excess). EAGLE-3 and MTP are priced as before.

Checked on the physics (the draft cost of both heads on a 128K-vocabulary target and on a 32K one, the head's
memory) and through the published rows, each predicted with its own source held out (evidence.cross_validate):
the EAGLE-3 paper's SGLang sweep (Table 3) and every serving-engine EAGLE row.

No fakes: the real catalogs, the real published rows, the real acceptance and cost models.
"""

from __future__ import annotations

import statistics
from functools import lru_cache

import pytest

from specops.planner.catalog import load_catalogs
from specops.planner.evidence import SERVING_ENGINES, cross_validate
from specops.planner.perfmodel import (
    EAGLE3_DRAFT_VOCAB,
    VLLM_PROFILE,
    DraftSpec,
    Setup,
    draft_ms,
    head_params,
    memory_estimate,
)


def _setup(model: str) -> Setup:
    cat = load_catalogs()
    return Setup(cat.model(model), cat.gpu("H100"), 1, VLLM_PROFILE)


def _draft_step_ms(setup: Setup, method: str) -> float:
    head = DraftSpec(method, None, head_params(setup.model, method) / 1e9)
    return draft_ms(setup, head, gamma=1, batch=2, kv_len=1024, kv_dtype="auto")


def test_the_eagle1_head_reads_the_targets_whole_lm_head_at_every_draft_step():
    llama = _setup("llama-3.1-8b-instruct")
    assert llama.model.vocab > 4 * EAGLE3_DRAFT_VOCAB
    excess_gb = (llama.model.vocab - EAGLE3_DRAFT_VOCAB) * llama.model.hidden * 2 / 1e9  # 16-bit weights
    floor_ms = excess_gb / (llama.gpu.bandwidth_gbs * VLLM_PROFILE.bandwidth_efficiency) * 1000
    gap = _draft_step_ms(llama, "eagle") - _draft_step_ms(llama, "eagle3")
    # EAGLE-3's fusion layer (3h·h against EAGLE-1's 2h·h) is smaller than the excess LM head: the gap is at least
    # the excess read less that h·h, and no more than the excess read plus it
    hh_ms = llama.model.hidden ** 2 * 2 / 1e9 / (llama.gpu.bandwidth_gbs * VLLM_PROFILE.bandwidth_efficiency) * 1000
    assert floor_ms - hh_ms <= gap <= floor_ms + hh_ms, (gap, floor_ms)
    # on a 32K-vocabulary target the two heads score the same vocabulary: EAGLE-1 is not dearer
    vicuna = _setup("vicuna-13b-v1.3")
    assert vicuna.model.vocab <= EAGLE3_DRAFT_VOCAB
    assert _draft_step_ms(vicuna, "eagle") <= _draft_step_ms(vicuna, "eagle3")


def test_the_excess_is_a_cost_not_memory():
    """The LM head an EAGLE-1 head scores through is the target's own (shared, not loaded twice)."""
    s = _setup("llama-3.1-8b-instruct")
    head = DraftSpec("eagle", None, head_params(s.model, "eagle") / 1e9)
    mem = memory_estimate(s, head, seq_tokens=2048, kv_dtype="auto")
    assert abs(mem.draft_gib - head_params(s.model, "eagle") * 2 / 1024 ** 3) < 1e-9


@lru_cache(maxsize=1)
def _residuals():
    return cross_validate()


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "EAGLE chains now share their level with EAGLE trees priced by their size (acceptance_tree, j38v): the acceptance model's EAGLE chain rows held out went 0.081 -> 0.008 median |ln tau| (bias -0.064 -> +0.008), so the EAGLE tau these rows get rose and the cost half that had been offset by a low tau shows (issue 37: the EAGLE-1 step prices below what the SGLang sweep implies, note9 'The SGLang EAGLE sweep'). With SGLang's per-step head cost (head_spec_overhead_ms 0.75) median |ln| 0.143 (was 0.187; 0.118 before j38v), batch 2 0.068; the EAGLE/EAGLE-3 ratio stays 0.87-0.90 against 0.67-0.77: with vLLM #20780's tau the batch-2-8 gap is the tau ratio (model 0.94, published 0.82) and the batch-16-24 one an EAGLE-1 cost with no other source (bench/stepcost_bench.py)."))
def test_the_sglang_eagle_sweep_held_out_and_the_two_heads_ratio():
    """EAGLE-3 paper Table 3 (SGLang v0.4.4, Llama-3.1-8B on one H100, chain of 3): before this change the EAGLE rows
    were over-predicted by ln −0.14 (batch 2) to −0.38 (batch 24), median |ln| 0.18 over the six batches, and the
    predicted EAGLE/EAGLE-3 ratio was 0.87 at every batch against 0.67-0.77 published."""
    rows = [x for x in _residuals() if x.row.engine == "sglang" and x.row.source.startswith("EAGLE-3 (Li")
            and x.row.batch > 1]
    eagle = {x.row.batch: x for x in rows if x.row.method == "eagle"}
    eagle3 = {x.row.batch: x for x in rows if x.row.method == "eagle3"}
    assert sorted(eagle) == [2, 4, 8, 16, 24, 64]
    assert statistics.median(x.error for x in eagle.values()) < 0.13
    assert eagle[2].error < 0.10
    for b in eagle:
        assert eagle[b].predicted / eagle3[b].predicted < 0.84, b
        assert eagle[b].log_ratio < 0, b  # still over-predicted: the batch-growing gap has no term


def test_serving_engine_eagle_rows_from_every_source_held_out():
    """All serving-engine rows of method ``eagle`` (EAGLE-3 paper's SGLang and vLLM tables, Liu et al. 2026's SGLang
    and vLLM runs, vLLM #20780), each with its own source held out: median |ln| was 0.189 over 13 rows; 0.164 after
    j38v's tree acceptance without SGLang's per-step head cost, 0.143 with it (head_spec_overhead_ms 0.75)."""
    errs = [x.error for x in _residuals() if x.row.method == "eagle" and x.row.engine in SERVING_ENGINES]
    assert len(errs) == 13
    assert statistics.median(errs) < 0.16
    others = [x.error for x in _residuals() if x.row.method in ("eagle3", "mtp")]
    assert statistics.median(others) < 0.15
