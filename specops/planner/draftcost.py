"""A separate draft model's cost per engine class, from the cost side of published draft-size sweeps.

``playbooks/data/heldout_2026-12.csv`` holds sweeps that change only the draft's size (Llama-3.2-1B,
-3B, Llama-3.1-8B) for one 70B/405B target on one engine (AMD's vLLM-on-MI300X blog, rows AMD-DD-*;
NVIDIA's TensorRT-LLM 405B post, rows NV-405B-*); :func:`load_sweeps` reads those rows (cost side only). Within a sweep the ratio of speedups between two draft sizes is mostly the ratio of their
costs: acceptance moves little with draft size (the priors' draft slope, 0.03 α per e-fold), while a
draft's forward grows with its layers and weights. :func:`sweep_ratio_errors` scores a profile's
``draft_layer_overhead_ms`` on those ratios (each row against its sweep's smallest draft) and
:func:`fit_draft_layer_overhead` picks the grid value per engine class. ``bench/stepcost_bench.py`` prints
the fit; what ships is the shipped profile's value unless the fit moves it (docs/performance-model.md).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import lru_cache

from specops.planner.perfmodel import EngineProfile

DATA_FILE = "heldout_2026-12.csv"
SWEEPS = ("AMD-DD-70B-1B", "AMD-DD-70B-3B", "AMD-DD-70B-8B", "AMD-DD-405B-1B", "AMD-DD-405B-3B", "AMD-DD-405B-8B",
          "NV-405B-1B", "NV-405B-3B", "NV-405B-8B")
TARGETS = {"70B": "meta-llama/Llama-3.1-70B-Instruct", "405B": "meta-llama/Llama-3.1-405B-Instruct"}
GRID = (0.0, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.12)


@dataclass(frozen=True)
class DraftSizeSweepRow:
    id: str
    source: str
    target: str
    draft: str
    engine_class: str
    gpu: str
    gpus: int
    gamma: int | None
    batch: int
    context_len: int
    output_len: int
    speedup: float

    @property
    def sweep(self) -> tuple[str, str]:
        return self.source, self.target


def load_sweeps() -> list[DraftSizeSweepRow]:
    from specops.playbooks import playbook_path

    return list(_load(str(playbook_path("data", DATA_FILE))))


@lru_cache(maxsize=2)
def _load(path: str) -> tuple[DraftSizeSweepRow, ...]:
    with open(path, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["id"] in SWEEPS]
    return tuple(DraftSizeSweepRow(r["id"], r["source"], TARGETS["405B" if "405B" in r["model"] else "70B"], r["draft"],
                          "tensorrt-llm" if "TensorRT" in r["engine_class"] or "TRT" in r["engine_class"] else "vllm",
                          r["gpu"], int(r["gpus"]), int(r["gamma_published"]) if r["gamma_published"].isdigit() else None,
                          int(r["batch"]), int(r["context_len"]), int(r["output_len"]), float(r["published_speedup"]))
                 for r in rows)


SWEEP_BITS = 8
"""Both sweeps ran FP8 drafts beside their FP8 targets: AMD's serve command passes ``--speculative-model-quantization
fp8`` with AMD's FP8-KV draft checkpoints, NVIDIA's steps quantise the draft checkpoint with ``quantize.py --qformat
fp8``. vLLM does not quantise a separate draft with the target's ``--quantization`` (only MTP and DSpark drafts:
vllm/config/speculative.py), so a plain ``recommend`` prices the catalog's 16-bit draft; the sweeps are priced as run."""


@lru_cache(maxsize=1)
def _sweep_catalogs():
    from specops.planner.catalog import Catalogs, load_catalogs

    cat = load_catalogs()
    drafts = {r.draft for r in load_sweeps()}
    return Catalogs(cat.gpus, [m.model_copy(update={"weight_bits": SWEEP_BITS}) if m.id in drafts else m
                               for m in cat.models])


def predicted_speedup(row: DraftSizeSweepRow, profile: EngineProfile, priors=None) -> float:
    from specops.planner import RecommendRequest, recommend

    req = RecommendRequest(model=row.target, quantization="fp8", gpu=row.gpu, gpus=row.gpus, method="draft_model",
                           draft=row.draft, num_speculative_tokens=row.gamma, batch_size=row.batch,
                           context_len=row.context_len, output_len=row.output_len, kv_cache_dtype="fp8",
                           allow_uncertain=True)
    return recommend(req, catalogs=_sweep_catalogs(), calibration=profile, priors=priors).predicted.speedup


def sweep_ratio_errors(rows: list[DraftSizeSweepRow], profile: EngineProfile, priors=None) -> list[tuple[DraftSizeSweepRow, float, float]]:
    """(row, published ratio, predicted ratio) to its sweep's smallest draft, for every other row."""
    from specops.planner.catalog import load_catalogs

    cat = load_catalogs()
    out = []
    for key in dict.fromkeys(r.sweep for r in rows):
        sweep = sorted((r for r in rows if r.sweep == key), key=lambda r: cat.model(r.draft).params_b)
        base = sweep[0]
        pb = predicted_speedup(base, profile, priors)
        for r in sweep[1:]:
            out.append((r, r.speedup / base.speedup, predicted_speedup(r, profile, priors) / pb))
    return out


def fit_draft_layer_overhead(rows: list[DraftSizeSweepRow], profile: EngineProfile, priors=None) -> tuple[float, float]:
    """(best grid value, its median |ln ratio error|) of draft_layer_overhead_ms on these sweeps."""
    best = None
    for v in GRID:
        errs = sorted(abs(math.log(pub / pred)) for _, pub, pred in
                      sweep_ratio_errors(rows, profile.model_copy(update={"draft_layer_overhead_ms": v}), priors))
        med = errs[len(errs) // 2] if errs else float("nan")
        if best is None or med < best[1] - 1e-9:
            best = (v, med)
    return best


def source_errors(profile: EngineProfile, priors=None) -> dict[str, list[float]]:
    """|ln error| per draft-cost source at this profile's ``draft_layer_overhead_ms``: each draft-size sweep's
    ratios (:func:`sweep_ratio_errors`) and Liu et al.'s direct c = draft forward / target forward values
    (playbooks/data/draft_costs_2026-12.csv, evidence.predict_draft_cost), every source on the engine it ran on."""
    from specops.planner.evidence import load_draft_costs, predict_draft_cost

    out: dict[str, list[float]] = {}
    for r, pub, pred in sweep_ratio_errors(load_sweeps(), profile, priors):
        out.setdefault(r.source, []).append(abs(math.log(pub / pred)))
    for c in load_draft_costs():
        out.setdefault(c.source, []).append(abs(math.log(predict_draft_cost(c, profile=profile) / c.cost_ratio)))
    return out


FIXED_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0)
"""Values of ``draft_lm_overhead_ms`` (a fixed cost per draft-LM forward) tried with GRID's per-layer values."""


def _median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


def draft_cost_grid(profile: EngineProfile, priors=None) -> dict[tuple[float, float], dict[str, list[float]]]:
    """:func:`source_errors` at every (draft_layer_overhead_ms, draft_lm_overhead_ms) of GRID × FIXED_GRID."""
    return {(lay, fix): source_errors(profile.model_copy(update={"draft_layer_overhead_ms": lay,
                                                                 "draft_lm_overhead_ms": fix}), priors)
            for lay in GRID for fix in FIXED_GRID}


def best_draft_cost(grid: dict[tuple[float, float], dict[str, list[float]]], sources) -> tuple[float, float]:
    """The (per-layer, fixed) pair with the lowest sum of the sources' median errors (each source weighs one)."""
    return min(grid, key=lambda k: (sum(_median(grid[k][s]) for s in sources), k))


def loso_draft_cost(profile: EngineProfile, priors=None) -> dict[str, tuple[tuple[float, float], float, float]]:
    """For every draft-cost source: (the (per-layer, fixed) pair the *other* sources pick, the held-out source's
    median error at that pair, its error at ``profile``'s own pair). The graph-captured engines' sweeps (vLLM on
    MI300X, TensorRT-LLM on H200) and Liu et al.'s vLLM c values are pooled: the size-dependence of the sweeps
    pins the per-layer part, the c values the level."""
    grid = draft_cost_grid(profile, priors)
    sources = list(grid[(GRID[0], FIXED_GRID[0])])
    own = source_errors(profile, priors)
    out = {}
    for held in sources:
        pair = best_draft_cost(grid, [s for s in sources if s != held])
        out[held] = (pair, _median(grid[pair][held]), _median(own[held]))
    return out
