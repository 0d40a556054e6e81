"""Draft models at scale (issue 37): the 70B/405B targets with Llama-3.2-1B/3B and Llama-3.1-8B drafts of
playbooks/data/heldout_2026-12.csv (AMD's vLLM-on-MI300X blog, NVIDIA's TensorRT-LLM 405B post), each predicted
with its own source held out.

Two corrections, each checked on its own and then through the held-out rows:
- one spelling per draft (``acceptance_data.draft_key``): llama.cpp #5877 measured Llama-3.2-1B-Instruct (as
  'Llama-3.2-1B-Instruct q8_0') drafting for Llama-3.1-8B; a request naming meta-llama/Llama-3.2-1B-Instruct now
  cites that row instead of falling back to the generic draft-model level;
- a published draft-model run drafts at its target's precision (both sources quantised the draft to FP8 as the
  target: AMD's serve command passes ``--speculative-model-quantization fp8``, NVIDIA's steps quantise the draft
  checkpoint with ``--qformat fp8``): the draft's weight reads are priced at 8 bits, not 16.

No fakes: the real acceptance table, the real published rows, the real cost model.
"""

from __future__ import annotations

import math
import statistics
from functools import lru_cache

from specops.planner import acceptance as acc
from specops.planner.acceptance_data import draft_key
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


def test_one_spelling_per_draft():
    assert draft_key("Llama-3.2-1B-Instruct q8_0") == draft_key("meta-llama/Llama-3.2-1B-Instruct") \
        == "llama-3.2-1b-instruct"
    assert draft_key("amd/Llama-3.1-8B-Instruct-FP8-KV") == draft_key("meta-llama/Llama-3.1-8B-Instruct")
    assert draft_key("Qwen2.5-Coder-1.5B-Instruct Q4_K_M") == "qwen2.5-coder-1.5b-instruct"
    # different drafts stay apart: size, generation and kind are part of the name
    assert len({draft_key(n) for n in ("meta-llama/Llama-3.2-1B-Instruct", "meta-llama/Llama-3.2-3B-Instruct",
                                       "yuhuili/EAGLE-LLaMA3.1-Instruct-8B", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")}) == 4
    assert draft_key("") is None and draft_key(None) is None


def test_a_draft_measured_under_another_spelling_is_cited():
    """The acceptance model fitted on every row: a request for meta-llama/Llama-3.2-1B-Instruct drafting for a 70B
    Llama cites llama.cpp's row of the same draft, and its α0 is above the level of an unnamed draft of that size."""
    model = acc.default_model()
    llamacpp = [r.id for r in acc.load_rows() if r.source_id == "llamacpp-5877" and r.method == "draft_model"]
    assert llamacpp
    kw = dict(task="chat", draft_ratio=1.24 / 70, target="meta-llama/Llama-3.1-70B-Instruct")
    named = acc.estimate(model, "draft_model", draft="meta-llama/Llama-3.2-1B-Instruct", **kw)
    unnamed = acc.estimate(model, "draft_model", **kw)
    assert set(llamacpp) <= set(named.draft_rows)
    assert named.alpha0 > unnamed.alpha0


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
    is at most 0.40 (0.545 before the two corrections), and no row is over-predicted by more than 0.25 ln."""
    res = _held_out()
    assert len(res) == 10
    errs = [math.log(r.row.speedup / r.predicted) for r in res]
    assert statistics.median(abs(e) for e in errs) <= 0.40
    assert min(errs) >= -0.25
    ones = [r for r in res if (r.row.draft_params_b or 0) < 2]
    assert len(ones) == 3 and all(abs(math.log(r.row.speedup / r.predicted)) <= 0.25 for r in ones)
