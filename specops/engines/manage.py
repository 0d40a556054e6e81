"""Day-2 operations on local deployments: status (health, uptime, live acceptance), logs, stop, restart.

A deployment is found in the registry; its process identity (pid + start time) comes from the
registry row, or from ``engine.json`` in its folder when the registry has none.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from specops.engines import local
from specops.engines.deploy import deploy_local, read_engine_file, require_reason
from specops.engines.layout import DeploymentFolder
from specops.errors import InputError, NotFoundError
from specops.models import Strict


class DeploymentStatus(Strict):
    """One deployment as it is now."""


    name: str = Field(description="Deployment name.")
    platform: str = Field(description="local or kubernetes.")
    status: str = Field(description="Registry status (pending/starting/running/stopped/failed/adopted).")
    process: str = Field(description="running, gone, or - (not a local process).")
    health: str = Field(description="ok, unreachable, HTTP <code>, stopped (not probed), or - (nothing to probe).")
    uptime_s: float | None = Field(None, description="Seconds since the server process started.")
    endpoint: str | None = Field(None, description="Base URL.")
    method: str | None = Field(None, description="Speculative method.")
    num_speculative_tokens: int | None = Field(None, description="γ.")
    num_drafts: float | None = Field(None, description="spec_decode num_drafts since start.")
    num_draft_tokens: float | None = Field(None, description="spec_decode num_draft_tokens since start.")
    num_accepted_tokens: float | None = Field(None, description="spec_decode num_accepted_tokens since start.")
    accepted_per_pos: list[float] = Field(default_factory=list, description="Accepted tokens per position.")
    acceptance_rate: float | None = Field(None, description="accepted / draft tokens since start (live).")
    mean_acceptance_length: float | None = Field(None, description="1 + accepted / drafts.")
    note: str | None = Field(None, description="Why something is missing.")


def _open(registry):
    if registry is not None:
        return registry
    from specops.registry import open_registry

    return open_registry()


def _identity(row) -> tuple[int | None, float | None]:
    if row.pid:
        return row.pid, row.pid_start_time
    info = read_engine_file(row.name) or {}
    return info.get("pid"), info.get("start_time")


def live_acceptance(endpoint: str, served_name: str | None, timeout: float = 3.0) -> dict:
    """The four vllm:spec_decode_* counters since the engine started, from /metrics, and the rates."""
    from specops.metrics import scrape
    from specops.speculation import Acceptance

    snap = scrape(endpoint, timeout=timeout)
    g = snap.groups.get(served_name or "") or (next(iter(snap.groups.values())) if len(snap.groups) == 1 else None)
    if g is None or not g.has_spec:
        return {"note": "no spec_decode counters (speculation off)"}
    out = {"num_drafts": g.num_drafts, "num_draft_tokens": g.num_draft_tokens,
           "num_accepted_tokens": g.num_accepted_tokens,
           "accepted_per_pos": [g.accepted_per_pos[k] for k in sorted(g.accepted_per_pos)]}
    acc = Acceptance(g.num_drafts, g.num_draft_tokens, g.num_accepted_tokens)
    if acc.rate is not None and acc.tau is not None:
        out["acceptance_rate"] = round(acc.rate, 4)
        out["mean_acceptance_length"] = round(acc.tau, 4)
    else:
        out["note"] = "no drafts yet (send a request)"
    return out


def status(name: str | None = None, *, registry=None) -> list[DeploymentStatus]:
    """Status of one deployment or all of them."""
    from specops.errors import MeasurementError, SpecopsError
    from specops.metrics.http import exchange

    reg = _open(registry)
    rows = [reg.get_deployment(name)] if name else reg.list_deployments()
    out = []
    for row in rows:
        st = DeploymentStatus(name=row.name, platform=row.platform, status=row.status, process="-", health="-",
                              endpoint=row.endpoint, method=row.method,
                              num_speculative_tokens=row.num_speculative_tokens)
        if row.status == "stopped":  # stopped on purpose: said so, never probed (and never "unreachable")
            st.health = "stopped"
            out.append(st)
            continue
        pid, start = _identity(row) if row.platform == "local" else (None, None)
        probe = bool(row.endpoint)
        if pid:
            running = local.alive(pid, start)
            st.process = "running" if running else "gone"
            if running and start is not None:
                st.uptime_s = round(local.uptime_s(start), 1)
            probe = probe and running
        elif row.platform == "local":
            st.note = "not started by specops (adopted or registered): no process to check; probed its endpoint"
        if not row.endpoint:
            st.note = ("no endpoint registered, so health and acceptance cannot be probed. To fix: `specops "
                       f"deployment register {row.name} --endpoint URL ...`")
        if probe:
            try:
                code = exchange("GET", row.endpoint + "/health", deadline_s=3.0).status
                st.health = "ok" if code == 200 else f"HTTP {code}"
            except MeasurementError as exc:
                st.health = "unreachable"
                st.note = exc.message
            if st.health == "ok":
                try:
                    st = st.model_copy(update=live_acceptance(row.endpoint, row.served_model_name))
                except SpecopsError as exc:
                    st.note = exc.message
        out.append(st)
    return out


def not_a_local_process(row, command: str) -> InputError:
    """Why ``command`` (stop, restart) does not apply to ``row``, with the fix that fits where it runs:
    an adopted engine is stopped where it runs (and forgotten with `deployment remove`); on Kubernetes a
    canary is rolled back and a stable scaled down with kubectl."""
    name = row.name
    if row.status == "adopted" or row.platform == "external":
        return InputError(f"deployment {name} was adopted (an engine not started by specops, at "
                          f"{row.endpoint or 'its endpoint'}), so specops cannot {command} it",
                          f"{command} it where it runs; then `specops deployment remove {name}` takes it off "
                          "specops' watch (its history is kept)")
    if row.platform == "kubernetes":
        labels = row.labels or {}
        ns = labels.get("namespace", "default")
        if labels.get("canary_of"):
            return InputError(f"deployment {name} is a Kubernetes canary of {labels['canary_of']}, not a local process",
                              f"run `specops rollback {name}` to remove it (or `specops promote {name}`)")
        kubectl = (f"kubectl rollout restart deployment/{name} -n {ns}" if command == "restart"
                   else f"kubectl scale deployment/{name} -n {ns} --replicas=0")
        return InputError(f"deployment {name} runs on Kubernetes (namespace {ns}), not as a local process",
                          f"run `{kubectl}`")
    return InputError(f"deployment {name} runs on {row.platform}, not as a local process",
                      f"{command} it with the tools of {row.platform}")


def status_exit_code(rows: list[DeploymentStatus]) -> tuple[int, list[str]]:
    """The exit code of ``specops status`` and the lines that explain it: 0 every deployment that should be
    serving answered its health check; 1 some did not (unreachable, an HTTP error, its process gone: each
    named); 2 none should be serving (no deployments, or every one stopped or without an endpoint), so
    nothing was checked - never a success."""
    expected = [r for r in rows if r.health != "stopped" and (r.endpoint or r.process != "-")]
    if not expected:
        why = ("no deployments in this registry" if not rows else
               "every deployment is stopped or has no endpoint to probe")
        return 2, [f"nothing checked: {why}. To fix: deploy one (`specops deploy SPEC`) or adopt one "
                   "(`specops deployment register NAME --endpoint URL`); check SPECOPS_HOME / SPECOPS_DB "
                   "point at the right registry"]
    down = [r for r in expected if r.health != "ok"]

    def why(r: DeploymentStatus) -> str:
        return "process gone" if r.process == "gone" else "no endpoint to probe" if r.health == "-" else r.health

    return (1 if down else 0), [f"{r.name}: not healthy ({why(r)})" for r in down]


def saved_spec(name: str, registry) -> tuple[object, Path] | None:
    """The spec ``name`` was deployed from and where it is saved: the deployment folder's spec.yaml, else
    (a monitor in the cluster has no folder) the spec a Kubernetes deploy recorded in the registry, written
    to that folder. None when neither exists; ValueError when the recorded one is no longer valid."""
    from specops.engines.spec import DeploymentSpec, dump_spec, load_spec

    path = DeploymentFolder.of(name).spec
    if path.is_file():
        return load_spec(path), path
    dep = registry.get_deployment(name)
    if dep.platform == "kubernetes" and dep.engine_config:
        spec = DeploymentSpec.model_validate({**dep.engine_config, "platform": "kubernetes"})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dump_spec(spec))
        return spec, path
    return None


def log_path(name: str, *, registry=None) -> Path:
    """The engine log of a local deployment specops started; otherwise a NotFoundError whose fix fits the
    deployment: unknown (did you mean), adopted (its log is where it runs), Kubernetes (kubectl logs)."""
    p = DeploymentFolder.of(name).log
    if p.is_file():
        return p
    row = _open(registry).get_deployment(name)  # an unknown name: "unknown deployment", with did-you-mean
    if row.platform == "kubernetes":
        ns = (row.labels or {}).get("namespace", "default")
        raise NotFoundError(f"deployment {name} runs on Kubernetes: its engine log is the pod's",
                            f"run `kubectl logs deployment/{name} -n {ns}`")
    if row.status == "adopted":
        raise NotFoundError(f"deployment {name} was adopted (not started by specops), so specops has no engine "
                            "log for it", f"read the log where the engine at {row.endpoint or 'its endpoint'} runs")
    raise NotFoundError(f"deployment {name} has no engine log ({row.status})",
                        f"start it with `specops restart {name}`" if DeploymentFolder.of(name).spec.is_file()
                        else "deploy it with `specops deploy SPEC`")


def tail(name: str, lines: int = 50) -> list[str]:
    return log_path(name).read_text(errors="replace").splitlines()[-lines:]


def stop(name: str, *, grace_s: float = 30.0, registry=None, progress: local.Progress | None = None) -> str:
    """Stop the local engine of ``name`` (only the process specops started). Returns how it ended."""
    reg = _open(registry)
    row = reg.get_deployment(name)
    if row.platform != "local" or row.status == "adopted":
        raise not_a_local_process(row, "stop")
    pid, start = _identity(row)
    how = local.stop_group(pid, start, grace_s=grace_s, progress=progress) if pid else "not running"
    folder = DeploymentFolder.of(name)
    folder.forget_engine()
    local.remove_tmpdir_link(folder.root)
    reg.set_deployment_status(name, "stopped", pid=None, pid_start_time=None)
    return how


def restart(name: str, *, registry=None, progress: local.Progress | None = None, check: bool = False,
            force: bool = False, reason: str | None = None):
    """Stop, then deploy again from the spec saved at the last deploy (warm compile cache).

    A lineage override (``--force --reason``) recorded for this deployment and the same target/draft
    pair still holds; a new override needs ``force`` and ``reason``."""
    from specops.engines.spec import load_spec

    reg = _open(registry)
    row = reg.get_deployment(name)  # an unknown name: "unknown deployment", with did-you-mean
    if row.platform != "local" or row.status == "adopted":
        raise not_a_local_process(row, "restart")
    spec_file = DeploymentFolder.of(name).spec
    if not spec_file.is_file():
        raise NotFoundError(f"deployment {name} has no saved spec", "deploy it with `specops deploy SPEC`")
    require_reason(force, reason)  # before the engine is stopped
    stop(name, registry=reg, progress=progress)
    return deploy_local(load_spec(spec_file), spec_path=spec_file, registry=reg, progress=progress, check=check,
                        force=force, reason=reason, keep_override=True)
