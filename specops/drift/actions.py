"""The real actions of a policy, and the registry as the monitor's event log.

``RegistryEvents`` records every action decision as a registry event ``monitor.<action>`` (its
reason, outcome and the episode it belongs to); ``restore_ledger`` reads them back so that actions
stay idempotent across ``--once`` runs (a cron job must not notify or restart again every five
minutes for the same episode).

``EngineExecutor`` carries the actions out through ``specops.engines`` (local deployments) and
``specops.k8s`` (Kubernetes deployments):

- ``restart_probe``: ``engines.manage.restart`` (stop, then deploy again from the saved spec; the
  lineage gate runs again, so a restart never brings up a pair that no longer matches); local only;
- ``disable_speculation``: the saved spec without speculation, redeployed locally, or on Kubernetes
  re-rendered and server-side applied (``specops.k8s.reapply.reapply_spec``: the Deployment's args
  lose ``--speculative-config``); the spec that ran before is kept as ``spec.before-fallback.yaml``
  for the way back;
- ``retune_gamma``: the saved spec with the proposed γ / per-batch schedule, redeployed or re-applied
  the same way;
- ``open_retraining``: starts a retraining job (``python -m specops.retrain.worker --deployment D``,
  the library's retrain call in a worker process, not the CLI) detached (the retraining lease in
  the registry keeps it to one job per deployment) on the prompts named by the
  ``retrain_data`` setting, else on the deployment's recorded traffic; with the rule's ``heal: true``
  the whole heal loop instead (``python -m specops.heal.worker``: retrain → validate → canary →
  promote or roll back, ``specops heal``'s defaults; the heal's lease keeps it to one per deployment;
  local deployments only);
- ``notify``: a log line and, when the rule names one, a webhook POST.

The saved spec is ``$SPECOPS_HOME/deployments/<name>/spec.yaml`` (written by every deploy); an
in-cluster monitor, whose home is an emptyDir, falls back to the spec the deploy recorded in the
shared registry (the row's ``engine_config``). Anything that cannot be done (a restart probe on
Kubernetes, no saved spec, no prompts, a field another manager owns) is ``Fatal`` with the reason; a
failure of the engine or the API server is reported the same way and recorded.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from pathlib import Path

from specops.drift.outcomes import Fatal
from specops.drift.policy import ActionRunner, post_webhook
from specops.errors import SpecopsError
from specops.models import Finding

log = logging.getLogger("specops.monitor")
ACTOR = "specops-monitor"


class RegistryEvents:
    """EventSink writing to the registry's append-only event log."""

    def __init__(self, reg, actor: str = ACTOR) -> None:
        self.reg, self.actor = reg, actor

    def record(self, deployment: str, kind: str, reason: str, data: dict) -> None:
        outcome = data.get("outcome", "")
        detail = f" ({data['detail']})" if data.get("detail") else ""
        msg = f"{deployment}: {kind.removeprefix('monitor.')} {outcome}{detail}"
        self.reg.record_event(kind, deployment, msg[:4000], actor=self.actor, reason=reason[:2000], data=data)


def restore_ledger(runner: ActionRunner, reg, deployments: list[str], limit: int = 5000) -> int:
    """Seed the runner's idempotency ledger from recorded ``monitor.*`` action events; returns how many."""
    wanted, n = set(deployments), 0
    for ev in reversed(reg.events(limit=limit)):  # oldest first, so newer entries win
        d = ev.data or {}
        if not ev.kind.startswith("monitor.") or ev.subject not in wanted or "action" not in d:
            continue
        if d.get("outcome") == "dry-run" and not runner.policy.dry_run:
            continue  # what a dry run would have done does not hold back the real action
        retry_after = 0.0
        if d.get("outcome") == "retry":
            retry_after = d.get("at", 0.0) + float(d.get("retry_in_s") or 60.0)
        runner.ledger[(ev.subject, d["action"], d["finding"])] = (d.get("episode"), d.get("at", 0.0), retry_after)
        n += 1
    return n


class EngineExecutor:
    """Carries out policy actions on local and Kubernetes deployments (see the module docstring)."""

    def __init__(self, reg, *, progress=None, retrain_data: str | None = None, spawn=None, api_client=None) -> None:
        self.reg, self.progress, self.retrain_data = reg, progress, retrain_data
        self.api_client = api_client  # Kubernetes: None = KUBECONFIG or the in-cluster service account
        self.spawn = spawn or _spawn_detached

    # --- helpers ---------------------------------------------------------------------------------
    def _local(self, deployment: str, what: str):
        dep = self.reg.get_deployment(deployment)
        if dep.platform != "local":
            raise Fatal(f"{what} of {deployment} ({dep.platform}) is not wired in this monitor: only local "
                        "deployments are redeployed from here")
        return dep

    def _saved_spec(self, deployment: str):
        from specops.engines.layout import DeploymentFolder
        from specops.engines.manage import saved_spec

        try:
            found = saved_spec(deployment, self.reg)
        except ValueError as exc:
            raise Fatal(f"the spec recorded for {deployment} in the registry is not valid now "
                        f"({exc.__class__.__name__}); redeploy it with `specops deploy SPEC`") from None
        if found is None:
            raise Fatal(f"{deployment} has no saved spec ({DeploymentFolder.of(deployment).spec}); redeploy it "
                        "with `specops deploy SPEC` first")
        return found

    def _redeploy(self, deployment: str, spec, why: str) -> None:
        from specops.engines.deploy import deploy_local
        from specops.engines.manage import stop

        if self.reg.get_deployment(deployment).platform == "kubernetes":
            return self._reapply(deployment, spec, why)
        try:
            stop(deployment, registry=self.reg, progress=self.progress)
            deploy_local(spec, registry=self.reg, progress=self.progress, check=False)
        except SpecopsError as exc:
            raise Fatal(f"{why} failed: {exc.one_line()}") from None

    def _reapply(self, deployment: str, spec, why: str) -> None:
        from specops.k8s.reapply import reapply_spec

        try:
            reapply_spec(spec, reason=why, registry=self.reg, actor=ACTOR, api_client=self.api_client)
        except SpecopsError as exc:
            raise Fatal(f"{why} failed: {exc.one_line()}") from None

    def _supported(self, deployment: str, what: str):
        dep = self.reg.get_deployment(deployment)
        if dep.platform not in ("local", "kubernetes"):
            raise Fatal(f"{what} of {deployment} ({dep.platform}) is not wired in this monitor: only local and "
                        "Kubernetes deployments are changed from here")
        return dep

    # --- actions ---------------------------------------------------------------------------------
    def notify(self, deployment: str, finding: Finding, webhook_url: str | None) -> None:
        log.warning("%s %s", deployment, finding.one_line())
        if webhook_url:
            post_webhook(webhook_url, {"deployment": deployment, **finding.model_dump(mode="json")})

    def restart_probe(self, deployment: str, reason: str) -> None:
        from specops.engines.manage import restart

        self._local(deployment, "a restart probe")
        try:
            restart(deployment, registry=self.reg, progress=self.progress)
        except SpecopsError as exc:
            raise Fatal(f"restart probe failed: {exc.one_line()}") from None

    def disable_speculation(self, deployment: str, reason: str) -> None:
        self._supported(deployment, "disabling speculation")
        spec, path = self._saved_spec(deployment)
        if spec.speculative.method == "none":
            return  # already off: idempotent
        path.with_name("spec.before-fallback.yaml").write_text(path.read_text())
        off = spec.model_copy(update={"draft": None, "speculative": spec.speculative.model_copy(update={
            "method": "none", "num_speculative_tokens": None, "num_speculative_tokens_per_batch_size": None})})
        self._redeploy(deployment, off, "turning speculation off")

    def retune_gamma(self, deployment: str, proposal: dict) -> None:
        self._supported(deployment, "retuning γ")
        spec, _ = self._saved_spec(deployment)
        proposed = [tuple(int(x) for x in r) for r in proposal.get("proposed") or []]
        if not proposed:
            raise Fatal("the γ proposal holds no schedule")
        top = max(k for _, _, k in proposed)
        if top == 0:
            raise Fatal("the proposal turns speculation off everywhere; use disable_speculation for that")
        sp = spec.speculative.model_copy(update={
            "num_speculative_tokens": top,
            "num_speculative_tokens_per_batch_size": proposed if len(proposed) > 1 else None})
        if sp == spec.speculative:
            return
        self._redeploy(deployment, spec.model_copy(update={"speculative": sp}), f"applying the new γ ({top})")

    def open_retraining(self, deployment: str, reason: str, heal: bool = False) -> None:
        from specops.retrain.prompts import traffic_path
        from specops.settings import deployment_dir

        if heal:
            self._local(deployment, "a heal")
        worker = "specops.heal.worker" if heal else "specops.retrain.worker"
        argv = [sys.executable, "-m", worker, "--deployment", deployment, "--reason", reason[:500]]
        if self.retrain_data:
            argv += ["--data", str(Path(self.retrain_data).expanduser())]
        elif traffic_path(deployment).is_file():
            argv += ["--from-traffic"]
        else:
            raise Fatal(f"no prompts to retrain {deployment} on: no retrain_data setting and no recorded traffic "
                        f"({traffic_path(deployment)}); set SPECOPS_RETRAIN_DATA or record traffic")
        logfile = deployment_dir(deployment) / ("heal" if heal else "retrain") / f"monitor-{int(time.time())}.log"
        self.spawn(argv, logfile)


def _spawn_detached(argv: list[str], logfile: Path) -> None:
    logfile.parent.mkdir(parents=True, exist_ok=True)
    with open(logfile, "ab") as out:
        subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                         start_new_session=True, close_fds=True)
