"""The Registry: targets, drafts, lineage checks, deployments and the event log.

Measurements, validation runs and retraining jobs are in :mod:`specops.registry.measurements`; export,
import and prune in :mod:`specops.registry.transfer`. Every public method is one transaction.
"""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import func
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from specops.errors import InputError, NotFoundError, unknown
from specops.models import Finding, check_deployment_name
from specops.registry.db import transaction
from specops.registry.lineage import LineageReport, judge, structural_findings
from specops.registry.schema import (
    Deployment,
    DeploymentCreate,
    DeploymentPublic,
    Draft,
    DraftCreate,
    DraftPublic,
    Event,
    EventCreate,
    EventPublic,
    Target,
    TargetCreate,
    TargetPublic,
    utcnow,
)
from specops.speculation import WEIGHTLESS_METHODS

T = TypeVar("T")
DEPLOYMENT_FIELDS = set(DeploymentCreate.model_fields) - {"name"}


def default_actor() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry in some containers
        user = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
    return f"{user}@{socket.gethostname()}"


def split_ref(ref: str) -> tuple[str, str | None]:
    ref = (ref or "").strip()
    if not ref:
        raise InputError("empty model reference", "refer to models as NAME or NAME@VERSION")
    name, sep, version = ref.rpartition("@")
    if not sep:
        return ref, None
    if not name or not version:
        raise InputError(f'"{ref}" is not NAME@VERSION', "refer to models as NAME or NAME@VERSION")
    return name, version


def _validate(create_cls, data: dict):
    """Validate caller data; a bad value is an InputError naming the field (exit 2), not a traceback."""
    from pydantic import ValidationError

    try:
        return create_cls.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(x) for x in err["loc"])
        msg, _, fix = str(err["msg"]).removeprefix("Value error, ").partition(" To fix: ")
        shown = repr(err.get("input"))[:80]
        raise InputError(f"{field}: {msg} (got {shown})",
                         fix or f"see the {create_cls.__name__.removesuffix('Create')} fields in specops.registry") from exc


def _validated(table_cls, create_obj):
    """Rows are built through validation (table=True models skip it)."""
    return table_cls.model_validate(create_obj.model_dump())


class RegistryBase:
    """Engine, transactions and the event log."""

    def __init__(self, engine, url: str) -> None:
        self.engine = engine
        self.url = url

    def _tx(self, fn: Callable[[Session], T], *, write: bool = True) -> T:
        return transaction(self.engine, fn, write=write)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- events (append-only: there is no update or delete) ------------------------------------

    @staticmethod
    def _event(s: Session, kind: str, subject: str, message: str, *, actor: str | None = None,
               reason: str | None = None, data: dict | None = None) -> Event:
        row = _validated(Event, EventCreate(kind=kind, subject=subject, message=message,
                                            actor=actor or default_actor(), reason=reason, data=data))
        s.add(row)
        return row

    def record_event(self, kind: str, subject: str, message: str, *, actor: str | None = None,
                     reason: str | None = None, data: dict | None = None) -> EventPublic:
        """Append one event (who/what/when/why). Events are never updated or deleted."""
        def work(s: Session) -> EventPublic:
            row = self._event(s, kind, subject, message, actor=actor, reason=reason, data=data)
            s.flush()
            return EventPublic.model_validate(row.model_dump())
        return self._tx(work)

    def events(self, subject: str | None = None, kind: str | None = None, limit: int = 100) -> list[EventPublic]:
        """Newest first."""
        def work(s: Session) -> list[EventPublic]:
            q = select(Event)
            if subject:
                q = q.where(Event.subject == subject)
            if kind:
                q = q.where(Event.kind == kind)
            rows = s.exec(q.order_by(Event.id.desc()).limit(limit)).all()
            return [EventPublic.model_validate(r.model_dump()) for r in rows]
        return self._tx(work, write=False)


class ModelsMixin(RegistryBase):
    """Targets and drafts."""

    # --- lookups ---------------------------------------------------------------------------------

    @staticmethod
    def _find(s: Session, cls, ref: str, kind: str):
        name, version = split_ref(ref)
        q = select(cls).where(cls.name == name)
        q = q.where(cls.version == version) if version else q.order_by(cls.id.desc())
        row = s.exec(q.limit(1)).first()
        if row is None:
            refs = [f"{n}@{v}" for n, v in s.exec(select(cls.name, cls.version)).all()]
            names = sorted({r.rpartition("@")[0] for r in refs})
            choices = refs if version else names
            raise unknown(kind, ref, choices, fix=f"register it with `specops lineage register-{kind} PATH` "
                          f"or use one of: {', '.join(choices[:12]) or 'none registered yet'}")
        return row

    @staticmethod
    def _target_public(row: Target) -> TargetPublic:
        return TargetPublic.model_validate(row.model_dump())

    @staticmethod
    def _draft_public(s: Session, row: Draft) -> DraftPublic:
        t = s.get(Target, row.target_id)
        return DraftPublic.model_validate({**row.model_dump(), "target": f"{t.name}@{t.version}"})

    def get_target(self, ref: str) -> TargetPublic:
        """``NAME`` (latest version) or ``NAME@VERSION``; NotFoundError with did-you-mean otherwise."""
        return self._tx(lambda s: self._target_public(self._find(s, Target, ref, "target")), write=False)

    def get_draft(self, ref: str) -> DraftPublic:
        return self._tx(lambda s: self._draft_public(s, self._find(s, Draft, ref, "draft")), write=False)

    def list_targets(self) -> list[TargetPublic]:
        return self._tx(lambda s: [self._target_public(r) for r in s.exec(select(Target).order_by(Target.id)).all()],
                        write=False)

    def list_drafts(self, target: str | None = None) -> list[DraftPublic]:
        def work(s: Session) -> list[DraftPublic]:
            q = select(Draft).order_by(Draft.id)
            if target:
                q = q.where(Draft.target_id == self._find(s, Target, target, "target").id)
            return [self._draft_public(s, r) for r in s.exec(q).all()]
        return self._tx(work, write=False)

    def find_by_path(self, path: str) -> TargetPublic | DraftPublic | None:
        """The target or draft already registered from this folder (same fingerprint), else None."""
        from specops.registry.fingerprint import inspect_artifact

        fp = inspect_artifact(str(path))["fingerprint"]
        if not fp:
            return None

        def work(s: Session):
            t = s.exec(select(Target).where(Target.fingerprint == fp).order_by(Target.id.desc())).first()
            if t:
                return self._target_public(t)
            d = s.exec(select(Draft).where(Draft.fingerprint == fp).order_by(Draft.id.desc())).first()
            return self._draft_public(s, d) if d else None
        return self._tx(work, write=False)

    # --- registration ----------------------------------------------------------------------------

    @staticmethod
    def _next_version(s: Session, cls, name: str) -> str:
        count = s.exec(select(func.count()).select_from(cls).where(cls.name == name)).one()
        n = int(count) + 1
        existing = set(s.exec(select(cls.version).where(cls.name == name)).all())
        while f"v{n}" in existing:
            n += 1
        return f"v{n}"

    @staticmethod
    def _check_new(s: Session, cls, kind: str, name: str, version: str | None, fingerprint: str | None):
        """Existing row to return (same artifact, no version asked) or None; duplicate version -> error."""
        if "@" in name:
            raise InputError(f'model name "{name}" contains "@"', "choose a --name without @")
        if version is None:
            latest = s.exec(select(cls).where(cls.name == name).order_by(cls.id.desc())).first()
            if latest is not None and fingerprint and latest.fingerprint == fingerprint:
                return latest
            return None
        if s.exec(select(cls.id).where(cls.name == name, cls.version == version)).first() is not None:
            raise InputError(f"{kind} {name}@{version} is already registered",
                             f"give a new --version, or omit --version to get the next one "
                             f"(see `specops lineage show {name}`)")
        return None

    def register_target(self, path_or_id: str, *, name: str | None = None, version: str | None = None,
                        actor: str | None = None) -> TargetPublic:
        """Fingerprint a local Hugging Face folder (or record a hub id as given) as NAME@VERSION.

        Re-registering the same artifact under the same name without --version returns the existing
        row; an explicit version that exists already is an InputError (nothing is written)."""
        from specops.models import check_label
        from specops.registry.fingerprint import inspect_artifact

        for value, what in ((name, "--name"), (version, "--version")):
            if value is not None:
                check_label(value, what)
        facts = inspect_artifact(str(path_or_id))
        name = check_label(name or _default_name(facts), "target name")

        def work(s: Session) -> TargetPublic:
            existing = self._check_new(s, Target, "target", name, version, facts.get("fingerprint"))
            if existing is not None:
                return self._target_public(existing)
            ver = version or facts.get("hub_revision") or self._next_version(s, Target, name)
            row = _validated(Target, TargetCreate(name=name, version=ver, **facts))
            s.add(row)
            self._flush_unique(s, f"target {name}@{ver} is already registered")
            self._event(s, "target.registered", f"{name}@{ver}", f"registered target {name}@{ver} from {facts['source']}",
                        actor=actor, data={"fingerprint": row.fingerprint})
            return self._target_public(row)
        return self._tx(work)

    def register_draft(self, path_or_id: str, *, target: str, name: str | None = None, version: str | None = None,
                       method: str | None = None, trained_on: str | None = None, trainer_cmd: str | None = None,
                       actor: str | None = None) -> tuple[DraftPublic, list[Finding]]:
        """Record a draft and the target version it was trained against. Returns warnings (e.g. vocab
        mismatch): registration records facts, ``check_lineage`` judges."""
        from specops.registry.fingerprint import (
            eagle_generation,
            infer_method,
            inspect_artifact,
            looks_like_hub_id,
        )

        on_disk = os.path.exists(os.path.expanduser(path_or_id))
        if method is None and not on_disk and path_or_id.lower() in WEIGHTLESS_METHODS:
            raise InputError(f'"{path_or_id}" is neither a folder nor a hub id: a {path_or_id} draft has no weights',
                             f"pass --method {path_or_id.lower()} to record it (specops lineage register-draft "
                             f"{path_or_id} --target NAME --method {path_or_id.lower()})")
        weightless = method in WEIGHTLESS_METHODS and not on_disk and not looks_like_hub_id(path_or_id)
        facts = ({"source": path_or_id, "source_kind": "none", "facts": {}} if weightless
                 else inspect_artifact(str(path_or_id)))
        method = method or infer_method(facts)
        if method is None:
            raise InputError(f"cannot tell the speculative method of {path_or_id} from its config",
                             "pass --method (eagle3, eagle, draft_model, mtp, medusa, ngram, suffix, ...)")
        from specops.models import check_label

        for value, what in ((name, "--name"), (version, "--version")):
            if value is not None:
                check_label(value, what)
        name = check_label(name or (path_or_id if weightless else _default_name(facts)), "draft name")

        def work(s: Session) -> tuple[DraftPublic, list[Finding]]:
            t = self._find(s, Target, target, "target")
            existing = self._check_new(s, Draft, "draft", name, version, facts.get("fingerprint"))
            if existing is not None and existing.target_id == t.id:
                d = self._draft_public(s, existing)
                return d, _as_warnings(structural_findings(self._target_public(t), d, d.method))
            ver = version or facts.get("hub_revision") or self._next_version(s, Draft, name)
            create = DraftCreate(name=name, version=ver, method=method, eagle_generation=eagle_generation(method, facts),
                                 target_id=t.id, trained_against_fingerprint=t.fingerprint, trained_on=trained_on,
                                 trainer_cmd=trainer_cmd, **facts)
            row = _validated(Draft, create)
            s.add(row)
            self._flush_unique(s, f"draft {name}@{ver} is already registered")
            d = self._draft_public(s, row)
            self._event(s, "draft.registered", d.ref, f"registered {method} draft {d.ref} for {d.target}",
                        actor=actor, data={"fingerprint": row.fingerprint, "target": d.target})
            return d, _as_warnings(structural_findings(self._target_public(t), d, method))
        return self._tx(work)

    @staticmethod
    def _flush_unique(s: Session, message: str) -> None:
        try:
            s.flush()
        except IntegrityError as exc:
            raise InputError(message, "give a new --version (or omit it to get the next one)") from exc

    # --- judging ---------------------------------------------------------------------------------

    def check_lineage(self, target_ref: str, draft_ref: str, *, vllm_version: str = "0.33.0",
                      method: str | None = None, recheck_disk: bool = True) -> LineageReport:
        """Judge a pair; ``report.ok`` is False when any finding is an error."""
        from specops.capabilities import parse_version

        parse_version(vllm_version)

        def work(s: Session):
            t = self._find(s, Target, target_ref, "target")
            d = self._find(s, Draft, draft_ref, "draft")
            return self._target_public(t), self._draft_public(s, d), self._target_public(s.get(Target, d.target_id))
        target, draft, trained = self._tx(work, write=False)
        return judge(target, draft, trained, method=method, vllm_version=vllm_version, recheck_disk=recheck_disk)


def _default_name(facts: dict) -> str:
    from pathlib import Path

    return facts["source"] if facts["source_kind"] == "hub" else Path(facts["source"]).name


def _as_warnings(findings: list[Finding]) -> list[Finding]:
    return [f.model_copy(update={"severity": "warning"}) for f in findings]


class DeploymentsMixin(ModelsMixin):
    """Deployments (rows other capabilities keep up to date)."""

    @staticmethod
    def _dep(s: Session, name: str) -> Deployment:
        row = s.exec(select(Deployment).where(Deployment.name == name)).first()
        if row is None:
            names = s.exec(select(Deployment.name)).all()
            raise unknown("deployment", name, names, fix="list them with `specops deployment list`" if names
                          else "deploy one first with `specops deploy SPEC`")
        return row

    def _canonical_ref(self, s: Session, cls, ref: str | None) -> str | None:
        if not ref:
            return ref
        try:
            row = self._find(s, cls, ref, "target")
        except (NotFoundError, InputError):
            return ref
        return f"{row.name}@{row.version}"

    def upsert_deployment(self, name: str, *, platform: str, status: str, actor: str | None = None,
                          **fields: Any) -> DeploymentPublic:
        """Create or update. On update only the fields given (not None) change. Refs that name a registered
        model are stored as NAME@VERSION; others as given."""
        bad = set(fields) - DEPLOYMENT_FIELDS
        if bad:
            raise InputError(f"unknown deployment field(s): {', '.join(sorted(bad))}",
                             f"use: {', '.join(sorted(DEPLOYMENT_FIELDS))}")

        def work(s: Session) -> DeploymentPublic:
            given = {k: v for k, v in fields.items() if v is not None}
            for key, cls in (("target_ref", Target), ("draft_ref", Draft)):
                if key in given:
                    given[key] = self._canonical_ref(s, cls, given[key])
            row = s.exec(select(Deployment).where(Deployment.name == name)).first()
            if row is None:
                check_deployment_name(name)  # new rows only: rows written before the rule stay usable
                row = _validated(Deployment, _validate(DeploymentCreate, {"name": name, "platform": platform,
                                                                             "status": status, **given}))
                s.add(row)
                self._event(s, "deployment.created", name, f"deployment {name} created ({platform}, {status})",
                            actor=actor, data={"status": status})
            else:
                old = row.status
                merged = _validate(DeploymentCreate, {**row.model_dump(include=set(DeploymentCreate.model_fields)),
                                                      "platform": platform, "status": status, **given})
                for k, v in merged.model_dump(exclude={"name"}).items():
                    setattr(row, k, v)
                row.updated_at = utcnow()
                s.add(row)
                if old != status:
                    self._event(s, "deployment.status", name, f"{name}: {old} -> {status}", actor=actor,
                                data={"from": old, "to": status})
            s.flush()
            return DeploymentPublic.model_validate(row.model_dump())
        return self._tx(work)

    def set_deployment_status(self, name: str, status: str, *, actor: str | None = None, reason: str | None = None,
                              **fields: Any) -> DeploymentPublic:
        """Set the status and any given fields (None clears a field, e.g. pid=None)."""
        bad = set(fields) - DEPLOYMENT_FIELDS
        if bad:
            raise InputError(f"unknown deployment field(s): {', '.join(sorted(bad))}",
                             f"use: {', '.join(sorted(DEPLOYMENT_FIELDS))}")

        def work(s: Session) -> DeploymentPublic:
            row = self._dep(s, name)
            old = row.status
            merged = _validate(DeploymentCreate, {**row.model_dump(include=set(DeploymentCreate.model_fields)),
                                                  **fields, "status": status})
            for k, v in merged.model_dump(exclude={"name"}).items():
                setattr(row, k, v)
            row.updated_at = utcnow()
            s.add(row)
            self._event(s, "deployment.status", name, f"{name}: {old} -> {status}", actor=actor, reason=reason,
                        data={"from": old, "to": status})
            s.flush()
            return DeploymentPublic.model_validate(row.model_dump())
        return self._tx(work)

    def get_deployment(self, name: str) -> DeploymentPublic:
        return self._tx(lambda s: DeploymentPublic.model_validate(self._dep(s, name).model_dump()), write=False)

    def find_deployment(self, name: str) -> DeploymentPublic | None:
        """The deployment, or None where the registry has none of that name (``get_deployment`` raises)."""
        try:
            return self.get_deployment(name)
        except NotFoundError:
            return None

    def list_deployments(self) -> list[DeploymentPublic]:
        return self._tx(lambda s: [DeploymentPublic.model_validate(r.model_dump())
                                   for r in s.exec(select(Deployment).order_by(Deployment.name)).all()], write=False)
