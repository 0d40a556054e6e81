"""Tune runs, their measured points and named calibrations (what `specops tune` keeps).

- A **tune run** is created once with the options it was asked for; ``--resume RUN_ID`` reads them
  back. Each finished grid point is one ``tune_point`` row, committed before the next point starts,
  so an interrupted run loses at most the point in flight and a resumed run never measures a stored
  point again. A point key is stored once per run (a second write of the same key is refused).
- A **calibration** is stored under a name with revisions: refitting under the same name adds
  revision N+1 and keeps the older ones (``NAME`` is the newest, ``NAME@N`` one revision).

The documents (options, point results, calibration) are JSON; their types live in
:mod:`specops.tune.types`, which this module does not import (the registry stays below the
capability packages).
"""

from __future__ import annotations

from sqlalchemy import func
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from specops.errors import InputError, NotFoundError, did_you_mean
from specops.registry.schema import (
    Calibration,
    CalibrationCreate,
    CalibrationPublic,
    TunePoint,
    TunePointCreate,
    TunePointPublic,
    TuneRun,
    TuneRunCreate,
    TuneRunPublic,
)
from specops.registry.store import RegistryBase, _validate, _validated


def _run_public(row: TuneRun, points: int = 0) -> TuneRunPublic:
    return TuneRunPublic.model_validate({**row.model_dump(), "points": points})


class TuneMixin(RegistryBase):
    # --- runs --------------------------------------------------------------------------------------

    @staticmethod
    def _run(s: Session, run_id: str) -> TuneRun:
        row = s.exec(select(TuneRun).where(TuneRun.run_id == run_id)).first()
        if row is None:
            known = list(s.exec(select(TuneRun.run_id).order_by(TuneRun.id.desc()).limit(200)).all())
            raise NotFoundError(f'no tune run "{run_id}" in the registry.{did_you_mean(run_id, known)}',
                                "see `specops tune --list` (or start a new run without --resume)")
        return row

    def create_tune_run(self, run_id: str, *, options: dict, meta: dict | None = None,
                        created_at=None) -> TuneRunPublic:
        """A new run; a run id that exists already is an InputError (nothing is overwritten)."""
        def work(s: Session) -> TuneRunPublic:
            data = {"run_id": run_id, "options": options, "meta": meta}
            if created_at is not None:
                data["created_at"] = created_at
            row = _validated(TuneRun, _validate(TuneRunCreate, data))
            s.add(row)
            try:
                s.flush()
            except IntegrityError:
                raise InputError(f'tune run "{run_id}" exists already',
                                 f"continue it with --resume {run_id}, or start a new run") from None
            self._event(s, "tune.run", run_id, f"tune run {run_id} started",
                        data={"methods": options.get("methods"), "model": options.get("model")})
            return _run_public(row)
        return self._tx(work)

    def get_tune_run(self, run_id: str) -> TuneRunPublic:
        def work(s: Session) -> TuneRunPublic:
            row = self._run(s, run_id)
            n = s.exec(select(func.count()).select_from(TunePoint).where(TunePoint.tune_run_id == row.id)).one()
            return _run_public(row, n)
        return self._tx(work, write=False)

    def has_tune_run(self, run_id: str) -> bool:
        def work(s: Session) -> bool:
            return s.exec(select(TuneRun.id).where(TuneRun.run_id == run_id)).first() is not None
        return self._tx(work, write=False)

    def tune_runs(self, limit: int = 100) -> list[TuneRunPublic]:
        """Newest first, with their point counts."""
        def work(s: Session) -> list[TuneRunPublic]:
            counts = (select(TunePoint.tune_run_id, func.count().label("n")).group_by(TunePoint.tune_run_id)
                      .subquery())
            q = (select(TuneRun, counts.c.n).outerjoin(counts, counts.c.tune_run_id == TuneRun.id)
                 .order_by(TuneRun.id.desc()).limit(limit))
            return [_run_public(r, n or 0) for r, n in s.exec(q).all()]
        return self._tx(work, write=False)

    # --- points ------------------------------------------------------------------------------------

    def add_tune_point(self, run_id: str, *, key: str, status: str, result: dict) -> TunePointPublic:
        """Store one finished point (committed when this returns)."""
        def work(s: Session) -> TunePointPublic:
            run = self._run(s, run_id)
            row = _validated(TunePoint, _validate(TunePointCreate, {"tune_run_id": run.id, "key": key,
                                                                   "status": status, "result": result}))
            s.add(row)
            try:
                s.flush()
            except IntegrityError:
                raise InputError(f'tune run {run_id} has point "{key}" already',
                                 "a point is measured once per run; start a new run to measure it again") from None
            return TunePointPublic.model_validate({**row.model_dump(exclude={"tune_run_id"}), "run_id": run_id})
        return self._tx(work)

    def tune_points(self, run_id: str) -> list[TunePointPublic]:
        """In the order they were stored."""
        def work(s: Session) -> list[TunePointPublic]:
            run = self._run(s, run_id)
            rows = s.exec(select(TunePoint).where(TunePoint.tune_run_id == run.id).order_by(TunePoint.id)).all()
            return [TunePointPublic.model_validate({**r.model_dump(exclude={"tune_run_id"}), "run_id": run_id}) for r in rows]
        return self._tx(work, write=False)

    # --- calibrations ------------------------------------------------------------------------------

    def save_calibration(self, name: str, *, model: str, hardware: str, engine_version: str, workload: str,
                         samples: int, document: dict, run_id: str | None = None) -> CalibrationPublic:
        """Store ``document`` as the next revision of ``name`` (1 for a new name)."""
        def work(s: Session) -> CalibrationPublic:
            last = s.exec(select(func.max(Calibration.revision)).where(Calibration.name == name)).one()
            row = _validated(Calibration, _validate(CalibrationCreate, dict(
                name=name, revision=(last or 0) + 1, model=model, hardware=hardware, engine_version=engine_version,
                workload=workload, run_id=run_id, samples=samples, document=document)))
            s.add(row)
            s.flush()
            self._event(s, "calibration", f"{row.name}@{row.revision}",
                        f"calibration {row.name}@{row.revision}: {samples} points, {model} on {hardware}",
                        actor="specops tune", data={"run_id": run_id, "engine_version": engine_version,
                                                    "workload": workload})
            return CalibrationPublic.model_validate(row.model_dump())
        return self._tx(work)

    def delete_calibration(self, name: str, revision: int) -> bool:
        """Remove one revision (what ``tune`` stored for a report it then failed to write); True when
        it was there. The event log keeps a ``calibration.removed`` event."""
        def work(s: Session) -> bool:
            row = s.exec(select(Calibration).where(Calibration.name == name, Calibration.revision == revision)).first()
            if row is None:
                return False
            s.delete(row)
            self._event(s, "calibration.removed", f"{name}@{revision}",
                        f"calibration {name}@{revision} removed: its report could not be written", actor="specops tune")
            return True
        return self._tx(work)

    def get_calibration(self, ref: str) -> CalibrationPublic:
        """``NAME`` (newest revision) or ``NAME@REVISION``."""
        name, _, rev = (ref or "").partition("@")
        if rev and not rev.isdigit():
            raise InputError(f'calibration "{ref}": the revision must be a number',
                             "refer to calibrations as NAME or NAME@REVISION (e.g. tiny-cpu@2)")

        def work(s: Session) -> CalibrationPublic:
            q = select(Calibration).where(Calibration.name == name)
            q = q.where(Calibration.revision == int(rev)) if rev else q.order_by(Calibration.revision.desc())
            row = s.exec(q.limit(1)).first()
            if row is None:
                known = sorted(set(s.exec(select(Calibration.name)).all()))
                hint = f" (known: {', '.join(known[:20])})" if known else ""
                raise NotFoundError(f'no calibration "{ref}" in the registry.{did_you_mean(name, known)}',
                                    "run `specops tune ... --name NAME` first" + hint)
            return CalibrationPublic.model_validate(row.model_dump())
        return self._tx(work, write=False)

    def calibrations(self, model: str | None = None, *, limit: int = 200) -> list[CalibrationPublic]:
        """Newest first (every revision); only ``model``'s when given."""
        def work(s: Session) -> list[CalibrationPublic]:
            q = select(Calibration)
            if model is not None:
                q = q.where(Calibration.model == model)
            rows = s.exec(q.order_by(Calibration.id.desc()).limit(limit)).all()
            return [CalibrationPublic.model_validate(r.model_dump()) for r in rows]
        return self._tx(work, write=False)
