"""Planner benchmark: prints numbers, asserts nothing about time.

1. Leave-one-source-out error of the performance model on the published rows that have a speedup
   (specops.planner.evidence.cross_validate): median |ln(pred/published)| overall, on serving-engine
   rows, per method, per engine and per batch range; how many published speedups fall inside the
   range recommend would print (built without their own source); the worst rows and why.
2. The γ picked for Llama-3.1-8B + EAGLE-3 at batch 1 on one H100.
3. Cold start of `specops --help` (median of several runs).
4. Wall time of one `recommend` call in-process (first call incl. loading playbooks, then warm).

Run: .venv/bin/python bench/planner_bench.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from specops.planner.evidence import (  # noqa: E402
    SERVING_ENGINES,
    batch_range,
    cross_validate,
    sweep_points,
)
from specops.planner.perfmodel import EAGER_PROFILE, VLLM_PROFILE  # noqa: E402
from specops.planner.priors import ENGINES  # noqa: E402


def why(res) -> str:
    row, bits = res.row, []
    if row.tau:
        bits.append(f"τ published {row.tau:.2f}")
    if row.structure == "tree":
        bits.append(f"tree draft ({row.tree_tokens} tokens verified per step)")
    if row.engine not in SERVING_ENGINES:
        bits.append(f"{row.engine} harness (overheads assumed, not measured)")
    if res.moe:
        bits.append("MoE target")
    if row.batch > 16:
        bits.append(f"batch {row.batch}")
    return "; ".join(bits) or "step-time model"


def _line(label: str, errs: list[float]) -> str:
    if not errs:
        return f"{label:<28} {0:>4}      -      -     -"
    return (f"{label:<28} {len(errs):>4} {statistics.median(errs):6.3f} {statistics.mean(errs):6.3f} "
            f"{sum(e <= 0.2 for e in errs):>3}/{len(errs)}")


def main() -> None:
    results = cross_validate()
    print("== leave-one-source-out |ln(predicted/published)| on published rows (playbooks/data) ==")
    print(f"{'rows':<28} {'n':>4} {'median':>6} {'mean':>6} {'<=0.20':>7}")
    print(_line("all", [r.error for r in results]))
    serving = [r.error for r in results if r.row.engine in SERVING_ENGINES]
    print(_line("serving engines (goal <=0.20)", serving))
    print("-- per method --")
    for m in sorted({r.row.method for r in results}):
        print(_line(m, [r.error for r in results if r.row.method == m]))
    print("-- per engine --")
    for eng in ENGINES:
        print(_line(eng, [r.error for r in results if r.row.engine == eng]))
    print("-- per batch range (serving engines) --")
    for rng in ("1-2", "3-16", "17-64", "65+"):
        print(_line(rng, [r.error for r in results if r.row.engine in SERVING_ENGINES and batch_range(r.row.batch) == rng]))
    print("-- ranges (coverage, width, P(gain), regret): bench/uncertainty_bench.py --")
    print("-- worst rows --")
    for r in sorted(results, key=lambda r: r.error, reverse=True)[:8]:
        print(f"{r.error:.2f}  {r.row.source[:50]} ({r.row.location[:40]}): published {r.row.speedup:.2f}x, "
              f"predicted {r.predicted:.2f}x — {why(r)}")

    batch_section(results)
    engine_section(results)
    drafts_moe_section(results)

    from specops.planner import RecommendRequest, recommend

    t0 = time.perf_counter()
    plan = recommend(RecommendRequest(model="meta-llama/Llama-3.1-8B-Instruct", gpu="H100", method="eagle3"))
    cold = time.perf_counter() - t0
    print("\n== Llama-3.1-8B + EAGLE-3, batch 1, one H100 ==")
    print(f"γ = {plan.num_speculative_tokens}  predicted {plan.predicted.speedup:.2f}x  τ "
          f"{plan.predicted.mean_acceptance_length:.2f}  TPOT {plan.predicted.tpot_ms:.2f} ms "
          f"(baseline {plan.predicted.baseline_tpot_ms:.2f})  prior: {plan.predicted.acceptance_prior_source}")

    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        subprocess.run([str(REPO / ".venv" / "bin" / "specops"), "--help"], capture_output=True, check=True)
        times.append(time.perf_counter() - t0)
    print("\n== cold start of `specops --help` ==")
    print(f"median {statistics.median(times):.3f} s over {len(times)} runs (min {min(times):.3f}, max {max(times):.3f})")

    warm = []
    for batch in (1, 16, 64):
        t0 = time.perf_counter()
        recommend(RecommendRequest(model="llama-3.1-8b-instruct", gpu="H100", batch_size=batch))
        warm.append(time.perf_counter() - t0)
    print("\n== one `recommend` call, in-process ==")
    print(f"first call (loads playbooks, calibrates): {cold:.3f} s; warm calls (batch 1/16/64): "
          + ", ".join(f"{t:.3f}" for t in warm) + " s")


def drafts_moe_section(results) -> None:
    """Issue 18: MoE baselines against published TPOTs, the MoE and draft-model rows' errors, and the
    properties of tests/planner/test_drafts_moe.py."""
    import math

    from specops.planner.evidence import load_baselines, predict_baseline
    from specops.planner.priors import default_priors

    print("\n== drafts and MoE (issue 18) ==")
    for row in load_baselines():
        pred = predict_baseline(row)
        pub = f"{row.tpot_ms:.2f}" if row.tpot_ms else "-"
        err = f"{abs(math.log(pred / row.tpot_ms)):.2f}" if pred and row.tpot_ms else "-"
        shown = f"{pred:.2f}" if pred else "-"
        print(f"   baseline {row.target:<16} {row.gpus}x {row.gpu:<10} {row.engine:<7} published {pub:>6} ms "
              f"predicted {shown:>6} ms  |ln| {err:>4}  {'fitted' if row.use else 'shown only'}")
    print(_line("MoE-target rows", [r.error for r in results if r.moe]))
    print(_line("draft_model rows", [r.error for r in results if r.row.method == "draft_model"]))
    from specops.planner.evidence import load_draft_costs, predict_draft_cost
    from specops.planner.perfmodel import VLLM_PROFILE

    costs = load_draft_costs()

    def cost_err(x: float) -> float:
        p = VLLM_PROFILE.model_copy(update={"draft_layer_overhead_ms": x})
        return sum(abs(math.log(predict_draft_cost(r, profile=p) / r.cost_ratio)) for r in costs)

    best = min((0.0, 0.02, 0.04, 0.06, 0.07, 0.08, 0.09, 0.1, 0.12, 0.15), key=cost_err)
    for r in costs:
        print(f"   draft cost c {r.target:<34} {r.gpus}x {r.gpu}: published {r.cost_ratio:.3f} predicted "
              f"{predict_draft_cost(r):.3f} (without the per-layer term "
              f"{predict_draft_cost(r, profile=VLLM_PROFILE.model_copy(update={'draft_layer_overhead_ms': 0})):.3f})")
    print(f"   draft_layer_overhead_ms fitted on {len(costs)} published c values: {best} ms/layer "
          f"(shipped: {VLLM_PROFILE.draft_layer_overhead_ms})")
    pri = default_priors()
    print(f"   draft-size slope {pri.draft_slope:.3f} α per e-fold of draft/target size ({pri.slope_source})")
    from tests.planner.test_drafts_moe import KNOWN_FAILING, PROPERTIES

    for prop in PROPERTIES:
        bad = prop()
        known = " (known, xfail)" if prop in KNOWN_FAILING else ""
        print(f"   {'holds' if not bad else 'FAILS'}  {prop.__name__}{known}" + (f": {bad[0]}" if bad else ""))


GRID = (0.0, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05)


def _bare():
    return (VLLM_PROFILE.model_copy(update={"token_overhead_ms": 0.0, "sampler_bytes": 0.0}),
            EAGER_PROFILE.model_copy(update={"sampler_bytes": 0.0}))


def batch_section(results) -> None:
    """The batch terms (issue "Predictions at batch"): errors on batch rows without and with them, the
    fit of the per-token overhead with each sweep source left out, and the model's properties."""
    print("\n== batch: serving-engine rows by batch range, without -> with the batch terms ==")
    before = cross_validate(profiles=_bare())
    for rng in ("1-2", "3-16", "17-64", "65+"):
        a = [r.error for r in before if r.row.engine in SERVING_ENGINES and batch_range(r.row.batch) == rng]
        b = [r.error for r in results if r.row.engine in SERVING_ENGINES and batch_range(r.row.batch) == rng]
        print(f"{rng:<6} n={len(b):>3}  median {statistics.median(a):.3f} -> {statistics.median(b):.3f}  "
              f"mean {statistics.mean(a):.3f} -> {statistics.mean(b):.3f}")
    sw_before, sw_after = sweep_points(before), sweep_points(results)
    print(f"within-sweep ratios speedup(b)/speedup(b_min), {len(sw_after)} points: median |ln error| "
          f"{statistics.median(p.error for p in sw_before):.3f} -> {statistics.median(p.error for p in sw_after):.3f}")
    for p in sw_after:
        print(f"   {p.source[:38]:<38} {p.method:<7} b{p.batch_ref}->b{p.batch}: published {p.published_ratio:.2f} "
              f"predicted {p.predicted_ratio:.2f}")
    print("-- token_overhead_ms fitted on the sweeps (grid), each sweep source left out in turn --")
    by_value = {}
    for v in GRID:
        prof = (VLLM_PROFILE.model_copy(update={"token_overhead_ms": v}), EAGER_PROFILE)
        by_value[v] = sweep_points(cross_validate(profiles=prof))
    full, per_source, held = grid_fit({v: [(p.source, p.error) for p in pts] for v, pts in by_value.items()})
    for src, (fit, errs) in per_source.items():
        print(f"   without {src[:44]:<44} -> {fit * 1000:.1f} µs/token; its {len(errs)} points: "
              f"median error {statistics.median(errs):.3f}")
    print(f"all sources: {full * 1000:.1f} µs/token (shipped: {VLLM_PROFILE.token_overhead_ms * 1000:.1f}); "
          f"held-out median error {statistics.median(held):.3f}")
    print("-- properties over the grid (tests/planner/test_batch_properties.py) --")
    from tests.planner.test_batch_properties import PROPERTIES

    for prop in PROPERTIES:
        bad = prop()
        print(f"   {'holds' if not bad else 'FAILS'}  {prop.__name__}" + (f": {len(bad)} cases, e.g. {bad[0]}" if bad else ""))


STEP_GRID = (0.2, 0.4, 0.6, 0.9, 1.2, 1.6, 2.0, 3.0, 4.0)


def engine_section(results) -> None:
    """Per-engine profiles (`recommend --engine`): errors per engine with one vLLM/eager pair for all rows
    (before) and with each engine's profile (after), and the step-overhead fit per engine with each of
    its sources left out in turn (the honest figure: the shipped fit saw every row)."""
    print("\n== engines: median |ln error| per engine, one vLLM/eager profile -> each engine's own ==")
    before = cross_validate(profiles=(VLLM_PROFILE, EAGER_PROFILE))
    for eng in ("vllm", "sglang", "tensorrt-llm", "hf"):
        a = [r.error for r in before if r.row.engine == eng]
        b = [r.error for r in results if r.row.engine == eng]
        print(f"{eng:<13} n={len(b):>3}  {statistics.median(a):.3f} -> {statistics.median(b):.3f}")
    errs = {}
    for g in STEP_GRID:
        prof = VLLM_PROFILE.model_copy(update={"step_overhead_ms": g, "draft_step_overhead_ms": 0.2 * g})
        errs[g] = cross_validate(profiles=(prof, prof))
    for eng in ("vllm", "sglang", "tensorrt-llm"):
        full, _, held = grid_fit({g: [(r.row.source, r.error) for r in res if r.row.engine == eng]
                                  for g, res in errs.items()})
        same = [r.error for r in errs[0.6] if r.row.engine == eng]
        print(f"   step overhead fitted on {eng}'s {len(same)} rows: {full} ms; each source held out: median error "
              f"{statistics.median(held):.3f} (vLLM's 0.6 ms on the same rows: {statistics.median(same):.3f})")


def grid_fit(errors: dict) -> tuple:
    """``errors``: grid value -> [(source, |error|)] over the same points. Returns the value with the lowest
    median error on every point, {source: (value fitted without it, its points' errors)}, and all those
    held-out errors."""
    points = next(iter(errors.values()))
    per_source, held = {}, []
    for src in sorted({s for s, _ in points}):
        if all(s == src for s, _ in points):
            continue  # nothing left to fit on
        fit = min(errors, key=lambda v: statistics.median(e for s, e in errors[v] if s != src))
        mine = [e for s, e in errors[fit] if s == src]
        per_source[src] = (fit, mine)
        held += mine
    full = min(errors, key=lambda v: statistics.median(e for _, e in errors[v]))
    return full, per_source, held

if __name__ == "__main__":
    main()
