"""``retrain``: from "this deployment's draft went stale" to a registered, checked candidate draft.

1. read the deployment (target, incumbent draft) from the registry;
2. take the prompts (``--data FILE`` or the deployment's recorded traffic) and hold some out;
3. take the deployment's retraining lease (one job at a time; see :mod:`specops.retrain.lease`);
4. run the backend; register the draft with its lineage (target NAME@VERSION and fingerprint, data
   hash, exact commands, package versions) — the full record is the ``retrain.lineage`` event and
   ``lineage.json`` in the job folder;
5. train-stage check: incumbent and candidate acceptance on the held-out prompts, measured in-process
   one after the other (:func:`specops.retrain.acceptance.compare_drafts`), and the decision
   (promote/rollback), recorded as a validation run and an event;
6. end the job (the lease) whatever happened.

The deployment keeps serving its incumbent throughout: swapping the draft in (canary, promote) is
the caller's step, driven by the decision returned here.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import Field

from specops.errors import InputError, NotFoundError
from specops.models import Strict
from specops.retrain.types import BackendName, Comparison, Decision, TrainResult

CHECKLIST = "retrain/train-stage"


class RetrainOutcome(Strict):
    """What one retrain request did."""


    deployment: str
    backend: BackendName
    status: Literal["succeeded", "dry-run"] = Field(description="succeeded, or dry-run (nothing ran).")
    job_id: int | None = Field(default=None, description="Retraining job (lease) id.")
    work_dir: str = Field(description="The job's folder.")
    target: str = Field(description="Target NAME@VERSION trained against.")
    incumbent: str | None = Field(default=None, description="Incumbent draft NAME@VERSION.")
    draft: str | None = Field(default=None, description="Registered candidate draft NAME@VERSION.")
    heldout_prompts: int = Field(description="Prompts kept out of training for the check.")
    result: TrainResult
    comparison: Comparison | None = Field(default=None, description="Train-stage acceptance check.")
    decision: Decision | None = Field(default=None, description="promote or rollback, with the reason.")


def _incumbent(reg, dep):
    if not dep.draft_ref:
        return None
    try:
        return reg.get_draft(dep.draft_ref)
    except NotFoundError:
        return None


def _prompts(deployment: str, data: str | Path | None, from_traffic: bool, limit: int) -> tuple[list[str], str]:
    from specops.retrain.prompts import load_prompts, traffic_path, traffic_prompts

    if (data is None) == (not from_traffic):
        raise InputError("give exactly one source of prompts", "pass --data FILE or --from-traffic")
    if from_traffic:
        return traffic_prompts(deployment, limit), f"traffic ({traffic_path(deployment)})"
    return load_prompts(data, limit), str(Path(data).expanduser().resolve())


def _no_target(dep) -> InputError:
    """Why a deployment without a registered target cannot be retrained, with the fix for how it runs."""
    name = dep.name
    if dep.status == "adopted" or dep.platform == "external":
        return InputError(f"deployment {name} (adopted) records no target model, so there is nothing to train against",
                          "register the target (`specops lineage register-target PATH`), then record it and the "
                          f"incumbent draft: `specops deployment register {name} --endpoint "
                          f"{dep.endpoint or 'URL'} --target NAME@VERSION --draft NAME@VERSION`")
    return InputError(f"deployment {name} has no registered target",
                      "register the target (`specops lineage register-target PATH`), set target.ref: NAME@VERSION "
                      "in its spec and deploy it again (`specops deploy SPEC`)")


def _progress_writer(path: Path, job_id: int | None, every: int = 10, progress=None,
                     total_steps: int | None = None) -> Callable[[int, float], None]:
    """Writes ``progress.json`` every ``every`` steps; with ``progress``, also says the step and the time
    left (from the pace so far) at most every 5 s."""
    t0 = time.monotonic()
    said = [t0]

    def on_step(step: int, loss: float) -> None:
        now = time.monotonic()
        if progress and total_steps and step and now - said[0] >= 5:
            from specops.progress import waiting

            said[0] = now
            progress(waiting(f"training step {step} of {total_steps} (loss {loss:.3f})", now - t0,
                             (now - t0) * total_steps / step))
        if step % every:
            return
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"job": job_id, "pid": os.getpid(), "step": step, "loss": round(loss, 4),
                                   "at": time.time()}))
        tmp.replace(path)
    return on_step


def retrain(deployment: str, *, backend: BackendName = "local", data: str | Path | None = None,
            from_traffic: bool = False, registry=None, params: dict | None = None, heldout: int = 8,
            traffic_limit: int = 512, floor: float = 0.0, min_gain: float = 0.0, gamma: int = 3,
            lease_seconds: int = 2 * 3600, reason: str | None = None, dry_run: bool = False,
            draft_name: str | None = None, seed: int = 0, actor: str | None = None,
            progress=None) -> RetrainOutcome:
    """Retrain the draft of ``deployment``; see the module docstring. Raises LeaseHeldError (naming
    the holder) when a job for this deployment is already running."""
    from specops.retrain.backends import TrainContext, get_backend
    from specops.retrain.prompts import data_sha256, split_heldout

    own = registry is None
    if own:
        from specops.registry import open_registry

        registry = open_registry()
    reg = registry
    try:
        dep = reg.get_deployment(deployment)
        if not dep.target_ref:
            raise _no_target(dep)
        target = reg.get_target(dep.target_ref)
        inc = _incumbent(reg, dep)
        from specops.retrain.record import params_from_record

        params = params_from_record(backend, dep, inc, dict(params or {}))
        prompts, source = _prompts(deployment, data, from_traffic, traffic_limit)
        train, held = split_heldout(prompts, heldout, seed)
        be = get_backend(backend)
        inc_dir = inc.source if inc is not None and inc.source_kind == "local" else None
        if backend == "local":
            from specops.retrain.backends import require_local_dir

            require_local_dir(target.source, "target")
        base = dict(deployment=deployment, target_dir=target.source, target_ref=target.ref, incumbent_dir=inc_dir,
                    prompts=train, data_source=source, params=dict(params or {}))
        common = dict(deployment=deployment, backend=backend, target=target.ref,
                      incumbent=inc.ref if inc else None, heldout_prompts=len(held))
        if dry_run:
            from specops.engines.layout import DeploymentFolder

            work = DeploymentFolder.of(deployment).retrain / "dry-run"
            ctx = TrainContext(work_dir=str(work), **base)
            commands = be.plan(ctx)
            result = TrainResult(backend=backend, output_dir=str(ctx.out_dir), commands=commands,
                                 data_sha256=data_sha256(train),
                                 trained_on=f"{len(train)} prompts from {source}", method=be.method, dry_run=True)
            return RetrainOutcome(status="dry-run", work_dir=str(work), result=result, **common)
        return _run(reg, be, base, common, held, inc_dir, target, inc, floor=floor, min_gain=min_gain, gamma=gamma,
                    lease_seconds=lease_seconds, reason=reason, draft_name=draft_name, actor=actor,
                    progress=progress)
    finally:
        if own:
            reg.close()


def _run(reg, be, base: dict, common: dict, held: list[str], inc_dir: str | None, target, inc, *, floor: float,
         min_gain: float, gamma: int, lease_seconds: int, reason: str | None, draft_name: str | None,
         actor: str | None, progress=None) -> RetrainOutcome:
    from specops.retrain.backends import TrainContext
    from specops.retrain.lease import signals_as_exceptions, take_lease

    deployment = base["deployment"]
    job = take_lease(reg, deployment, backend=be.name, reason=reason, params=base["params"],
                     lease_seconds=lease_seconds, actor=actor)
    status, message, draft_ref = "failed", "interrupted", None
    try:
        with signals_as_exceptions():
            from specops.engines.layout import DeploymentFolder

            work = DeploymentFolder.of(deployment).retrain / f"job-{job.id}"
            work.mkdir(parents=True, exist_ok=True)
            ctx = TrainContext(work_dir=str(work), **base)
            steps = base["params"].get("steps", 300 if be.name == "local" else None)
            result = be.run(ctx, _progress_writer(work / "progress.json", job.id, progress=progress,
                                                  total_steps=steps if isinstance(steps, int) else None))
            draft = _register(reg, result, target, inc, deployment, draft_name, job.id, actor)
            draft_ref = draft.ref
            comparison = decision = None
            if be.name == "local":
                comparison, decision = _check(reg, deployment, target.source, inc_dir, result, held, gamma=gamma,
                                              min_gain=min_gain, floor=floor, draft_ref=draft_ref,
                                              max_new_tokens=int(base["params"].get("max_new_tokens", 64)), actor=actor)
            status = "succeeded"
            message = decision.reason if decision else "train-stage acceptance is measured by the canary (EAGLE heads)"
            return RetrainOutcome(status="succeeded", job_id=job.id, work_dir=str(work), draft=draft_ref, result=result,
                                  comparison=comparison, decision=decision, **common)
    except BaseException as exc:  # noqa: BLE001 - recorded, then re-raised
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        raise
    finally:
        reg.finish_retrain_job(job.id, status=status, result_draft_ref=draft_ref, message=message[:3900],
                               actor=actor)


def _register(reg, result: TrainResult, target, inc, deployment: str, draft_name: str | None, job_id: int,
              actor: str | None):
    lineage = {"job": job_id, "target": target.ref, "target_fingerprint": target.fingerprint,
               "data_sha256": result.data_sha256, "trained_on": result.trained_on, "commands": result.commands,
               "packages": result.packages, "initialised_from": result.initialised_from, "metrics": result.metrics}
    work = Path(result.output_dir).parent
    (work / "lineage.json").write_text(json.dumps(lineage, indent=2) + "\n")
    name = draft_name or (inc.name if inc is not None else f"{deployment}-draft")
    draft, _warnings = reg.register_draft(
        result.output_dir, target=target.ref, name=name, method=result.method,
        trained_on=f"{result.trained_on}; data sha256:{result.data_sha256}"[:1000],
        trainer_cmd=" && ".join(shlex.join(c) for c in result.commands)[:4000], actor=actor)
    reg.record_event("retrain.lineage", draft.ref, f"{draft.ref} trained by retraining job {job_id} "
                     f"({result.backend}) against {target.ref}", actor=actor, data=lineage)
    return draft


def _check(reg, deployment: str, target_dir: str, inc_dir: str | None, result: TrainResult, held: list[str], *,
           gamma: int, min_gain: float, floor: float, draft_ref: str, max_new_tokens: int, actor: str | None):
    from specops.retrain.acceptance import compare_drafts, decide

    comparison = compare_drafts(target_dir, inc_dir, result.output_dir, held, gamma=gamma,
                                max_new_tokens=max_new_tokens, min_gain=min_gain, floor=floor,
                                threads=int(result.metrics.get("threads", 2) or 2))
    decision = decide(comparison)
    summary = {"comparison": comparison.model_dump(mode="json"), "decision": decision.model_dump(mode="json")}
    reg.record_validation_run(deployment, checklist=CHECKLIST, passed=decision.action == "promote", summary=summary,
                              actor=actor)
    reg.record_event("retrain.decision", deployment, f"{decision.action} {draft_ref}: {decision.reason}", actor=actor,
                     reason=decision.reason, data={"draft": draft_ref, **decision.model_dump(mode="json")})
    return comparison, decision
