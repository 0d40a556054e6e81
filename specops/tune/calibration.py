"""Named calibrations: the fitted coefficients, the per-drafter acceptance and the points behind them,
kept in the registry (``calibration`` table, one revision per refit under the same name, with a
``calibration`` event). JSON files from before that table (``$SPECOPS_HOME/calibrations/*.json``) are
imported on first read.

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

from specops.errors import InputError, NotFoundError
from specops.settings import specops_home
from specops.tune.fit import cumulative, find_acceptance, fit_model, predict
from specops.tune.types import EngineConfig, PointResult, PredictedPoint, TuneCalibration

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def calibrations_dir() -> Path:
    """Where calibrations were kept as JSON files before the registry had a table for them."""
    return specops_home() / "calibrations"


def check_name(name: str) -> str:
    if not NAME.match(name or ""):
        raise InputError(f'calibration name "{name}" is not valid',
                         "use letters, digits, '.', '_' and '-' (at most 100 characters)")
    return name


def fit_calibration(points: list[PointResult], *, name: str, hardware: str, model: str, engine_version: str,
                    workload: str, run_id: str | None = None, cost_fit_note: str | None = None) -> TuneCalibration:
    """Fit acceptance and step cost (:func:`specops.tune.fit.fit_model`); the method used is the
    calibration's ``cost_fit`` (``cost_fit_note`` says why, e.g. why synthetic runs were not possible)."""
    ok = [r for r in points if r.status == "ok" and r.sample is not None]
    coef, acceptance, how = fit_model(ok)
    errors = []
    for r in ok:
        try:
            p = predict(coef, acceptance, r.point.config, r.point.concurrency)
        except InputError:
            continue
        errors.append(abs(p.tokens_per_s - r.sample.tokens_per_s) / r.sample.tokens_per_s)
    return TuneCalibration(
        name=check_name(name), created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        hardware=hardware, model=model, engine_version=engine_version, workload=workload, run_id=run_id,
        coefficients=coef, acceptance=acceptance, samples=len(ok), points=list(points),
        fit_residual_median=statistics.median(errors) if errors else None, cost_fit=how,
        cost_fit_note=cost_fit_note)


def _open(registry=None):
    if registry is not None:
        return registry
    from specops.registry import open_registry

    return open_registry()


def _existing_registry():
    """The registry if one exists already (reading a calibration never creates a database)."""
    from specops.settings import database_url

    url = database_url()
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).is_file():
        return None
    return _open()


def save_calibration(cal: TuneCalibration, registry=None) -> TuneCalibration:
    """Store ``cal`` in the registry as the next revision of its name; returns it with ``revision`` set."""
    reg = _open(registry)
    doc = cal.model_dump(mode="json")
    row = reg.save_calibration(check_name(cal.name), model=cal.model, hardware=cal.hardware,
                               engine_version=cal.engine_version, workload=cal.workload, samples=cal.samples,
                               document=doc, run_id=cal.run_id)
    return cal.model_copy(update={"revision": row.revision})


def forget_calibration(cal: TuneCalibration, registry=None) -> None:
    """Undo :func:`save_calibration` of ``cal`` (its revision), e.g. when the run's report failed."""
    if cal.revision is not None:
        _open(registry).delete_calibration(cal.name, cal.revision)


def _from_row(row) -> TuneCalibration:
    return TuneCalibration.model_validate({**row.document, "name": row.name, "revision": row.revision})


def _import_legacy(reg) -> None:
    """Calibration files from before the registry table: imported once (the files stay)."""
    d = calibrations_dir()
    if not d.is_dir():
        return
    known = {c.name for c in reg.calibrations()}
    for path in sorted(d.glob("*.json")):
        if path.stem in known:
            continue
        try:
            cal = TuneCalibration.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # not a calibration file: left alone
        save_calibration(cal, reg)


def list_calibrations(registry=None) -> list[TuneCalibration]:
    """Every stored calibration (newest revision per name), newest first."""
    reg = registry or _existing_registry()
    if reg is None:
        return []
    _import_legacy(reg)
    seen, out = set(), []
    for row in reg.calibrations():
        if row.name not in seen:
            seen.add(row.name)
            out.append(_from_row(row))
    return out


def load_calibration(ref: str, registry=None) -> TuneCalibration:
    """``NAME`` (newest revision) or ``NAME@REVISION`` from the registry."""
    check_name(ref.partition("@")[0])
    reg = registry or _existing_registry()
    if reg is None:
        raise NotFoundError(f'no calibration "{ref}": there is no registry yet',
                            "run `specops tune ... --name NAME` first")
    _import_legacy(reg)
    return _from_row(reg.get_calibration(ref))


def newest_calibration(model: str | None = None, registry=None) -> TuneCalibration | None:
    """The newest stored calibration (for ``model`` if given), or None."""
    reg = registry or _existing_registry()
    if reg is None:
        return None
    _import_legacy(reg)
    rows = reg.calibrations(model)
    return _from_row(rows[0]) if rows else None


def predict_with(cal: TuneCalibration, config: EngineConfig, concurrency: int) -> PredictedPoint:
    return predict(cal.coefficients, cal.acceptance, config, concurrency)


class FittedModel:
    """A calibration as ``specops.planner.recommend(measured=...)`` takes it: the exact fitted predictor
    (:func:`predict_with`) for the methods and γ values the tune run measured, and its leave-one-configuration-out
    residuals (:meth:`range_residuals`) for the predictions' range."""

    def __init__(self, cal: TuneCalibration) -> None:
        self.cal = cal
        self.label = f"calibration {cal.ref} ({cal.samples} points)"
        ok = [r.point.config for r in cal.points if r.status == "ok" and r.point.config.synthetic_rate is None]
        self._drafts: dict[str, str | None] = {}
        self._gammas: dict[str, list[int]] = {}
        for c in ok:
            self._drafts.setdefault(c.method, c.draft)
            if c.method != "none":
                self._gammas.setdefault(c.method, [])
                if c.gamma not in self._gammas[c.method]:
                    self._gammas[c.method].append(c.gamma)
        for m in self._gammas:
            self._gammas[m].sort()
            if find_acceptance(cal.acceptance, EngineConfig(method=m, gamma=1)) is None:
                self._drafts.pop(m, None)  # measured, but no counters: cannot be predicted
        self._residuals = None

    def drafts(self) -> dict[str, str | None]:
        return dict(self._drafts)

    def range_residuals(self):
        """The calibration's leave-one-configuration-out residuals (:func:`specops.tune.residuals.measured_residuals`),
        computed once: what its predictions' range, P(gain) and expected speedup rest on."""
        if self._residuals is None:
            from specops.tune.residuals import measured_residuals

            self._residuals = measured_residuals(self.cal)
        return self._residuals

    def gammas(self, method: str) -> list[int]:
        return list(self._gammas.get(method, []))

    def predict(self, method: str, gamma: int, batch: int):
        from specops.planner.types import MeasuredPrediction

        if method not in self._drafts:
            return None
        config = EngineConfig(method=method, gamma=gamma if method != "none" else 0, draft=self._drafts[method])
        try:
            p = predict_with(self.cal, config, batch)
        except InputError:
            return None
        rate = 0.0
        if method != "none" and gamma:
            acc = find_acceptance(self.cal.acceptance, config)
            rate = min(1.0, sum(cumulative(acc, gamma)) / gamma) if acc else 0.0
        return MeasuredPrediction(tpot_ms=p.tpot_ms, tokens_per_s=p.tokens_per_s, tau=p.tau, acceptance_rate=rate)


def to_planner(cal: TuneCalibration, task: str = "code"):
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


def dump(cal: TuneCalibration) -> str:
    return json.dumps(cal.model_dump(mode="json"), indent=2)
