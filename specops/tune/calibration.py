"""Named calibrations: the fitted coefficients, the per-drafter acceptance and the points behind them,
kept as ``$SPECOPS_HOME/calibrations/<name>.json`` (the registry has no calibration table yet), plus a
``calibration`` event in the registry when one is reachable.

:func:`fit_calibration` builds one from points; :func:`predict_with` uses it; :func:`to_planner`
turns it into what ``specops.planner.recommend`` accepts today (an ``EngineProfile`` and measured
acceptance priors), an approximation documented in docs/tune.md.
"""

from __future__ import annotations

import json
import re
import statistics
from datetime import datetime, timezone
from pathlib import Path

from specops.errors import InputError, NotFoundError, did_you_mean
from specops.settings import specops_home
from specops.tune.fit import fit_acceptance, fit_coefficients, predict
from specops.tune.types import Calibration, EngineConfig, PointResult, PredictedPoint

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def calibrations_dir() -> Path:
    return specops_home() / "calibrations"


def check_name(name: str) -> str:
    if not NAME.match(name or ""):
        raise InputError(f'calibration name "{name}" is not valid',
                         "use letters, digits, '.', '_' and '-' (at most 100 characters)")
    return name


def fit_calibration(points: list[PointResult], *, name: str, hardware: str, model: str, engine_version: str,
                    workload: str, run_id: str | None = None) -> Calibration:
    ok = [r for r in points if r.status == "ok" and r.sample is not None]
    acceptance = fit_acceptance(ok)
    coef = fit_coefficients(ok, acceptance)
    errors = []
    for r in ok:
        try:
            p = predict(coef, acceptance, r.point.config, r.point.concurrency)
        except InputError:
            continue
        errors.append(abs(p.tokens_per_s - r.sample.tokens_per_s) / r.sample.tokens_per_s)
    return Calibration(
        name=check_name(name), created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        hardware=hardware, model=model, engine_version=engine_version, workload=workload, run_id=run_id,
        coefficients=coef, acceptance=acceptance, samples=len(ok), points=list(points),
        fit_residual_median=statistics.median(errors) if errors else None)


def save_calibration(cal: Calibration) -> Path:
    d = calibrations_dir()
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{check_name(cal.name)}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(cal.model_dump_json(indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    _record_event(cal)
    return path


def _record_event(cal: Calibration) -> None:
    """Best effort: the calibration file is the record; the event makes it visible in the log."""
    try:
        from specops.registry import open_registry

        open_registry().record_event(
            "calibration", cal.name, f"calibration {cal.name}: {cal.samples} points, {cal.model} on {cal.hardware}",
            actor="specops tune", data={"path": str(calibrations_dir() / f"{cal.name}.json"), "run_id": cal.run_id,
                                        "engine_version": cal.engine_version, "workload": cal.workload})
    except Exception:  # noqa: BLE001 - the registry being unavailable must not lose a finished fit
        pass


def list_calibrations() -> list[str]:
    d = calibrations_dir()
    return sorted(p.stem for p in d.glob("*.json")) if d.is_dir() else []


def load_calibration(name: str) -> Calibration:
    path = calibrations_dir() / f"{check_name(name)}.json"
    if not path.is_file():
        known = list_calibrations()
        raise NotFoundError(f'no calibration "{name}".{did_you_mean(name, known)}',
                            "run `specops tune ... --name NAME` first" + (f" (known: {', '.join(known)})" if known else ""))
    return Calibration.model_validate_json(path.read_text(encoding="utf-8"))


def newest_calibration(model: str | None = None) -> Calibration | None:
    """The newest stored calibration (for ``model`` if given)."""
    found = []
    for name in list_calibrations():
        try:
            cal = load_calibration(name)
        except Exception:  # noqa: BLE001 - a broken file is skipped, not fatal
            continue
        if model is None or cal.model == model:
            found.append(cal)
    return max(found, key=lambda c: c.created_at, default=None)


def predict_with(cal: Calibration, config: EngineConfig, concurrency: int) -> PredictedPoint:
    return predict(cal.coefficients, cal.acceptance, config, concurrency)


def to_planner(cal: Calibration, task: str = "code"):
    """(EngineProfile, [MeasuredAcceptance]) for ``specops.planner.recommend(..., calibration=profile,
    priors=default_priors().with_measured(*measured))``. The planner's roofline has no per-sequence term,
    so this is approximate: the fixed overhead maps to ``step_overhead_ms``, draft costs to the draft
    and n-gram step costs; the exact fitted model is :func:`predict_with`."""
    from specops.planner import EngineProfile, MeasuredAcceptance

    c = cal.coefficients
    draft_tok = max(c.draft_ms_per_token.values(), default=0.12)
    ngram = c.draft_ms_per_seq.get("ngram", 0.05)
    profile = EngineProfile(name=f"calibration:{cal.name}", step_overhead_ms=c.overhead_ms + c.per_seq_ms,
                            draft_step_overhead_ms=draft_tok, ngram_step_ms=ngram)
    measured = []
    for a in cal.acceptance:
        rates, prev = [], 1.0
        for p in a.per_position:
            prev = min(prev, p * a.draft_fraction if a.method in ("ngram", "suffix") else p)
            rates.append(prev)
        measured.append(MeasuredAcceptance(draft=a.draft or "*", method=a.method, task=task, per_position=rates,
                                           samples=max(1, int(a.drafts[0]))))
    return profile, measured


def dump(cal: Calibration) -> str:
    return json.dumps(cal.model_dump(mode="json"), indent=2)
