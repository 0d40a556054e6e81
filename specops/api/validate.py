"""What `specops validate`, `specops gate` and `specops report` call.

- ``validate``: one checklist against one registered deployment, recorded (specops.checks.run).
- ``gate``: a deployment spec in CI: schema, vLLM capabilities and lineage, and with an endpoint the
  deploy checklist against the running engine.
- ``report``: the self-contained HTML report of a deployment, from the registry.
"""

from __future__ import annotations

from pathlib import Path

from specops.checks.evaluate import run_checklist
from specops.checks.junit import write_junit
from specops.checks.playbook import get_profile, load_checklist
from specops.checks.run import validate
from specops.checks.sources import Sources, default_sources
from specops.checks.types import CheckResult, ValidationReport
from specops.metrics import parse_duration
from specops.models import status_word

__all__ = ["gate", "parse_duration", "report", "status_word", "validate", "write_junit"]


def report(deployment: str, out: str | Path | None = None, *, registry=None) -> Path:
    """Write the HTML report of ``deployment`` (default file ``<deployment>-report.html``); returns its path."""
    from specops.checks.report import render_html, report_from_registry, write_report
    from specops.outputs import check_output
    from specops.registry import open_registry
    from specops.settings import check_path_component

    if out is None:  # the default file is built from the name: it must stay in the working folder
        check_path_component(deployment, "deployment name")
    target, default = (out, False) if out is not None else (f"{deployment}-report.html", True)
    check_output(target, "--out", makes_folders=True, default=default)  # before any work
    parts = report_from_registry(registry or open_registry(), deployment)
    return write_report(render_html(**parts), target, default=default)


GATE_SOURCE = "issue 7 (specops gate)"


def _gate_result(id_: str, description: str, kind: str, status: str, message: str, fix: str | None = None,
                 evidence: dict | None = None) -> CheckResult:
    return CheckResult(id=id_, description=description, kind=kind, severity="error", source=GATE_SOURCE,
                       status=status, message=message, fix=fix, evidence=evidence or {})


def gate(spec_path: str | Path, *, endpoint: str | None = None, profile: str = "gpu-default",
         prometheus_url: str | None = None, baseline_endpoint: str | None = None, registry=None,
         sources: Sources | None = None, progress=None) -> list[ValidationReport]:
    """Schema, capability and lineage checks of a deployment spec; with an endpoint, the deploy checklist."""
    from datetime import datetime, timezone

    from specops.engines.spec import load_spec
    from specops.errors import SpecopsError

    started = datetime.now(timezone.utc)
    prof = get_profile(profile)
    name = Path(spec_path).stem
    results: list[CheckResult] = []
    schema = "The spec file is valid YAML and matches the schema."
    try:
        spec = load_spec(spec_path)
    except SpecopsError as exc:
        spec, pins = _unpinned(spec_path)
        results.append(_gate_result("gate.schema", schema, "config", "fail", pins or exc.message,
                                    _pin_fix() if pins else exc.fix))
        if spec is None:
            return [ValidationReport(checklist="gate", deployment=name, profile=profile, started_at=started,
                                     finished_at=datetime.now(timezone.utc), results=results)]
    else:
        results.append(_gate_result("gate.schema", schema, "config", "pass",
                                    f"{spec_path} is a valid deployment spec ({spec.name})"))
    name = spec.name
    results.append(_capability(spec))
    results.append(_known_bugs(spec))
    results.append(_spec_lineage(spec, registry))
    reports = [ValidationReport(checklist="gate", deployment=name, profile=profile, started_at=started,
                                finished_at=datetime.now(timezone.utc), results=results)]
    if endpoint or sources is not None:
        src = sources or _spec_sources(spec, endpoint, prometheus_url, baseline_endpoint, registry, progress)
        reports.append(run_checklist(load_checklist("deploy"), profile, prof, src))
    return reports


def _pin_fix() -> str:
    from specops.engines.spec import PIN_FIX

    return PIN_FIX


def _unpinned(spec_path):
    """When the only schema problems are revisions that are not commits (a ``<pin>`` placeholder, a branch):
    (the spec without those revisions, the problems in one line), so that one gate run also checks everything
    else; otherwise (None, the problems or None)."""
    from specops.engines.spec import COMMIT, DeploymentSpec, pin_problems
    from specops.errors import SpecopsError
    from specops.yamlfile import load_yaml

    try:
        data = load_yaml(spec_path)
    except SpecopsError:
        return None, None
    problems = pin_problems(data)
    if not problems:
        return None, None
    clean = {**data}
    for role in ("target", "draft"):
        ref = clean.get(role)
        if isinstance(ref, dict) and isinstance(ref.get("revision"), str) and not COMMIT.match(ref["revision"]):
            clean[role] = {k: v for k, v in ref.items() if k != "revision"}
    try:
        return DeploymentSpec.model_validate(clean), "; ".join(problems)
    except Exception:  # noqa: BLE001 - another schema problem too (a placeholder model): the pins alone are named
        return None, "; ".join(problems)


def _capability(spec) -> CheckResult:
    from specops.engines.argv import render_argv
    from specops.errors import SpecopsError
    from specops.secrets import redact_argv

    desc = "The vLLM version named in the spec has every method, flag and KV dtype it uses."
    try:
        argv = render_argv(spec.launch_config(), entrypoint="console")
    except SpecopsError as exc:
        return _gate_result("gate.capability", desc, "config", "fail", exc.message, exc.fix)
    return _gate_result("gate.capability", desc, "config", "pass",
                        f"renders for vLLM {spec.engine.vllm_version} ({len(argv)} arguments)",
                        evidence={"argv": redact_argv(argv)})


def _known_bugs(spec) -> CheckResult:
    """The spec as written must carry every mitigation a known-bug row requires (deploy adds them
    anyway; the spec in git should say what runs) and hit no refused combination."""
    from specops.engines.bugs import spec_findings

    desc = "The spec hits no refused known-bug combination and carries every required mitigation."
    status, message, fix = spec_findings(spec.launch_config())
    return _gate_result("gate.known-bugs", desc, "config", status, message, fix)


def _hub_ref(ref) -> str:
    """How a model is named on the command line: a pinned hub model as ``org/name@revision``."""
    from specops.registry.fingerprint import looks_like_hub_id

    return f"{ref.model}@{ref.revision}" if ref.revision and looks_like_hub_id(ref.model) else ref.model


def _spec_lineage(spec, registry) -> CheckResult:
    from specops.errors import NotFoundError, SpecopsError
    from specops.registry.fingerprint import looks_like_hub_id

    desc = "The draft was trained against the target version the spec deploys."
    method = spec.speculative.method.lower()
    if spec.draft is None:
        return _gate_result("gate.lineage", desc, "lineage", "pass", f"method {method} has no separate draft weights")
    try:
        reg = registry
        if reg is None:
            from specops.registry import open_registry

            reg = open_registry()
        missing: list[SpecopsError] = []  # every registration the spec lacks, in one run
        try:
            t_ref = spec.target.ref or _registered_ref(reg, _hub_ref(spec.target), "target", spec)
        except NotFoundError as exc:
            missing.append(exc)
            t_ref = None
        if t_ref is not None or looks_like_hub_id(spec.target.model):
            try:
                d_ref = spec.draft.ref or _registered_ref(reg, _hub_ref(spec.draft), "draft", spec,
                                                          t_ref or _hub_ref(spec.target))
            except NotFoundError as exc:
                missing.append(exc)
        if missing:
            return _gate_result("gate.lineage", desc, "lineage", "error",
                                "could not evaluate: " + "; ".join(e.message for e in missing),
                                "; then ".join(e.fix for e in missing if e.fix))
        report = reg.check_lineage(t_ref, d_ref, vllm_version=spec.engine.vllm_version, method=method)
    except SpecopsError as exc:
        return _gate_result("gate.lineage", desc, "lineage", "error", f"could not evaluate: {exc.message}", exc.fix)
    if report.verdict == "could not evaluate":
        blind = report.unevaluated
        return _gate_result("gate.lineage", desc, "lineage", "error",
                            "could not evaluate: " + "; ".join(f"{f.code}: {f.message}" for f in blind), blind[0].fix,
                            {"findings": [f.model_dump(mode="json") for f in report.findings]})
    errors = [f for f in report.findings if f.severity == "error"]
    if errors:
        return _gate_result("gate.lineage", desc, "lineage", "fail",
                            "; ".join(f"{f.code}: {f.message}" for f in errors), errors[0].fix,
                            {"findings": [f.model_dump(mode="json") for f in report.findings]})
    return _gate_result("gate.lineage", desc, "lineage", "pass", f"{report.draft} belongs to {report.target}")


def _registered_ref(reg, model: str, kind: str, spec, target_ref: str | None = None) -> str:
    """The registry ref of the spec's ``kind`` model: a local folder by its fingerprint; a hub id
    (``org/name[@revision]``) as ``name@revision``, then as ``name`` (its newest version)."""
    from specops.errors import NotFoundError
    from specops.registry.fingerprint import looks_like_hub_id

    if looks_like_hub_id(model):
        hub_id, _, revision = model.partition("@")
        get = reg.get_target if kind == "target" else reg.get_draft
        for ref in ([f"{hub_id}@{revision}"] if revision else []) + [hub_id]:
            try:
                found = get(ref)
            except NotFoundError:
                continue
            return f"{found.name}@{found.version}"
    elif Path(model).expanduser().exists():
        found = reg.find_by_path(str(Path(model).expanduser().resolve()))
        if found is not None:
            return f"{found.name}@{found.version}"
    command = f"specops lineage register-{kind} {model}"
    if kind == "draft":
        command += f" --target {target_ref} --method {spec.speculative.method.lower()}"
    raise NotFoundError(f"the registry does not know the {kind} {model}",
                        f"set {kind}.ref: NAME@VERSION in the spec, or `{command}`")


def _spec_sources(spec, endpoint, prometheus_url, baseline_endpoint, registry, progress=None) -> Sources:
    """Sources for the deploy checklist in a gate: the registered deployment if any, else the spec."""
    from specops.checks.sources import endpoint_windows, http_complete, prometheus_windows
    from specops.errors import NotFoundError
    from specops.settings import setting

    try:
        src = default_sources(spec.name, prometheus_url=prometheus_url, baseline_endpoint=baseline_endpoint,
                              registry=registry, progress=progress)
        if endpoint:
            src.deployment["endpoint"] = endpoint
        return src
    except NotFoundError:
        pass
    from specops.engines.argv import speculative_config

    lc = spec.launch_config()
    facts = {"name": spec.name, "endpoint": endpoint, "served_model_name": spec.served_name(),
             "method": spec.speculative.method, "num_speculative_tokens": spec.speculative.num_speculative_tokens,
             "vllm_version": spec.engine.vllm_version, "target_ref": spec.target.ref,
             "draft_ref": spec.draft.ref if spec.draft else None, "speculative_config": speculative_config(lc),
             "argv_redacted": []}
    url = setting("prometheus_url", prometheus_url)
    windows = (prometheus_windows(str(url), [spec.name, spec.served_name()]) if url
               else endpoint_windows(endpoint, spec.served_name(), progress=progress))
    return Sources(deployment=facts, windows=windows, registry=registry, baseline_endpoint=baseline_endpoint,
                   complete=http_complete, bench_events=[])
