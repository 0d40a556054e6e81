"""Capacity benchmark (issue 44): the capacity search's per-replica rate against published capacity figures.

Each row of playbooks/data/capacity_2026-12.csv is a published serving measurement: requests/s (per GPU) that a
stated layout sustained at a stated TPOT (a mean TPOT printed by `vllm bench serve`-style tools at a fixed
concurrency, or an interactivity of X tok/s/user = 1000/X ms), with or without speculation. The prediction is what
`recommend --gpus-available` computes for one replica of that layout (planner/capacity.py ``replica_capacity``:
the highest rate whose plan meets TPOT ≤ the row's TPOT, prefill and decode sharing the GPU), pinned to the row's
method and engine profile, at most the row's concurrency in flight (the benchmark's --max-concurrency: a client cap,
not the server's), the best of the layouts the search tries for that many GPUs (tensor parallel; for a mixture of
experts also data-parallel attention with expert parallelism), divided by the GPUs. Nothing is fitted on these rows (the shipped step-cost model and
priors), so the figure is out-of-sample as it stands; no leave-one-source-out is needed.

Prints one line per row, per source, speculation's own gain where a source gives both at one TPOT
(``speculation gain: median |ln| ...``: the ratio with/without speculation, which the absolute error of the
step-cost model cancels out of), the tensor-parallel and the data-parallel-attention layouts' own figures, and
``capacity: median |ln| X over N rows``.

Run: .venv/bin/python bench/capacity_bench.py
"""

from __future__ import annotations

import csv
import math
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DATA = REPO / "playbooks" / "data" / "capacity_2026-12.csv"


def predict(row: dict) -> tuple[float, str, float, float | None]:
    """(req/s per GPU of the best layout, what limits it (layout), req/s per GPU with tensor parallelism only, with
    data-parallel attention only (None: not a mixture of experts))."""
    from specops.api.recommend import build_request, recommend_with_defaults
    from specops.planner.capacity import CapacityRequest, replica_capacity
    from specops.planner.load import at_rate

    values = dict(model=row["model"], gpu=row["gpu"], gpus=int(row["gpus"]), context_len=int(row["context_len"]),
                  output_len=int(row["output_len"]), engine=row["engine"], method=row["method"],
                  tpot_ms=float(row["tpot_ms"]))
    if row["params_b"]:
        values["params_b"] = float(row["params_b"])
    if row["quantization"]:
        values["quantization"] = row["quantization"]
    base = build_request(**values)
    cache: dict = {}

    def at_batch(req):
        key = req.model_dump_json()
        if key not in cache:
            cache[key] = recommend_with_defaults(req, use_registry=False)
        return cache[key].model_copy(deep=True)

    def plan_at(req):
        return at_batch(req) if req.qps is None else at_rate(req, at_batch)

    slo = CapacityRequest(gpus_available=int(row["gpus"]), qps=1.0, tpot_slo_ms=float(row["tpot_ms"]))
    # the layouts `recommend --gpus-available` tries for a replica of this many GPUs (planner/capacity.py _layouts):
    # tensor parallel, and for a mixture of experts data-parallel attention with expert parallelism; the best wins
    from specops.planner.capacity import _layouts
    from specops.planner.catalog import load_catalogs

    model = load_catalogs().model(base.model, params_b=base.params_b, quantization=base.quantization,
                                  active_params_b=base.active_params_b)
    gpus = int(row["gpus"])
    best, tp_only, dp_only = (0.0, "none fits", ""), 0.0, None
    for g, dp in _layouts(model, gpus - 1, gpus):
        req = base.model_copy(update={"data_parallel_size": dp, "expert_parallel": bool(model.is_moe and g > 1)})
        cap, why, _ = replica_capacity(plan_at, req, slo,
                                       max_batch=int(row["concurrency"]) if row["concurrency"] else None)
        best = max(best, (cap, why, "DP" if dp > 1 else "TP"))
        tp_only = cap if dp == 1 else tp_only
        dp_only = cap / gpus if dp > 1 else dp_only
    return best[0] / gpus, f"{best[1]} ({best[2]})", tp_only / gpus, dp_only


def main() -> None:
    rows = list(csv.DictReader(DATA.open(encoding="utf-8")))
    errs: list[tuple[dict, float]] = []
    tp_errs: list[float] = []
    dp_errs: list[float] = []
    print(f"{'id':4} {'model':38} {'gpu':8} {'method':7} {'TPOT':>6} {'pub/GPU':>8} {'pred/GPU':>9} {'ln':>6}  limit")
    for row in rows:
        try:
            pred, why, tp_pred, dp_pred = predict(row)
        except Exception as exc:  # noqa: BLE001 - a row the planner refuses is reported, not scored
            print(f"{row['id']:4} {row['model'][:38]:38} refused: {exc}")
            continue
        pub = float(row["published_rps_per_gpu"])
        ln = math.log(pred / pub) if pred > 0 else math.inf
        errs.append((row, ln))
        tp_errs.append(abs(math.log(tp_pred / pub)) if tp_pred > 0 else math.inf)
        if dp_pred is not None:
            dp_errs.append(math.log(dp_pred / pub) if dp_pred > 0 else math.inf)
        print(f"{row['id']:4} {row['model'][:38]:38} {row['gpu']:8} {row['method']:7} {float(row['tpot_ms']):6.2f} "
              f"{pub:8.2f} {pred:9.2f} {ln:+6.2f}  {why}")
    by_source: dict[str, list[float]] = {}
    for row, ln in errs:
        by_source.setdefault(row["source"].split(",")[0], []).append(abs(ln))
    for src, v in by_source.items():
        print(f"  {src}: median |ln| {statistics.median(v):.2f} over {len(v)} rows")
    spec = [abs(ln) for row, ln in errs if row["method"] != "none"]
    none = [abs(ln) for row, ln in errs if row["method"] == "none"]
    if spec:
        print(f"  with speculation: median |ln| {statistics.median(spec):.2f} over {len(spec)} rows; "
              f"without: {statistics.median(none):.2f} over {len(none)}")
    # speculation's own gain: rows of one source, model, GPU and TPOT with and without speculation
    keyed: dict[tuple, dict[str, tuple[float, float]]] = {}
    for row, ln in errs:
        key = (row["source"], row["model"], row["gpu"], row["tpot_ms"], row["context_len"], row["output_len"])
        keyed.setdefault(key, {})["none" if row["method"] == "none" else "spec"] = (float(row["published_rps_per_gpu"]), ln)
    pairs = [(k, v) for k, v in keyed.items() if len(v) == 2 and math.isfinite(v["spec"][1]) and math.isfinite(v["none"][1])]
    for k, v in pairs:
        pub = v["spec"][0] / v["none"][0]
        pred = pub * math.exp(v["spec"][1] - v["none"][1])
        print(f"  gain {k[1]} on {k[2]} at TPOT {k[3]} ms: published {pub:.2f}x, predicted {pred:.2f}x "
              f"(ln {math.log(pred / pub):+.2f})")
    if pairs:
        gains = [abs(v["spec"][1] - v["none"][1]) for _, v in pairs]
        print(f"speculation gain: median |ln| {statistics.median(gains):.2f} over {len(gains)} pairs")
    print(f"  tensor parallel only (no data-parallel attention layout): median |ln| {statistics.median(tp_errs):.2f} "
          f"over {len(tp_errs)} rows")
    if dp_errs:
        print(f"  data-parallel attention layout only (MoE rows): median |ln| "
              f"{statistics.median(abs(e) for e in dp_errs):.2f} over {len(dp_errs)} rows "
              f"(signed: {', '.join(f'{e:+.2f}' for e in dp_errs)})")
    allv = [abs(ln) for _, ln in errs]
    print(f"capacity: median |ln| {statistics.median(allv):.2f} over {len(allv)} rows from {len(by_source)} sources "
          "(goal ≤ 0.30 on ≥ 6 rows from ≥ 3 sources; nothing fitted on them)")


if __name__ == "__main__":
    main()
