"""Draft models at scale (issue 37): the 70B/405B targets with Llama-3.2-1B/3B and Llama-3.1-8B drafts of
playbooks/data/heldout_2026-12.csv (AMD's vLLM-on-MI300X blog, NVIDIA's TensorRT-LLM 405B post), each predicted
with its own source held out.

The cost half's correction, checked on its own and then through the held-out rows: a published draft-model run
drafts at its target's precision (both sources quantised the draft to FP8 as the target: AMD's serve command passes
``--speculative-model-quantization fp8``, NVIDIA's steps quantise the draft checkpoint with ``--qformat fp8``), so
the draft's weight reads are priced at 8 bits, not 16. The τ half stays short (bench/stepcost_bench.py prints the
split of every row); the test pins what the cost correction buys and that it overshoots nothing.

No fakes: the real acceptance table, the real published rows, the real cost model.
"""

from __future__ import annotations

import math
import statistics
from functools import lru_cache

from specops.planner.catalog import load_catalogs
from specops.planner.evidence import cross_validate, predict_row
from specops.planner.perfmodel import EAGER_PROFILE, ENGINE_PROFILES
from specops.planner.priors import calibrate, load_published
from specops.planner.uncertainty import load_heldout_2026_12


@lru_cache(maxsize=1)
def _draft_rows():
    return [r for r in load_heldout_2026_12() if r.method == "draft_model"]


@lru_cache(maxsize=1)
def _held_out():
    return cross_validate(rows=_draft_rows(), profiles=(ENGINE_PROFILES["vllm"], EAGER_PROFILE), unstated_gamma=True)


def test_a_published_draft_model_run_drafts_at_its_targets_precision():
    cat = load_catalogs()
    priors = calibrate(load_published())
    fp8 = next(r for r in _draft_rows() if r.quantization == "fp8" and (r.draft_params_b or 0) > 5)
    e, setup = predict_row(fp8, priors, cat)
    assert setup.model.weight_bits == 8 and e.draft.model.weight_bits == 8
    # a 16-bit target keeps a 16-bit draft
    bf16 = next(r for r in load_published() if r.method == "draft_model" and not r.quantization and r.gamma)
    e16, s16 = predict_row(bf16, priors, cat)
    assert s16.model.weight_bits == 16 and e16.draft.model.weight_bits == 16


def test_draft_models_at_scale_held_out():
    """Each source held out (its acceptance rows and speedup rows out of the fit): the median |ln| over the ten rows
    is at most 0.42 (0.548 with 16-bit drafts), and every row is still under-predicted (the τ half, not fixed here, is
    short on all ten: the correction overshoots none)."""
    res = _held_out()
    assert len(res) == 10
    errs = [math.log(r.row.speedup / r.predicted) for r in res]
    assert statistics.median(abs(e) for e in errs) <= 0.42
    assert min(errs) > 0


def test_the_draft_size_sweeps_are_priced_with_the_fp8_drafts_they_ran():
    """The draft-cost pair is fitted on the AMD and NVIDIA draft-size sweeps (planner/draftcost.py), which ran FP8
    drafts: priced so, every held-out fold still picks the shipped (0.02 ms/layer, 1.0 ms) pair, and AMD's sweep,
    held out, is predicted within 0.10 median |ln ratio| (0.136 with 16-bit drafts)."""
    from specops.planner.draftcost import _sweep_catalogs, load_sweeps, loso_draft_cost

    cat = _sweep_catalogs()
    assert {cat.model(r.draft).weight_bits for r in load_sweeps()} == {8}
    vllm = ENGINE_PROFILES["vllm"]
    folds = loso_draft_cost(vllm)
    sweeps = [src for src in folds if "rocm" in src.lower() or "tensorrt" in src.lower()]
    assert len(sweeps) == 2
    assert all(folds[src][0] == (vllm.draft_layer_overhead_ms, vllm.draft_lm_overhead_ms) for src in sweeps)
    amd = next(src for src in sweeps if "rocm" in src.lower())
    assert folds[amd][1] <= 0.10
