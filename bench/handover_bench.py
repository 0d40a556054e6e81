"""The 2026-12 hand-over, run as a user runs it: every row of playbooks/data/heldout_2026-12.csv with a published
speedup, `specops recommend <recommend_args>` exactly as its column says, compared with the published speedup.
Prints numbers, asserts nothing.

(a) shipped: the real CLI entry point (specops.cli.main.main, in process) with ``-o json``. These rows are in the
    range calibration (specops.planner.uncertainty.calibration_rows) and some in the priors, so this is recall,
    not a forecast.
(b) nested: the same request (the recommend command's own option parsing, specops.api.recommend.build_request) with
    each row's source (specops.planner.replications.source_of: one author's repeats merged) held out of the
    acceptance priors and of the range calibration, as bench/uncertainty_harness.py's cases_section does; one fold
    per source, reused by its rows.

Figures: rows predicted (recommend exits 0) of rows with a speedup; coverage (published inside the printed 80%
range); median hi/lo; P(gain) > 0.5 where the published speedup is above 1, and P(gain) <= 0.5 where it is not;
median published / predicted. Split by the row's engine_class: the args carry no --engine, so SGLang and
TensorRT-LLM rows are predicted with vLLM's profile, and the ratio says how far that carries.

Figures (2026-12, 24 rows with a speedup), before -> after "predicted, not launched" (docs/recommend.md):
  shipped: predicted 20 -> 24, coverage 15 of 20 -> 19 of 24, median hi/lo 1.76 -> 1.76
  nested:  predicted 20 -> 24, coverage 14 of 20 -> 16 of 24, median hi/lo 2.32 -> 2.29
  then with the ceiling at τ's held-out 95% bound (uncertainty.CEILING_Z 2.04, 2026-12-07): shipped coverage 20 of
  24 at 1.77, nested 17 of 24 at 2.32
  (the four new rows nested: TRT-MTP-DSR1-FP4 and SGL-EAGLE2-Llama2-7B inside, SPX-DSpark-27B-N1/N64 above their
  ranges: 3.41x and 1.23x predicted against 2.85x and 1.16x). vLLM's profile on the other engines' rows, nested: median
  published/predicted 0.54 on SGLang's 3 (the model over-predicts them), 1.25 on TensorRT-LLM's 7 (under-predicts).

Run: .venv/bin/python bench/handover_bench.py [--shipped-only]
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import shlex
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DATA = REPO / "playbooks" / "data" / "heldout_2026-12.csv"


@dataclass
class Outcome:
    id: str
    engine_class: str
    published: float
    low: float | None = None
    high: float | None = None
    speedup: float | None = None
    p_gain: float | None = None
    method: str | None = None
    launch: bool | None = None
    error: str | None = None

    @property
    def predicted(self) -> bool:
        return self.error is None and self.low is not None


def handover_rows() -> list[dict]:
    with open(DATA, newline="", encoding="utf-8") as f:
        return [r for r in csv.DictReader(f) if r["published_speedup"].strip()]


def _launch_of(doc: dict) -> bool:
    """Whether the plan carries a launch (a withheld one has an empty argv)."""
    return bool(doc["vllm"].get("argv"))


def shipped(row: dict) -> Outcome:
    """`specops recommend <recommend_args> -o json` through the CLI's entry point."""
    from specops.cli.main import main

    out = Outcome(row["id"], row["engine_class"], float(row["published_speedup"]))
    stdout, stderr = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            main(["recommend", *shlex.split(row["recommend_args"]), "-o", "json"])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    if code != 0:
        out.error = f"exit {code}: {stderr.getvalue().strip()[:160]}"
        return out
    return _fill(out, json.loads(stdout.getvalue()))


def _fill(out: Outcome, doc: dict) -> Outcome:
    p = doc["predicted"]
    out.low, out.high, out.speedup, out.p_gain = p["speedup_low"], p["speedup_high"], p["speedup"], p["p_gain"]
    out.method, out.launch = doc["method"], _launch_of(doc)
    return out


def request_of(args: str):
    """The RecommendRequest `specops recommend ARGS` builds: the command's own option parsing, then build_request."""
    import typer

    from specops.api.recommend import build_request
    from specops.cli.main import _register_all, app

    _register_all()
    cmd = typer.main.get_command(app).commands["recommend"]
    params = cmd.make_context("recommend", shlex.split(args)).params
    keys = ("model", "params_b", "active_params_b", "quantization", "gpu", "gpus", "tpot_ms", "task", "context_len",
            "output_len", "temperature", "batch_size", "vllm_version", "objective", "method", "num_speculative_tokens",
            "draft", "min_p_gain", "qps", "engine", "kv_cache_dtype")
    values = {k: params[k] for k in keys}
    for flag in ("allow_uncertain", "parallel_drafting", "adaptive_verification"):
        values[flag] = params[flag] or None
    return build_request(**values)


_folds: dict[str, tuple] = {}


def fold(source: str):
    """(priors, range calibration) with every calibration row of ``source``'s source_of held out (cached)."""
    from specops.planner.evidence import cross_validate, fit_priors
    from specops.planner.replications import source_of
    from specops.planner.uncertainty import RangeCalibration, calibration_rows, points_from

    key = source_of(source)
    if key not in _folds:
        rows = calibration_rows()
        out = {r.source for r in rows if source_of(r.source) == key} | {source}
        train = [r for r in rows if r.source not in out]
        _folds[key] = (fit_priors(train, held_out=out),
                       RangeCalibration(points_from(cross_validate(train, unstated_gamma=True, held_out=out))))
    return _folds[key]


def nested(row: dict) -> Outcome:
    from specops.errors import SpecopsError
    from specops.planner import recommend

    out = Outcome(row["id"], row["engine_class"], float(row["published_speedup"]))
    try:
        priors, cal = fold(row["source"])
        plan = recommend(request_of(row["recommend_args"]), priors=priors, residuals=cal)
    except SpecopsError as exc:
        out.error = f"exit {exc.exit_code}: error: {exc.one_line()[:160]}"
        return out
    return _fill(out, json.loads(plan.model_dump_json()))


def _med(v) -> str:
    v = list(v)
    return f"{statistics.median(v):.2f}" if v else "-"


def summary(label: str, outs: list[Outcome]) -> None:
    ok = [o for o in outs if o.predicted]
    inside = sum(1 for o in ok if o.low <= o.published <= o.high)
    up = [o for o in ok if o.published > 1]
    down = [o for o in ok if o.published <= 1]
    agree_up = sum(1 for o in up if o.p_gain is not None and o.p_gain > 0.5)
    agree_down = sum(1 for o in down if o.p_gain is not None and o.p_gain <= 0.5)
    print(f"{label}: predicted {len(ok)} of {len(outs)}; coverage {inside} of {len(ok)}; "
          f"median hi/lo {_med(o.high / o.low for o in ok)}; P(gain)>0.5 on {agree_up} of {len(up)} published >1, "
          f"P(gain)<=0.5 on {agree_down} of {len(down)} published <=1; median published/predicted "
          f"{_med(o.published / o.speedup for o in ok)}; launch withheld on {sum(1 for o in ok if not o.launch)}")


def report(title: str, outs: list[Outcome]) -> None:
    print(f"\n== {title} ==")
    for o in outs:
        if o.predicted:
            mark = "in " if o.low <= o.published <= o.high else "OUT"
            print(f"  {o.id:26s} {o.engine_class:8s} published {o.published:5.2f}x  {mark} {o.low:5.2f}-{o.high:5.2f} "
                  f"(pick {o.method} {o.speedup:.2f}x, P(gain) {o.p_gain:.2f}){'' if o.launch else ' [launch withheld]'}")
        else:
            print(f"  {o.id:26s} {o.engine_class:8s} published {o.published:5.2f}x  not predicted: {o.error}")
    summary("all", outs)
    for cls in sorted({o.engine_class for o in outs}):
        summary(f"  engine_class {cls} (predicted with vLLM's profile)", [o for o in outs if o.engine_class == cls])


def main() -> None:
    import os

    os.environ.setdefault("SPECOPS_HOME", str(Path("/tmp") / "specops-handover-bench"))
    rows = handover_rows()
    t0 = time.perf_counter()
    report("(a) shipped model, through the CLI (recall: these rows are in the range calibration)",
           [shipped(r) for r in rows])
    print(f"  ({time.perf_counter() - t0:.1f} s)")
    if "--shipped-only" in sys.argv:
        return
    t0 = time.perf_counter()
    report("(b) nested: each row's source held out of the priors and the range calibration",
           [nested(r) for r in rows])
    print(f"  ({time.perf_counter() - t0:.1f} s, {len(_folds)} folds)")


if __name__ == "__main__":
    main()
