"""What `specops lineage ...` calls: register targets and drafts, judge pairs, the tree, export/import
and retention. Results are plain data (dicts and pydantic models), ready to render."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

from specops.errors import InputError, unknown
from specops.registry import open_registry


def model_row(m) -> dict:
    """One target or draft as a flat row (drafts add target, method and EAGLE generation)."""
    row = {"name": m.name, "version": m.version, "ref": f"{m.name}@{m.version}", "source": m.source,
           "architecture": m.architecture, "hidden_size": m.hidden_size, "num_layers": m.num_layers,
           "vocab_size": m.vocab_size, "fingerprint": m.fingerprint, "created_at": m.created_at.isoformat()}
    if hasattr(m, "method"):
        row.update(target=m.target, method=m.method, eagle_generation=m.eagle_generation)
    return row


def register_target(path: str, *, name: str | None = None, version: str | None = None, db: str | None = None) -> dict:
    """Fingerprint a target model and record it as NAME@VERSION."""
    return model_row(open_registry(db).register_target(path, name=name, version=version))


def register_draft(path: str, *, target: str, name: str | None = None, version: str | None = None,
                   method: str | None = None, trained_on: str | None = None, trainer_cmd: str | None = None,
                   db: str | None = None) -> tuple[dict, list]:
    """Record a draft and the target version it was trained against; returns (row, warnings)."""
    d, warnings = open_registry(db).register_draft(path, target=target, name=name, version=version, method=method,
                                                   trained_on=trained_on, trainer_cmd=trainer_cmd)
    return {**model_row(d), "warnings": [w.model_dump() for w in warnings]}, warnings


def list_models(db: str | None = None) -> dict:
    """Every registered target and draft."""
    reg = open_registry(db)
    return {"targets": [model_row(t) for t in reg.list_targets()], "drafts": [model_row(d) for d in reg.list_drafts()]}


def show(ref: str, db: str | None = None) -> list[dict]:
    """Every fact recorded for a target or draft (all versions when ``ref`` has no @VERSION)."""
    reg = open_registry(db)
    name, _, version = ref.rpartition("@") if "@" in ref else (ref, "", "")
    everything = reg.list_targets() + reg.list_drafts()
    pick = [x for x in everything if x.name == name and (not version or x.version == version)]
    if not pick:
        raise unknown("model", ref, {x.name for x in everything}, fix="list them with `specops lineage list`")
    rows = [json.loads(x.model_dump_json()) | {"kind": "draft" if hasattr(x, "method") else "target"} for x in pick]
    for row, x in zip(rows, pick, strict=True):
        if row["kind"] == "draft":
            row["canary_tests"] = canary_tests(reg, x.ref)
    return rows


def canary_tests(reg, draft_ref: str) -> list[dict]:
    """The canary tests a draft took part in (as candidate or incumbent), newest first, one dict each:
    the decision, samples of the budget, the stated false-promotion rate, the traffic, and a line."""
    out = []
    for t in reg.canary_tests(draft=draft_ref, limit=20):
        role = "candidate" if t.candidate == draft_ref else "incumbent"
        line = (f"#{t.id} {t.finished_at:%Y-%m-%d %H:%M} on {t.deployment}: {t.candidate} vs {t.incumbent or '-'}: "
                f"{t.decision} after {t.samples}/{t.budget} samples (alpha {t.alpha:g}, margin {t.min_gain:g}"
                + (f", mean gain {t.mean_gain:+.3f}" if t.mean_gain is not None else "")
                + (f", power {t.power:.2f}" if t.power is not None else "") + f"; {t.traffic})")
        out.append({"id": t.id, "role": role, "deployment": t.deployment, "candidate": t.candidate,
                    "incumbent": t.incumbent, "decision": t.decision, "samples": t.samples, "budget": t.budget,
                    "alpha": t.alpha, "min_gain": t.min_gain, "power": t.power, "mean_gain": t.mean_gain,
                    "traffic": t.traffic, "line": line})
    return out


def tree(db: str | None = None) -> list[dict]:
    """Targets -> drafts -> deployments: one entry per target, with its drafts and draftless deployments."""
    reg = open_registry(db)
    deps = reg.list_deployments()
    drafts = reg.list_drafts()
    out = []
    for t in reg.list_targets():
        mine = [{"ref": d.ref, "method": d.method,
                 "deployments": [{"name": x.name, "status": x.status} for x in deps
                                 if x.draft_ref == d.ref and x.target_ref == t.ref]}
                for d in drafts if d.target == t.ref]
        plain = [{"name": x.name, "status": x.status} for x in deps if x.target_ref == t.ref and not x.draft_ref]
        out.append({"ref": t.ref, "drafts": mine, "deployments": plain})
    return out


def check(target: str, draft: str, *, method: str | None = None, vllm_version: str = "0.33.0", db: str | None = None):
    """Judge a target/draft pair (a LineageReport; ``ok`` is False when any finding is an error)."""
    return open_registry(db).check_lineage(target, draft, vllm_version=vllm_version, method=method)


def export_json(*, with_events: bool = False, file: str | Path | None = None, db: str | None = None) -> str:
    """The registry as JSON text; also written to ``file`` when given."""
    if file:
        from specops.outputs import check_output

        check_output(file, "--file")  # before the registry is read
    text = json.dumps(open_registry(db).export_data(with_events=with_events), indent=1, sort_keys=True) + "\n"
    if file:
        from specops.outputs import write_text

        write_text(file, text, "--file", what="export")
    return text


def import_file(file: str | Path, db: str | None = None) -> dict:
    """Import an export in one transaction (a conflict or bad row writes nothing); counts per table."""
    from specops.registry.transfer import load_export

    return open_registry(db).import_data(load_export(file), source=str(file))


def parse_duration(text: str, flag: str) -> timedelta:
    """'7d' / '12h' / '30m' -> timedelta; anything else is an InputError naming ``flag``."""
    m = re.fullmatch(r"(\d+)\s*([dhm])", text.strip())
    if not m:
        raise InputError(f'{flag} "{text}" is not a duration', f"write it as 7d, 12h or 30m, e.g. {flag} 30d")
    n, unit = int(m.group(1)), m.group(2)
    return timedelta(days=n) if unit == "d" else timedelta(hours=n) if unit == "h" else timedelta(minutes=n)


def prune(*, raw: str = "7d", hourly: str = "30d", horizon: str = "365d", apply: bool = False,
          db: str | None = None) -> dict:
    """Retention: downsample old measurements and delete beyond a horizon (a dry run unless ``apply``)."""
    rep = open_registry(db).prune(raw_for=parse_duration(raw, "--raw"), hourly_for=parse_duration(hourly, "--hourly"),
                                  horizon=parse_duration(horizon, "--horizon"), apply=apply)
    return rep.model_dump(mode="json")
