"""`specops recommend --sweep VAR=v1,v2,...`: one plan per value of one input, and the picture of it.

- ``parse_sweep``: ``"batch=1,8,64,256"`` -> (variable, values), refused with a fix when malformed.
- ``run_sweep``: a :class:`Sweep` - for each value the plan recommend makes there (its pick, γ, speedup with
  its range, TPOT, whether it fits), or the one-line reason that value was refused.
- ``sweep_svg`` / ``sweep_html``: the chosen plan's speedup against the swept variable with its range as a
  band, the break-even line (1x: no speculation), and the best speculative alternative where the pick is none.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from pydantic import Field

from specops.errors import InputError, SpecopsError, unknown
from specops.models import Strict

if TYPE_CHECKING:
    from specops.planner.types import Plan

VARIABLES = {"batch": "batch_size", "gamma": "num_speculative_tokens", "context": "context_len", "qps": "qps"}
"""--sweep VAR -> the request field it sets (the flags: --batch-size, --num-speculative-tokens, --context-len, --qps)."""
LABELS = {"batch": "batch size (concurrent requests)", "gamma": "γ (num_speculative_tokens)",
          "context": "context tokens per request", "qps": "request rate (req/s)"}
MAX_POINTS = 32
ALT = "best speculative alternative where the pick is no speculation"


class SweepRow(Strict):
    """One value of the swept variable and what recommend picks there (``error`` when it refused the value)."""

    value: float = Field(description="The swept variable's value.")
    method: str | None = Field(None, description="The pick (none: no speculation).")
    num_speculative_tokens: int | None = Field(None, description="γ of the pick.")
    kv_cache_dtype: str | None = None
    speedup: float | None = Field(None, description="Predicted speedup over no speculation.")
    speedup_low: float | None = Field(None, description="Lower end of the speedup's range (None: no range).")
    speedup_high: float | None = Field(None, description="Upper end of the speedup's range.")
    p_gain: float | None = Field(None, description="P(speedup > 1) where the planner gives it.")
    tpot_ms: float | None = None
    baseline_tpot_ms: float | None = None
    effective_batch: int | None = Field(None, description="The batch the prediction is for (what fits).")
    fits: bool | None = Field(None, description="Whether the asked batch fits in memory.")
    best_speculative: str | None = Field(None, description="Where the pick is none: the best speculative "
                                         "alternative, e.g. 'eagle3 γ=4 2.17x (0.97-5.42)'.")
    best_speculative_speedup: float | None = None
    best_speculative_low: float | None = None
    best_speculative_high: float | None = None
    error: str | None = Field(None, description="Why recommend refused this value (one line with its fix).")
    plan: Any = Field(None, description="The full plan at this value (as `recommend -o json` prints it).")


class Sweep(Strict):
    """Plans over the values of one input, everything else as given."""

    variable: str = Field(description="batch, gamma, context or qps.")
    flag: str = Field(description="The recommend flag the variable sets.")
    model: str | None = None
    gpu: str | None = None
    gpus: int | None = None
    points: list[SweepRow]


def parse_sweep(text: str) -> tuple[str, list[float]]:
    """``VAR=v1,v2,...`` -> (VAR, values in the order given, duplicates dropped)."""
    var, sep, raw = (text or "").partition("=")
    var = var.strip().lower()
    if not sep or not raw.strip():
        raise InputError(f'--sweep "{text}" is not VAR=v1,v2,...', "e.g. --sweep batch=1,8,64,256 (VAR: "
                         + ", ".join(VARIABLES) + ")")
    if var not in VARIABLES:
        raise unknown("sweep variable", var, VARIABLES, fix="use --sweep " + "|".join(VARIABLES) + "=v1,v2,...")
    values: list[float] = []
    for part in raw.split(","):
        part = part.strip()
        try:
            v = float(part) if var == "qps" else int(part)
        except ValueError:
            kind = "a number" if var == "qps" else "a whole number"
            raise InputError(f'--sweep {var}: "{part}" is not {kind}', f"give {var} values as {kind}s, e.g. "
                             + ("--sweep qps=0.5,2,8" if var == "qps" else f"--sweep {var}=1,8,64")) from None
        if not math.isfinite(v) or v <= 0:
            raise InputError(f"--sweep {var}: {part} must be a positive number", f"give {var} values above 0")
        if v not in values:
            values.append(v)
    if len(values) > MAX_POINTS:
        raise InputError(f"--sweep {var} has {len(values)} values; at most {MAX_POINTS} are planned in one run",
                         f"give at most {MAX_POINTS} values")
    return var, values


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def run_sweep(values: dict[str, Any], sweep: str, *, calibration: str | None = None, plan_fn=None) -> Sweep:
    """One plan per swept value. ``values``: recommend's other inputs (as for ``build_request``);
    ``plan_fn(request, calibration)`` makes a plan (default: what this installation learned,
    :func:`specops.api.recommend.recommend_with_defaults`). A value recommend refuses is kept with its reason;
    when every value is refused, the first refusal is raised (it is about the other inputs)."""
    from specops.api.recommend import build_request, recommend_with_defaults

    var, points = parse_sweep(sweep)
    field = VARIABLES[var]
    clashing = [f for f in (field, *(("batch_size",) if field == "qps" else ("qps",) if field == "batch_size" else ()))
                if values.get(f) is not None]
    if clashing:
        raise InputError(f"--sweep {var} and {_flag(clashing[0])} both set {var if clashing[0] == field else 'the batch'}",
                         f"drop {_flag(clashing[0])} (the sweep sets {_flag(field)} at each point)")
    plan_fn = plan_fn or (lambda req, cal: recommend_with_defaults(req, calibration=cal))
    out: list[SweepRow] = []
    errors: list[SpecopsError] = []
    head: dict[str, Any] = {}
    for v in points:
        try:
            plan = plan_fn(build_request(**{**values, field: v}), calibration)
        except SpecopsError as exc:
            errors.append(exc)
            out.append(SweepRow(value=v, error=exc.one_line()))
            continue
        head = head or {"model": plan.model, "gpu": plan.gpu, "gpus": plan.gpus}
        out.append(point_of(v, plan))
    if len(errors) == len(points):
        raise errors[0]
    return Sweep(variable=var, flag=_flag(field), points=out, **head)


def point_of(value: float, plan: Plan) -> SweepRow:
    p = plan.predicted
    best = None
    if plan.method == "none":
        spec = [a for a in plan.alternatives if a.method != "none"]
        best = max(spec, key=lambda a: a.speedup) if spec else None
    return SweepRow(
        value=value, method=plan.method, num_speculative_tokens=plan.num_speculative_tokens,
        kv_cache_dtype=plan.kv_cache_dtype, speedup=p.speedup, speedup_low=p.speedup_low, speedup_high=p.speedup_high,
        p_gain=getattr(p, "p_gain", None), tpot_ms=p.tpot_ms, baseline_tpot_ms=p.baseline_tpot_ms,
        effective_batch=p.effective_batch, fits=plan.memory.fits,
        best_speculative=(f"{best.method} γ={best.num_speculative_tokens} {best.speedup:.2f}x"
                          + (f" ({best.speedup_low:.2f}-{best.speedup_high:.2f})" if best.speedup_low is not None else "")
                          if best else None),
        best_speculative_speedup=best.speedup if best else None,
        best_speculative_low=best.speedup_low if best else None, best_speculative_high=best.speedup_high if best else None,
        plan=plan.model_dump(mode="json"),
    )


# --- the picture ---------------------------------------------------------------------------------

def _x(sweep: Sweep, v: float) -> float:
    """Batch, context and rate sweeps span orders of magnitude: they are drawn on a log2 axis."""
    return math.log2(v) if sweep.variable in ("batch", "context", "qps") else v


def _label(v: float) -> str:
    return f"{v:g}" if v < 10_000 else f"{v / 1024:g}K"


def sweep_svg(sweep: Sweep) -> str:
    """The sweep as an inline SVG (no script): the pick's speedup (dots, with its range as a band and
    whiskers), the best speculative alternative where the pick is no speculation (hollow markers), and
    the break-even line at 1x."""
    from specops.checks.svg import Point, scatter

    ok = [p for p in sweep.points if p.error is None and p.speedup is not None]
    pick = [Point(x=_x(sweep, p.value), y=p.speedup,
                  tip=f"{sweep.variable}={_label(p.value)}: {_what(p)} {p.speedup:.2f}x"
                      + (f" ({p.speedup_low:.2f}-{p.speedup_high:.2f})" if p.speedup_low is not None else "")
                      + f", TPOT {p.tpot_ms:.1f} ms",
                  ylow=p.speedup_low, yhigh=p.speedup_high) for p in ok]
    band = [(_x(sweep, p.value), p.speedup_low, p.speedup_high) for p in ok if p.speedup_low is not None]
    alt = [Point(x=_x(sweep, p.value), y=p.best_speculative_speedup,
                 tip=f"{sweep.variable}={_label(p.value)}: not picked: {p.best_speculative}",
                 ylow=p.best_speculative_low, yhigh=p.best_speculative_high)
           for p in ok if p.best_speculative_speedup is not None]
    where = f"{sweep.model.rstrip('/').split('/')[-1]} on {sweep.gpus}× {sweep.gpu}" if sweep.model else "recommend"
    ticks = [(_x(sweep, p.value), _label(p.value)) for p in sweep.points]
    series = {"recommended pick": pick}
    if alt:
        series[ALT] = alt
    return scatter(f"Predicted speedup vs {sweep.variable}, {where}", series,
                   LABELS[sweep.variable] + (" (log scale)" if sweep.variable in ("batch", "context", "qps") else ""),
                   "speedup over no speculation (x)", hlines=[("break-even (no speculation)", 1.0)],
                   bands={"recommended pick": band} if band else None, xtick_labels=ticks,
                   colors={"recommended pick": "#2563eb", ALT: "#f97316"},
                   width=640, height=320, empty="no value of the sweep could be planned")


def _what(p: SweepRow) -> str:
    return "no speculation" if p.method == "none" else f"{p.method} γ={p.num_speculative_tokens}"


def sweep_html(sweep: Sweep) -> str:
    """A self-contained page: the plot and the table of points."""
    from html import escape

    rows = []
    for p in sweep.points:
        if p.error is not None:
            rows.append(f"<tr><td>{_label(p.value)}</td><td colspan='5'>refused: {escape(p.error)}</td></tr>")
            continue
        rng = f"{p.speedup_low:.2f}-{p.speedup_high:.2f}" if p.speedup_low is not None else "-"
        rows.append(f"<tr><td>{_label(p.value)}</td><td>{escape(_what(p))}</td><td>{p.speedup:.2f}x</td><td>{rng}</td>"
                    f"<td>{p.tpot_ms:.1f}</td><td>{'yes' if p.fits else 'no'}</td></tr>")
    title = escape(f"specops recommend --sweep {sweep.variable}: {sweep.model} on {sweep.gpus}× {sweep.gpu}")
    return ("<!doctype html><html><head><meta charset='utf-8'><title>" + title + "</title><style>"
            "body{font-family:sans-serif;margin:24px}table{border-collapse:collapse}td,th{border:1px solid #d1d5db;"
            "padding:4px 8px;text-align:right}</style></head><body><h1 style='font-size:18px'>" + title + "</h1>"
            + sweep_svg(sweep) + "<table><tr><th>" + escape(sweep.variable) + "</th><th>pick</th><th>speedup</th>"
            "<th>range</th><th>TPOT ms</th><th>fits</th></tr>" + "".join(rows) + "</table></body></html>\n")
