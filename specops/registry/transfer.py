"""Export, import and prune.

Export is a JSON document without database ids (rows refer to each other by NAME@VERSION and
deployment name; a canary test keeps its id, which events and validation runs name: an import that
renumbers it rewrites those links), in insertion order, so export -> import into an empty registry -> export gives the
same bytes. The event log travels only with ``with_events=True``. Import runs in one transaction:
anything already present (a NAME@VERSION, a deployment name) or invalid aborts it with nothing written.

Prune (retention) downsamples old raw measurements into hourly aggregates, older ones into daily
aggregates, and deletes measurements beyond a horizon. ``apply=False`` (the default) only reports.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

from pydantic import Field, ValidationError
from sqlalchemy import delete, insert
from sqlmodel import Session, select

from specops.errors import InputError
from specops.models import Strict
from specops.registry.measurements import MeasurementsMixin, aggregate
from specops.registry.migrations import MIGRATIONS
from specops.registry.schema import (
    CanaryTest,
    CanaryTestCreate,
    Deployment,
    DeploymentCreate,
    Draft,
    DraftCreate,
    Event,
    EventCreate,
    MeasurementCreate,
    MeasurementRow,
    RetrainJob,
    RetrainJobCreate,
    Target,
    TargetCreate,
    ValidationRun,
    ValidationRunCreate,
    to_utc,
    utcnow,
)

FORMAT = "specops-registry"
FORMAT_VERSION = 1
EXPORT_MAX_BYTES = 1 << 30
"""Largest export `lineage import` reads (1 GiB): a bigger file is refused before it is read."""


class PruneReport(Strict):
    dry_run: bool = Field(description="True: nothing was changed.")
    now: datetime
    deleted: int = Field(description="Measurements beyond the horizon (deleted).")
    to_hourly: int = Field(description="Raw measurements folded into hourly aggregates.")
    hourly_rows: int = Field(description="Hourly aggregate rows they become.")
    to_daily: int = Field(description="Raw/hourly measurements folded into daily aggregates.")
    daily_rows: int = Field(description="Daily aggregate rows they become.")
    remaining: int = Field(description="Measurements after pruning.")


def _dump(row, drop: set[str]) -> dict:
    return json.loads(row.model_copy().model_dump_json(exclude=drop))


class TransferMixin(MeasurementsMixin):
    def export_data(self, *, with_events: bool = False) -> dict:
        def work(s: Session) -> dict:
            targets = s.exec(select(Target).order_by(Target.id)).all()
            tref = {t.id: f"{t.name}@{t.version}" for t in targets}
            deps = s.exec(select(Deployment).order_by(Deployment.id)).all()
            dname = {d.id: d.name for d in deps}
            doc: dict = {"format": FORMAT, "format_version": FORMAT_VERSION, "schema": [m.name for m in MIGRATIONS]}
            doc["targets"] = [_dump(t, {"id"}) for t in targets]
            doc["drafts"] = [{**_dump(d, {"id", "target_id"}), "target": tref[d.target_id]}
                             for d in s.exec(select(Draft).order_by(Draft.id)).all()]
            doc["deployments"] = [_dump(d, {"id"}) for d in deps]
            doc["measurements"] = [{**_dump(m, {"id", "deployment_id"}), "deployment": dname[m.deployment_id]}
                                   for m in s.exec(select(MeasurementRow).order_by(MeasurementRow.id)).all()]
            doc["validation_runs"] = [{**_dump(v, {"id", "deployment_id"}), "deployment": dname[v.deployment_id]}
                                      for v in s.exec(select(ValidationRun).order_by(ValidationRun.id)).all()]
            doc["retrain_jobs"] = [{**_dump(j, {"id", "deployment_id", "active_key"}),
                                    "deployment": dname[j.deployment_id]}
                                   for j in s.exec(select(RetrainJob).order_by(RetrainJob.id)).all()]
            # with its id: events (data.canary_test) and validation runs (summary.canary_test) name it, and an
            # import into a registry that has tests already renumbers it and rewrites those links
            doc["canary_tests"] = [{**_dump(c, {"deployment_id"}), "deployment": dname[c.deployment_id]}
                                   for c in s.exec(select(CanaryTest).order_by(CanaryTest.id)).all()]
            if with_events:
                doc["events"] = [_dump(e, {"id"}) for e in s.exec(select(Event).order_by(Event.id)).all()]
            from specops.secrets import redact_data

            return redact_data(doc)  # rows written before secrets were caught in every spelling
        return self._tx(work, write=False)

    def import_data(self, doc: dict, *, source: str = "import") -> dict[str, int]:
        """Load an export into this registry in one transaction. Returns counts per kind."""
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise InputError(f"{source} is not a specops registry export", "create one with `specops lineage export`")
        if doc.get("format_version") != FORMAT_VERSION:
            raise InputError(f"{source} has export format {doc.get('format_version')}, this specops reads "
                             f"{FORMAT_VERSION}", "export it again with this specops version")

        _check_shape(doc, source)
        from specops.secrets import find_secrets

        secret = find_secrets({k: v for k, v in doc.items() if k in SECTIONS})
        if secret:
            raise InputError(f"{source}: {secret[0]} carries a secret (a credential in a URL, an unredacted "
                             f"argv value or a key){f' and {len(secret) - 1} more place(s)' if len(secret) > 1 else ''}"
                             "; nothing was imported",
                             "remove it (pass API keys by environment variable: api_key_env), or export the "
                             "registry again with this specops, which redacts them")
        def work(s: Session) -> dict[str, int]:
            counts: dict[str, int] = {}
            tids = _insert_models(s, Target, TargetCreate, doc.get("targets", []), source, "target", {})
            _insert_models(s, Draft, DraftCreate, doc.get("drafts", []), source, "draft", tids)
            dids: dict[str, int] = {}
            for i, item in enumerate(doc.get("deployments", [])):
                if s.exec(select(Deployment.id).where(Deployment.name == item.get("name"))).first():
                    raise InputError(f"{source}: deployment {item.get('name')} is already in the registry",
                                     "import into an empty registry (--db URL)")
                row = Deployment(**_checked(DeploymentCreate, item, source, f"deployments[{i}]",
                                            keep=("created_at", "updated_at")))
                s.add(row)
                s.flush()
                dids[row.name] = row.id
            tests = _insert_canary_tests(s, doc.get("canary_tests", []), dids, source)
            counts["canary_tests"] = len(tests)
            for key, table, create in (("measurements", MeasurementRow, MeasurementCreate),
                                       ("validation_runs", ValidationRun, ValidationRunCreate),
                                       ("retrain_jobs", RetrainJob, RetrainJobCreate)):
                rows = []
                for i, item in enumerate(doc.get(key, [])):
                    item = dict(item)
                    dep = item.pop("deployment", None)
                    if dep not in dids:
                        raise InputError(f"{source}: {key}[{i}] names deployment {dep}, which is not in the file",
                                         "export the whole registry again")
                    item["deployment_id"] = dids[dep]
                    if key == "retrain_jobs" and item.get("status") == "running":
                        item["active_key"] = dids[dep]
                    if key == "validation_runs":
                        item["summary"] = _relinked(item.get("summary"), tests)
                    rows.append(_checked(create, item, source, f"{key}[{i}]"))
                if rows:
                    s.exec(insert(table), params=rows)
                counts[key] = len(rows)
            events = [_checked(EventCreate, _relinked_event(e, tests), source, f"events[{i}]")
                      for i, e in enumerate(doc.get("events", []))]
            if events:
                s.exec(insert(Event), params=events)
            counts.update(targets=len(tids), drafts=len(doc.get("drafts", [])), deployments=len(dids),
                          events=len(events))
            return counts
        return self._tx(work)

    def prune(self, *, now: datetime | None = None, raw_for: timedelta = timedelta(days=7),
              hourly_for: timedelta = timedelta(days=30), horizon: timedelta = timedelta(days=365),
              apply: bool = False) -> PruneReport:
        now = to_utc(now) or utcnow()
        if not (raw_for <= hourly_for <= horizon):
            raise InputError("retention periods must grow: raw <= hourly <= horizon", "e.g. --raw 7d --hourly 30d "
                             "--horizon 365d")

        def work(s: Session) -> PruneReport:
            cut_h, cut_d, cut_x = now - raw_for, now - hourly_for, now - horizon
            deleted = len(s.exec(select(MeasurementRow.id).where(MeasurementRow.window_end < cut_x)).all())
            if apply:
                s.exec(delete(MeasurementRow).where(MeasurementRow.window_end < cut_x))
            old = s.exec(select(MeasurementRow).where(MeasurementRow.window_end >= cut_x, MeasurementRow.window_end < cut_h)
                         .order_by(MeasurementRow.id)).all()
            daily = [m for m in old if m.window_end < cut_d and m.granularity != "daily"]
            hourly = [m for m in old if m.window_end >= cut_d and m.granularity == "raw"]
            daily_groups, hourly_groups = _group(daily, "day"), _group(hourly, "hour")
            if apply:
                for groups, gran in ((hourly_groups, "hourly"), (daily_groups, "daily")):
                    for rows in groups.values():
                        for m in rows:
                            s.delete(m)
                        s.add(_fold(rows, gran))
                s.flush()
            remaining = len(s.exec(select(MeasurementRow.id)).all())
            if not apply:
                remaining -= deleted + len(daily) + len(hourly) - len(daily_groups) - len(hourly_groups)
            return PruneReport(dry_run=not apply, now=now, deleted=deleted, to_hourly=len(hourly),
                               hourly_rows=len(hourly_groups), to_daily=len(daily), daily_rows=len(daily_groups),
                               remaining=remaining)
        return self._tx(work, write=apply)


SECTIONS = ("targets", "drafts", "deployments", "measurements", "validation_runs", "retrain_jobs", "canary_tests",
            "events")
MAX_INT = 2**63 - 1
"""SQL's largest integer: a bigger number in an import is refused, not an OverflowError mid-transaction."""


def _check_shape(doc: dict, source: str) -> None:
    """Every section a list of objects, every integer within SQL's range, every deployment name valid
    (the one name rule): before any row is written."""
    from specops.models import check_deployment_name

    unknown_keys = set(doc) - {"format", "format_version", "schema", *SECTIONS}
    if unknown_keys:
        raise InputError(f"{source}: unknown section(s) {', '.join(sorted(map(str, unknown_keys)))}",
                         f"an export has only: {', '.join(SECTIONS)}")
    for key in SECTIONS:
        items = doc.get(key, [])
        if not isinstance(items, list):
            raise InputError(f"{source}: {key} must be a list, got {type(items).__name__}",
                             "give a file written by `specops lineage export`")
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise InputError(f"{source}: {key}[{i}] must be an object, got {type(item).__name__}",
                                 "give a file written by `specops lineage export`")
            _check_ints(item, f"{source}: {key}[{i}]")
            if key == "deployments":
                _check_deployment(item, f"{source}: {key}[{i}]")
            names = [item.get("name")] if key == "deployments" else (
                [item["deployment"]] if "deployment" in item and key != "events" else [])
            for name in names:
                try:
                    check_deployment_name(name)
                except InputError as exc:
                    raise InputError(f"{source}: {key}[{i}]: {exc.message}", exc.fix) from None


def _check_deployment(item: dict, where: str) -> None:
    """A deployment's method is one vLLM knows and its endpoint an http(s) URL without credentials."""
    from specops.speculation import METHODS

    method = item.get("method")
    if method is not None and method not in METHODS:
        from specops.errors import unknown

        err = unknown("method", str(method)[:40], METHODS)
        raise InputError(f"{where}.method: {err.message}", err.fix)
    endpoint = item.get("endpoint")
    if endpoint is not None:
        from urllib.parse import urlsplit

        from specops.secrets import url_credentials

        try:
            parts = urlsplit(str(endpoint))
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise InputError(f"{where}.endpoint is not an http(s) URL",
                             "give the engine's base URL, e.g. http://127.0.0.1:8000")
        if url_credentials(str(endpoint)):
            raise InputError(f"{where}.endpoint contains credentials",
                             "remove them from the URL; pass an API key by environment variable (api_key_env)")


def _check_ints(value, where: str) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, int) and abs(value) > MAX_INT:
        raise InputError(f"{where}: integer {str(value)[:20]}... is out of range (at most {MAX_INT})",
                         "fix the file or export it again")
    if isinstance(value, dict):
        for v in value.values():
            _check_ints(v, where)
    elif isinstance(value, list):
        for v in value:
            _check_ints(v, where)


def _checked(create_cls, item: dict, source: str, where: str, keep: tuple[str, ...] = ()) -> dict:
    item = dict(item)
    extra = {k: item.pop(k) for k in keep if k in item}
    try:
        data = create_cls.model_validate(item).model_dump()
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        raise InputError(f"{source}: {where}.{loc}: {err['msg']}", "fix the file or export it again") from exc
    for k, v in extra.items():
        extra[k] = _timestamp(v, f"{source}: {where}.{k}")
    return {**data, **extra}


def _timestamp(value, where: str):
    """An ISO 8601 timestamp of an export ("2026-01-02T03:04:05Z"); anything else is one line."""
    try:
        if isinstance(value, str) and len(value) <= 64:
            return to_utc(value)
    except ValueError:
        pass
    shown = json.dumps(value)[:40] if not isinstance(value, (dict, list)) else type(value).__name__
    raise InputError(f"{where} is {shown}, not an ISO 8601 timestamp",
                     'write it as lineage export does, e.g. "2026-01-02T03:04:05.000000Z"')


def _insert_models(s: Session, table, create_cls, items: list[dict], source: str, kind: str,
                   target_ids: dict[str, int]) -> dict[str, int]:
    ids: dict[str, int] = {}
    for i, item in enumerate(items):
        item = dict(item)
        ref = f"{item.get('name')}@{item.get('version')}"
        if s.exec(select(table.id).where(table.name == item.get("name"), table.version == item.get("version"))).first():
            raise InputError(f"{source}: {kind} {ref} is already in the registry",
                             "import into an empty registry (--db URL)")
        if kind == "draft":
            tref = item.pop("target", None)
            if tref not in target_ids:
                raise InputError(f"{source}: draft {ref} names target {tref}, which is not in the file",
                                 "export the whole registry again")
            item["target_id"] = target_ids[tref]
        row = table(**_checked(create_cls, item, source, f"{kind}s[{i}]", keep=("created_at",)))
        s.add(row)
        s.flush()
        ids[ref] = row.id
    return ids


def _insert_canary_tests(s: Session, items: list[dict], dids: dict[str, int], source: str) -> dict[int, int]:
    """Insert the canary tests (samples and all) in file order; {id in the file: id here}."""
    ids: dict[int, int] = {}
    for i, item in enumerate(items):
        item = dict(item)
        old, dep = item.pop("id", None), item.pop("deployment", None)
        if dep not in dids:
            raise InputError(f"{source}: canary_tests[{i}] names deployment {dep}, which is not in the file",
                             "export the whole registry again")
        if not isinstance(old, int) or isinstance(old, bool) or old in ids:
            raise InputError(f"{source}: canary_tests[{i}].id must be a number no other test has (got {old!r})",
                             "export the whole registry again")
        row = CanaryTest(**_checked(CanaryTestCreate, {**item, "deployment_id": dids[dep]}, source,
                                    f"canary_tests[{i}]", keep=("started_at", "finished_at")))
        s.add(row)
        s.flush()
        ids[old] = row.id
    return ids


def _relinked_event(event: dict, tests: dict[int, int]) -> dict:
    return {**event, "data": _relinked(event["data"], tests)} if "data" in event else event


def _relinked(data, tests: dict[int, int]):
    """``data`` with ``canary_test`` (an event's data, a validation run's summary) pointing at the imported row."""
    if isinstance(data, dict) and isinstance(data.get("canary_test"), int) and data["canary_test"] in tests:
        return {**data, "canary_test": tests[data["canary_test"]]}
    return data


def _group(rows: list[MeasurementRow], unit: str) -> dict[tuple, list[MeasurementRow]]:
    groups: dict[tuple, list[MeasurementRow]] = {}
    for m in rows:
        key_t = m.window_end.replace(minute=0, second=0, microsecond=0)
        if unit == "day":
            key_t = key_t.replace(hour=0)
        groups.setdefault((m.deployment_id, m.task, m.source, key_t), []).append(m)
    return groups


def _fold(rows: list[MeasurementRow], granularity: str) -> MeasurementRow:
    nd = sum(m.num_drafts for m in rows)
    ndt = sum(m.num_draft_tokens for m in rows)
    na = sum(m.num_accepted_tokens for m in rows)
    rate, tau = aggregate(nd, ndt, na)
    per_pos = None
    lengths = {len(m.per_position) for m in rows if m.per_position}
    if len(lengths) == 1 and nd and all(m.per_position for m in rows):
        k = lengths.pop()
        per_pos = [sum(m.per_position[i] * m.num_drafts for m in rows) / nd for i in range(k)]
    first = rows[0]
    n_rows = sum((m.extra or {}).get("aggregated_rows", 1) for m in rows)
    return MeasurementRow(deployment_id=first.deployment_id, window_start=min(m.window_start for m in rows),
                       window_end=max(m.window_end for m in rows), acceptance_rate=rate, mean_acceptance_length=tau,
                       per_position=per_pos, num_drafts=nd, num_draft_tokens=ndt, num_accepted_tokens=na,
                       task=first.task, source=first.source, granularity=granularity,
                       extra={"aggregated_rows": n_rows})


def load_export(path: str | Path) -> dict:
    p = Path(path)
    if not p.is_file():
        raise InputError(f"export file {p} does not exist", "give the file written by `specops lineage export --file`")
    from specops.jsonfile import load_json

    return load_json(p, fix="give a file written by `specops lineage export`", max_bytes=EXPORT_MAX_BYTES)
