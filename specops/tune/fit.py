"""Fit the performance model to measured grid points, and predict with the fitted model.

**Acceptance** comes straight from the engine's counters, never from timing: for each drafter
(method × draft) ``p_i = Σ accepted_per_pos[i] / Σ drafts`` over every measured point whose γ
reaches position i (vLLM's per-position rates: P(first i+1 drafts accepted)). The share of decode
steps that carried a draft, ``f = Σ drafts / Σ decode steps`` (n-gram proposes nothing when the
prompt has no match), with decode steps = generated − requests − accepted (each request's first
token comes from prefill; each step yields 1 + accepted tokens).

**Step time.** Each point's observed time per scheduler step is ``TPOT × τ`` with
``τ = 1 + accepted / decode steps`` (tokens per sequence-step). It is modelled as linear in the
coefficients (:class:`~specops.tune.types.Coefficients`): a fixed overhead, a cost per running
sequence, a cost per verified token, and per method a fixed per-step cost of speculating (proposer,
rejection sampler, bookkeeping) plus its draft costs. The fit is least squares on the
relative error (rows weighted by 1/observed), coefficients constrained ≥ 0 by an active set (drop
the most negative, refit). numpy's ``lstsq`` when available, else the normal equations in pure
Python (both small: ≤ 3 + 2 per method unknowns). scipy is not needed.

**Synthetic cost runs.** Where vLLM's synthetic rejection sampler runs (:mod:`specops.tune.synthetic`),
tune measures each method × γ again with acceptance fixed by construction (α per position, see
:meth:`EngineConfig.synthetic_rates`). Then the step cost is fitted from the baseline and those runs only
(:func:`fit_model`, ``cost_fit="synthetic"``) and the acceptance from the standard runs only: how good the
drafter happens to be on a run can no longer leak into the cost coefficients. Without synthetic runs both
come from the standard runs (``cost_fit="joint"``).

**Tokens/s** of a finite closed-loop run is ``u_b · b · 1000 / TPOT`` where ``u_b`` (prefill,
ramp-up and tail of the run) is the median measured ratio at concurrency b.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict

from specops.errors import InputError
from specops.speculation import PROMPT_METHODS, solve_linear
from specops.tune.types import (
    Coefficients,
    DrafterAcceptance,
    EngineConfig,
    PointResult,
    PredictedPoint,
    Sample,
)

# --- per-sample derived quantities -------------------------------------------------------------------

def decode_steps(s: Sample) -> float | None:
    """Sequence-steps of decoding: generated − requests (prefill tokens) − accepted."""
    if s.generation_tokens is None:
        return None
    steps = s.generation_tokens - s.requests - s.num_accepted_tokens
    return steps if steps > 0 else None


def tau_of(s: Sample) -> float:
    """Tokens per sequence-step incl. the bonus token (1 without speculation)."""
    if s.num_drafts <= 0:
        return 1.0
    steps = decode_steps(s)
    return 1.0 + s.num_accepted_tokens / (steps if steps else s.num_drafts)


def draft_fraction_of(s: Sample) -> float:
    if s.num_drafts <= 0:
        return 0.0
    steps = decode_steps(s)
    return min(1.0, s.num_drafts / steps) if steps else 1.0


def step_ms_of(s: Sample) -> float:
    return s.tpot_ms * tau_of(s)


# --- acceptance --------------------------------------------------------------------------------------

def drafter_key(config: EngineConfig) -> tuple[str, str | None]:
    return config.method, config.draft


def fit_acceptance(points: list[PointResult]) -> list[DrafterAcceptance]:
    """Per-position acceptance per drafter, pooled over every measured point of that drafter."""
    acc: dict[tuple, dict] = {}
    for r in points:
        if r.status != "ok" or r.sample is None or r.point.config.method == "none" or \
                r.point.config.synthetic_rate is not None:  # synthetic runs measure the coin, not the drafter
            continue
        s = r.sample
        a = acc.setdefault(drafter_key(r.point.config), {"acc": defaultdict(float), "drafts": defaultdict(float),
                                                         "all_drafts": 0.0, "steps": 0.0})
        for i, n in enumerate(s.accepted_per_position):
            a["acc"][i] += n
            a["drafts"][i] += s.num_drafts
        a["all_drafts"] += s.num_drafts
        steps = decode_steps(s)
        a["steps"] += steps if steps else s.num_drafts
    out = []
    for (method, draft), a in sorted(acc.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        positions = sorted(i for i in a["drafts"] if a["drafts"][i] > 0)
        per_pos, drafts = [], []
        for i in positions:
            if i != len(per_pos):
                break  # positions must be contiguous from 0
            per_pos.append(a["acc"][i] / a["drafts"][i])
            drafts.append(a["drafts"][i])
        if not per_pos:
            continue
        frac = min(1.0, a["all_drafts"] / a["steps"]) if a["steps"] > 0 else 1.0
        out.append(DrafterAcceptance(method=method, draft=draft, per_position=per_pos, drafts=drafts, draft_fraction=frac))
    return out


def cumulative(acc: DrafterAcceptance, gamma: int) -> list[float]:
    """P(first k drafts accepted), k = 1..γ; beyond measured positions the last conditional rate continues."""
    rates = list(acc.per_position[:gamma])
    pp = acc.per_position
    ratio = pp[-1] / pp[-2] if len(pp) > 1 and pp[-2] > 0 else pp[-1]
    last = pp[-1]
    while len(rates) < gamma:
        last *= ratio
        rates.append(last)
    return rates


def find_acceptance(acceptance: list[DrafterAcceptance], config: EngineConfig) -> DrafterAcceptance | None:
    exact = [a for a in acceptance if a.method == config.method and a.draft == config.draft]
    same = [a for a in acceptance if a.method == config.method]
    return (exact or same or [None])[0]


# --- step-time regression -----------------------------------------------------------------------------

def _columns(methods: list[str]) -> list[tuple[str, str | None]]:
    cols: list[tuple[str, str | None]] = [("overhead", None), ("per_seq", None), ("per_token", None)]
    for m in methods:
        cols.append(("spec_step", m))
        if m in PROMPT_METHODS:
            cols.append(("draft_seq", m))
        else:
            cols += [("draft_tok", m), ("draft_tok_seq", m)]
    return cols


def _features(cols, method: str, gamma: int, b: int, f: float) -> list[float]:
    v = 1.0 + f * gamma
    row = []
    for kind, m in cols:
        row.append({"overhead": 1.0, "per_seq": float(b), "per_token": b * v}.get(kind, 0.0) if m is None else
                   (0.0 if m != method else {"spec_step": 1.0, "draft_seq": f * b, "draft_tok": f * gamma,
                                             "draft_tok_seq": f * gamma * b}[kind]))
    return row


def _lstsq(rows: list[list[float]], ys: list[float]) -> list[float]:
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy ships with the engine extras
        return _normal_equations(rows, ys)
    sol, *_ = np.linalg.lstsq(np.array(rows, dtype=float), np.array(ys, dtype=float), rcond=None)
    return [float(x) for x in sol]


def _normal_equations(rows: list[list[float]], ys: list[float]) -> list[float]:
    """(AᵀA + εI) x = Aᵀy by Gauss–Jordan; ε keeps rank-deficient fits finite (near min-norm)."""
    n = len(rows[0])
    ata = [[sum(r[i] * r[j] for r in rows) for j in range(n)] for i in range(n)]
    aty = [sum(r[i] * y for r, y in zip(rows, ys, strict=False)) for i in range(n)]
    eps = 1e-12 * max(1e-12, sum(ata[i][i] for i in range(n)))
    for i in range(n):
        ata[i][i] += eps
    return solve_linear(ata, aty, tiny=1e-300)


def nonnegative_lstsq(rows: list[list[float]], ys: list[float]) -> list[float]:
    """Least squares with x ≥ 0: solve, drop the most negative coefficient, repeat."""
    n = len(rows[0])
    active = list(range(n))
    while True:
        sub = [[r[i] for i in active] for r in rows]
        sol = _lstsq(sub, ys) if active else []
        worst = min(range(len(active)), key=lambda k: sol[k], default=None)
        if worst is None or sol[worst] >= -1e-12:
            x = [0.0] * n
            for k, i in enumerate(active):
                x[i] = max(0.0, sol[k])
            return x
        active.pop(worst)


def fit_coefficients(points: list[PointResult], acceptance: list[DrafterAcceptance] | None = None) -> Coefficients:
    ok = [r for r in points if r.status == "ok" and r.sample is not None]
    if not ok:
        raise InputError("no measured points to fit", "measure at least the baseline and one speculative configuration")
    methods = sorted({r.point.config.method for r in ok if r.point.config.method != "none"})
    cols = _columns(methods)
    rows, ys = [], []
    for r in ok:
        s, c = r.sample, r.point.config
        y = step_ms_of(s)
        f = draft_fraction_of(s) if c.method != "none" else 0.0
        row = _features(cols, c.method, c.gamma, r.point.concurrency, f)
        rows.append([v / y for v in row])  # relative error
        ys.append(1.0)
    x = nonnegative_lstsq(rows, ys)
    coef = Coefficients(overhead_ms=x[0], per_seq_ms=x[1], per_token_ms=x[2])
    for (kind, m), value in zip(cols[3:], x[3:], strict=False):
        {"spec_step": coef.spec_step_ms, "draft_seq": coef.draft_ms_per_seq, "draft_tok": coef.draft_ms_per_token,
         "draft_tok_seq": coef.draft_ms_per_token_seq}[kind][m] = value
    by_b: dict[int, list[float]] = defaultdict(list)
    for r in ok:
        s = r.sample
        by_b[r.point.concurrency].append(s.tokens_per_s / (r.point.concurrency * 1000.0 / s.tpot_ms))
    coef.utilization = {str(b): statistics.median(v) for b, v in sorted(by_b.items())}
    return coef


def cost_points(points: list[PointResult]) -> tuple[list[PointResult], str]:
    """The points the step cost is fitted from, and how: ``synthetic`` (baseline + synthetic runs) when
    any synthetic run was measured, else ``joint`` (every measured point)."""
    ok = [r for r in points if r.status == "ok" and r.sample is not None]
    synthetic = [r for r in ok if r.point.config.synthetic_rate is not None]
    if synthetic:
        return [r for r in ok if r.point.config.method == "none"] + synthetic, "synthetic"
    return ok, "joint"


def fit_model(points: list[PointResult]) -> tuple[Coefficients, list[DrafterAcceptance], str]:
    """(coefficients, acceptance, cost_fit) from measured points: acceptance from the standard runs'
    counters, the step cost from :func:`cost_points`."""
    acceptance = fit_acceptance(points)
    cost, how = cost_points(points)
    return fit_coefficients(cost, acceptance), acceptance, how


def fit_without(points: list[PointResult], left_out) -> tuple[Coefficients, list[DrafterAcceptance]] | None:
    """(coefficients, acceptance) fitted (:func:`fit_model`) on the ``ok`` points for which ``left_out(point)`` is
    false - the refit every leave-one-out check makes (specops.tune.report, specops.tune.residuals); None when the
    rest cannot be fitted (nothing else measured that method: no acceptance to predict from)."""
    rest = [r for r in points if r.status == "ok" and r.sample is not None and not left_out(r)]
    try:
        coef, acc, _ = fit_model(rest)
    except InputError:
        return None
    return coef, acc


# --- prediction ------------------------------------------------------------------------------------------

def utilization_at(coef: Coefficients, b: int) -> float:
    if not coef.utilization:
        return 1.0
    if str(b) in coef.utilization:
        return coef.utilization[str(b)]
    known = sorted((int(k), v) for k, v in coef.utilization.items())
    nearest = min(known, key=lambda kv: abs(math.log(kv[0]) - math.log(b)))
    return nearest[1]


def predict(coef: Coefficients, acceptance: list[DrafterAcceptance], config: EngineConfig, concurrency: int) -> PredictedPoint:
    """The fitted model's TPOT and tokens/s for one configuration at one concurrency."""
    b, m, g = concurrency, config.method, config.gamma
    if m == "none" or g == 0:
        tau, f = 1.0, 0.0
    elif config.synthetic_rate is not None:  # acceptance set by construction; draft fraction as measured
        acc = find_acceptance(acceptance, config)
        f = acc.draft_fraction if acc else 1.0
        tau = 1.0 + f * sum(config.synthetic_rates() or [])
    else:
        acc = find_acceptance(acceptance, config)
        if acc is None:
            raise InputError(f"the calibration has no measured acceptance for {m}",
                             f"tune with --methods including {m}, or predict another method")
        f = acc.draft_fraction
        tau = 1.0 + f * sum(cumulative(acc, g))
    step = coef.overhead_ms + coef.per_seq_ms * b + coef.per_token_ms * b * (1.0 + f * g)
    if m != "none":
        step += coef.spec_step_ms.get(m, 0.0)
    if m in PROMPT_METHODS:
        step += f * b * coef.draft_ms_per_seq.get(m, 0.0)
    elif m != "none":
        step += f * g * (coef.draft_ms_per_token.get(m, 0.0) + coef.draft_ms_per_token_seq.get(m, 0.0) * b)
    tpot = step / tau
    tps = utilization_at(coef, b) * b * 1000.0 / tpot if tpot > 0 else 0.0
    return PredictedPoint(config=config, concurrency=b, tau=tau, step_ms=step, tpot_ms=tpot, tokens_per_s=tps)
