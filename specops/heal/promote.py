"""Promote a canaried draft into a local deployment, or roll back to the incumbent.

``promote_local`` has two hand-overs:

- ``restart`` (default): the canary engine is stopped, the deployment is stopped and started again
  from its saved spec with the candidate draft, on its own port (clients keep their URL; the engine
  is down for one start, 40-70 s on CPU, less with the warm compile cache). If that start fails, the
  incumbent spec is started again and the error is raised.
- ``adopt``: the canary engine, already healthy, becomes the deployment (no extra start, no
  downtime), and the incumbent engine is stopped. The deployment's endpoint moves to the canary's
  port; the new endpoint is recorded in the registry and the saved spec.

``rollback_local`` stops the canary engine and makes sure the incumbent serves (it starts the saved
incumbent spec again if its process is gone). Every outcome is an event (``heal.promoted``,
``heal.rollback``) on the deployment.
"""

from __future__ import annotations

from specops.heal.canary import candidate_spec, saved_spec
from specops.heal.types import CanaryResult, Handover

ADOPTED_FIELDS = ("target_ref", "draft_ref", "method", "num_speculative_tokens", "vllm_version", "endpoint",
                  "served_model_name", "engine_config", "argv_redacted", "pid", "pid_start_time", "port",
                  "target_fingerprint", "draft_fingerprint", "api_key_env")


def _write_spec(name: str, spec) -> None:
    from specops.engines.layout import DeploymentFolder
    from specops.engines.spec import dump_spec

    DeploymentFolder.of(name).spec.write_text(dump_spec(spec))


def _keep_incumbent_spec(deployment: str) -> None:
    """``spec.incumbent.yaml``: what rollback starts again if the hand-over fails half-way."""
    from specops.engines.layout import DeploymentFolder

    d = DeploymentFolder.of(deployment)
    d.incumbent_spec.write_text(d.spec.read_text())


def promote_local(deployment: str, canary: CanaryResult, *, registry, handover: Handover = "restart",
                  progress=None, reason: str | None = None):
    """Serve ``canary.candidate`` in ``deployment``; returns the deployment row afterwards."""
    from specops.engines.deploy import deploy_local
    from specops.engines.manage import stop

    reg = registry
    before = reg.get_deployment(deployment)
    spec = saved_spec(deployment)
    _keep_incumbent_spec(deployment)
    draft = reg.get_draft(canary.candidate)
    if handover == "adopt":
        if not canary.canary_running:
            raise ValueError("adopt needs the canary engine running")
        row = _adopt(reg, deployment, canary.canary, spec, draft)
    else:
        if canary.canary_running:
            stop(canary.canary, registry=reg, grace_s=10)
        promoted = candidate_spec(spec, name=deployment, draft=draft, target_ref=draft.target, port=spec.serve.port)
        if progress:
            progress(f"promote: restarting {deployment} with {draft.ref} on port {spec.serve.port}")
        stop(deployment, registry=reg, progress=progress)
        try:
            deploy_local(promoted, registry=reg, check=False, progress=progress)
        except BaseException:
            restore_incumbent(deployment, registry=reg, progress=progress)
            raise
        row = reg.get_deployment(deployment)
    c = canary.comparison
    was = f"{c.incumbent_acceptance.acceptance_rate:.3f}" if c.incumbent_acceptance else "-"
    reg.record_event("heal.promoted", deployment, f"{deployment}: {before.draft_ref} -> {draft.ref} on {draft.target} "
                     f"({handover}; canary acceptance {was} -> {c.candidate_acceptance.acceptance_rate:.3f})",
                     reason=reason or canary.decision.reason,
                     data={"from": before.draft_ref, "to": draft.ref, "target": draft.target, "handover": handover,
                           "endpoint": row.endpoint, "canary": canary.canary, "canary_test": canary.canary_test_id,
                           "verdict": canary.verdict.line() if canary.verdict else None})
    return row


def _adopt(reg, deployment: str, canary: str, spec, draft):
    """The canary's engine becomes ``deployment``'s; then the incumbent's engine is stopped."""
    from specops.engines import local
    from specops.engines.deploy import read_engine_file
    from specops.engines.layout import DeploymentFolder

    old = reg.get_deployment(deployment)
    crow = reg.get_deployment(canary)
    promoted = candidate_spec(spec, name=deployment, draft=draft, target_ref=draft.target, port=crow.port)
    info = read_engine_file(canary) or {"pid": crow.pid, "start_time": crow.pid_start_time, "port": crow.port,
                                        "endpoint": crow.endpoint}
    fields = {k: getattr(crow, k) for k in ADOPTED_FIELDS}
    reg.upsert_deployment(deployment, platform="local", status="running", **fields)
    _write_spec(deployment, promoted)
    DeploymentFolder.of(deployment).write_engine({**info, "adopted_from": canary})
    DeploymentFolder.of(canary).forget_engine()
    reg.set_deployment_status(canary, "stopped", pid=None, pid_start_time=None,
                              reason=f"engine handed over to {deployment}")
    if old.pid:
        local.stop_group(old.pid, old.pid_start_time, grace_s=30)
    return reg.get_deployment(deployment)


def restore_incumbent(deployment: str, *, registry, progress=None) -> str:
    """Make sure the incumbent serves: start the saved incumbent spec again if its engine is gone."""
    from specops.engines import local
    from specops.engines.deploy import deploy_local
    from specops.engines.layout import DeploymentFolder
    from specops.engines.spec import load_spec

    reg = registry
    row = reg.get_deployment(deployment)
    if local.alive(row.pid, row.pid_start_time):
        return "serving"
    folder = DeploymentFolder.of(deployment)
    spec_file = folder.incumbent_spec if folder.incumbent_spec.is_file() else folder.spec
    if progress:
        progress(f"rollback: {deployment} is not running; starting the incumbent again from {spec_file.name}")
    spec = load_spec(spec_file)
    if row.pid:
        local.stop_group(row.pid, row.pid_start_time, grace_s=5)
    folder.forget_engine()
    deploy_local(spec, spec_path=spec_file, registry=reg, check=False, progress=progress, force=True,
                 reason="heal rollback: restoring the incumbent")
    _write_spec(deployment, spec)
    return "restarted"


def rollback_local(deployment: str, *, registry, canary: str | None = None, reason: str, progress=None,
                   canary_test: int | None = None) -> str:
    """Stop the canary engine (if any) and keep or bring back the incumbent; record ``heal.rollback``."""
    from specops.engines import local
    from specops.engines.manage import stop
    from specops.errors import NotFoundError

    reg = registry
    if canary:
        try:
            crow = reg.get_deployment(canary)
        except NotFoundError:
            crow = None
        if crow is not None and (crow.pid or local.alive(crow.pid, crow.pid_start_time)):
            stop(canary, registry=reg, grace_s=10)
    how = restore_incumbent(deployment, registry=reg, progress=progress)
    row = reg.get_deployment(deployment)
    reg.record_event("heal.rollback", deployment, f"{deployment} keeps {row.draft_ref} ({how})", reason=reason[:2000],
                     data={"draft": row.draft_ref, "canary": canary, "incumbent": how, "canary_test": canary_test})
    return how
