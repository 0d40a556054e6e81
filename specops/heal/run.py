"""``heal``: the closed loop for one local deployment, every step recorded in the registry.

resolve the live target → retrain (lease-guarded, :func:`specops.retrain.retrain`) → train-stage
validation (the held-out check and the ``train`` checklist on the candidate pair) → engine canary
(:func:`specops.heal.canary.canary_local`) → acceptance comparison against the incumbent → promote
(:func:`specops.heal.promote.promote_local`) or roll back.

One heal per deployment at a time: the heal holds the lease of the canary deployment
(``<name>-canary``, registry retraining-job row with backend ``heal``) for its whole run, and the
retraining step takes the deployment's own lease. The incumbent keeps serving until promotion; any
exception or SIGTERM/SIGINT/SIGHUP stops the canary engine, makes sure the incumbent serves (it is
started again only if a hand-over had already stopped it), and releases both leases.
"""

from __future__ import annotations

import time
from pathlib import Path

from specops.errors import InputError
from specops.heal.canary import canary_name
from specops.heal.types import Handover, HealOutcome, HealStep

HEAL_BACKEND = "heal"


class _Steps:
    """Runs and records steps (event ``heal.step`` per step)."""

    def __init__(self, reg, deployment: str, progress) -> None:
        self.reg, self.deployment, self.progress = reg, deployment, progress
        self.done: list[HealStep] = []

    def add(self, step: str, status: str, detail: str, t0: float) -> HealStep:
        s = HealStep(step=step, status=status, detail=detail[:1000], seconds=round(time.monotonic() - t0, 1))
        self.done.append(s)
        self.reg.record_event("heal.step", self.deployment, f"{step}: {status} - {s.detail}",
                              data=s.model_dump(mode="json"))
        if self.progress:
            self.progress(f"[{step}] {status} in {s.seconds:.1f}s: {s.detail}")
        return s


def canary_test_params(*, alpha: float, min_gain: float, budget: int):
    """The canary's :class:`~specops.heal.sequential.SequentialTest`; bad values are one InputError."""
    from pydantic import ValidationError

    from specops.heal.sequential import SequentialTest

    try:
        return SequentialTest(alpha=alpha, min_gain=min_gain, budget=budget)
    except ValidationError as exc:
        e = exc.errors()[0]
        raise InputError(f"canary test: {'.'.join(str(x) for x in e['loc'])}: {e['msg']} (got {e.get('input')!r})",
                         "use --alpha in (0, 0.5], --min-gain in [0, 1) and --budget of 2 or more") from None


def resolve_live_target(reg, deployment: str) -> tuple[str | None, str]:
    """The registered target the deployment's folder holds now; the row is corrected when it differs.
    Weights no registered target has are registered as the next version of the deployment's target."""
    from specops.drift.fleet import LiveFingerprints, served_model_path

    dep = reg.get_deployment(deployment)
    served = served_model_path(dep)
    fp = LiveFingerprints().folder(served) if served else None
    if fp is None:
        return dep.target_ref, f"{deployment} serves {dep.target_ref} (no local folder to fingerprint)"
    current = reg.get_target(dep.target_ref) if dep.target_ref else None
    if current is not None and current.fingerprint == fp:
        return current.ref, f"{served} holds {current.ref}, as recorded"
    matches = [t for t in reg.list_targets() if t.fingerprint == fp]
    same = [t for t in matches if current is not None and t.name == current.name]
    if same or matches:
        live = (same or matches)[-1]
        how = "matches"
    else:
        live = reg.register_target(served, name=current.name if current else None)
        how = "registered as"
    reg.upsert_deployment(deployment, platform=dep.platform, status=dep.status, target_ref=live.ref,
                          target_fingerprint=fp)
    detail = f"{served} now holds {live.ref} ({how} fingerprint {fp[:15]}...), not {dep.target_ref}"
    reg.record_event("heal.target", deployment, detail, data={"from": dep.target_ref, "to": live.ref,
                                                              "fingerprint": fp})
    return live.ref, detail


def heal_prompts(deployment: str, data: str | Path | None, from_traffic: bool, heldout: int, seed: int,
                 limit: int = 512) -> list[str]:
    """The held-out prompts the retraining step kept out (same source, same seeded split)."""
    from specops.retrain.prompts import load_prompts, split_heldout, traffic_prompts

    prompts = traffic_prompts(deployment, limit) if from_traffic else load_prompts(data, limit)
    return split_heldout(prompts, heldout, seed)[1]


def snapshot_traffic(deployment: str, limit: int = 512) -> Path:
    """The newest recorded prompts, frozen in ``deployments/NAME/heal/traffic-<time>.jsonl``."""
    from specops.retrain.prompts import traffic_prompts, write_prompts
    from specops.settings import deployment_dir

    path = deployment_dir(deployment) / "heal" / f"traffic-{time.strftime('%Y%m%dT%H%M%S')}.jsonl"
    return write_prompts(traffic_prompts(deployment, limit), path)


def heal(deployment: str, *, data: str | Path | None = None, from_traffic: bool = False, params: dict | None = None,
         heldout: int = 24, min_gain: float = 0.05, floor: float = 0.0, max_tokens: int = 48,
         handover: Handover = "restart", dry_run: bool = False, reason: str | None = None, seed: int = 0,
         alpha: float = 0.05, budget: int | None = None, registry=None, progress=None) -> HealOutcome:
    """Run the closed loop on ``deployment`` (see the module docstring). The canary's sequential test
    runs at false-promotion rate ``alpha`` with margin ``min_gain`` on at most ``budget`` (default
    ``heldout``) held-out prompts."""
    test = canary_test_params(alpha=alpha, min_gain=min_gain, budget=budget or heldout)
    if (data is None) == (not from_traffic):
        raise InputError("give exactly one source of prompts", "pass --data FILE or --from-traffic")
    if handover not in ("restart", "adopt"):
        from specops.errors import unknown

        raise unknown("hand-over", handover, ["restart", "adopt"])
    own = registry is None
    if own:
        from specops.registry import open_registry

        registry = open_registry()
    try:
        dep = registry.get_deployment(deployment)
        if dep.status == "adopted" or dep.platform == "external":
            raise InputError(f"deployment {deployment} was adopted (its engine was not started by specops), and heal "
                             "restarts the engine it heals",
                             f"retrain its draft with `specops retrain --deployment {deployment} --data FILE`, then "
                             "serve the new draft where the engine runs")
        if dep.platform != "local":
            raise InputError(f"deployment {deployment} runs on {dep.platform}",
                             f"heal drives local engines; on Kubernetes run `specops retrain --deployment {deployment} "
                             "--data FILE`, then `specops deploy SPEC --platform kubernetes --canary-of "
                             f"{deployment}` and `specops canary watch CANARY` (the test on live traffic promotes "
                             "or rolls back)")
        if dry_run:
            return _plan(registry, deployment, data, from_traffic, params, heldout, handover)
        return _heal(registry, deployment, data=data, from_traffic=from_traffic, params=params, heldout=heldout,
                     test=test, min_gain=min_gain, floor=floor, max_tokens=max_tokens, handover=handover, reason=reason,
                     seed=seed, progress=progress)
    finally:
        if own:
            registry.close()


def _plan(reg, deployment, data, from_traffic, params, heldout, handover) -> HealOutcome:
    import shlex

    from specops.retrain import retrain

    out = retrain(deployment, data=data, from_traffic=from_traffic, registry=reg, params=params, heldout=heldout,
                  dry_run=True)
    plan = [f"retrain ({out.backend}) against {out.target}: " + " && ".join(shlex.join(c) for c in out.result.commands),
            f"train-stage validation: held-out acceptance of {out.heldout_prompts} prompts and the `train` checklist",
            f"canary: {deployment} (incumbent {out.incumbent}) then {canary_name(deployment)} (candidate) on the "
            f"same {out.heldout_prompts} held-out prompts, prompt by prompt, a sequential test of the per-request "
            "acceptance difference",
            f"promote ({handover}) if the test says 'better', else roll back ('worse' or 'no decision')"]
    return HealOutcome(deployment=deployment, status="dry-run", live_target=out.target, incumbent_draft=out.incumbent,
                       serving_draft=out.incumbent, plan=plan)


def _take_heal_lease(reg, deployment: str, reason: str | None):
    from specops.engines import local
    from specops.engines.manage import stop
    from specops.errors import NotFoundError
    from specops.registry.measurements import LeaseHeldError
    from specops.retrain.lease import take_lease

    name = canary_name(deployment)
    try:
        row = reg.get_deployment(name)
    except NotFoundError:
        row = reg.upsert_deployment(name, platform="local", status="pending")
    try:
        job = take_lease(reg, name, backend=HEAL_BACKEND, reason=reason, params=None, lease_seconds=6 * 3600)
    except LeaseHeldError as exc:
        raise LeaseHeldError(f"a heal of {deployment} is already running ({exc.message})",
                             "wait for it to finish; `specops status` shows its canary") from None
    if local.alive(row.pid, row.pid_start_time):  # left behind by a heal that was killed
        stop(name, registry=reg, grace_s=10)
    return job


def _heal(reg, deployment: str, *, data, from_traffic, params, heldout, test, min_gain, floor, max_tokens, handover,
          reason, seed, progress) -> HealOutcome:
    from specops.retrain.lease import signals_as_exceptions

    t_start = time.monotonic()
    dep = reg.get_deployment(deployment)
    out = HealOutcome(deployment=deployment, status="rolled-back", incumbent_draft=dep.draft_ref,
                      serving_draft=dep.draft_ref, endpoint=dep.endpoint)
    steps = _Steps(reg, deployment, progress)
    steps.done = out.steps
    job = _take_heal_lease(reg, deployment, reason)
    reg.record_event("heal.started", deployment, f"heal of {deployment} started (incumbent {dep.draft_ref})",
                     reason=reason, data={"handover": handover, "min_gain": min_gain, "floor": floor, "lease": job.id})
    finished, message = False, "interrupted"
    try:
        with signals_as_exceptions():
            finished = _loop(reg, out, steps, data=data, from_traffic=from_traffic, params=params, heldout=heldout,
                             test=test, min_gain=min_gain, floor=floor, max_tokens=max_tokens, handover=handover,
                             reason=reason, seed=seed, progress=progress)
            message = out.reason
    except BaseException as exc:
        message = f"{type(exc).__name__}: {getattr(exc, 'message', None) or exc}"
        raise
    finally:
        try:
            if not finished:
                _cleanup(reg, deployment, message, progress)
        finally:
            reg.finish_retrain_job(job.id, status="succeeded" if finished else "failed", message=message[:3900],
                                   result_draft_ref=out.candidate_draft)
            out.seconds = round(time.monotonic() - t_start, 1)
            reg.record_event("heal.finished", deployment, f"heal of {deployment}: "
                             f"{out.status if finished else 'failed'} ({out.seconds:.0f}s)", reason=message[:2000],
                             data={"status": out.status if finished else "failed", "draft": out.serving_draft,
                                   "seconds": out.seconds})
    return out


def _cleanup(reg, deployment: str, message: str, progress) -> None:
    from specops.heal.promote import rollback_local

    rollback_local(deployment, registry=reg, canary=canary_name(deployment),
                   reason=f"heal did not finish ({message}); the incumbent keeps serving", progress=progress)


def _loop(reg, out: HealOutcome, steps: _Steps, *, data, from_traffic, params, heldout, test, min_gain, floor, max_tokens,
          handover, reason, seed, progress) -> bool:
    """The steps; returns True when it reached an end (promoted or rolled back)."""
    from specops.heal.canary import canary_local
    from specops.heal.promote import promote_local
    from specops.heal.validate import train_stage
    from specops.retrain import retrain

    deployment = out.deployment
    if from_traffic:  # one snapshot for training, the held-out check and the canary (traffic keeps coming)
        data, from_traffic = snapshot_traffic(deployment), False
    t = time.monotonic()
    out.live_target, detail = resolve_live_target(reg, deployment)
    steps.add("resolve-target", "ok", detail, t)

    t = time.monotonic()
    r = retrain(deployment, data=data, from_traffic=from_traffic, registry=reg, params=params, heldout=heldout,
                floor=floor, min_gain=min_gain, reason=reason or "heal", seed=seed)
    out.candidate_draft, out.retrain_job = r.draft, r.job_id
    c = r.comparison
    inc = f"{c.incumbent_acceptance.acceptance_rate:.3f}" if c and c.incumbent_acceptance else "-"
    steps.add("retrain", "ok", f"job {r.job_id} trained {r.draft} against {r.target} on {r.result.trained_on}; "
              f"held-out acceptance {inc} -> {c.candidate_acceptance.acceptance_rate:.3f}" if c else
              f"job {r.job_id} trained {r.draft} against {r.target}", t)

    t = time.monotonic()
    ok, detail = train_stage(reg, deployment, r)
    steps.add("train-validation", "ok" if ok else "failed", detail, t)
    if not ok:
        return _rollback(reg, out, steps, f"train-stage validation failed: {detail}", progress)

    t = time.monotonic()
    prompts = heal_prompts(deployment, data, from_traffic, heldout, seed)
    canary = canary_local(deployment, r.draft, prompts, registry=reg, max_tokens=max_tokens, min_gain=min_gain,
                          floor=floor, progress=progress, test=test)
    out.canary = canary
    steps.add("canary", "ok" if canary.decision.action == "promote" else "failed",
              f"{canary.decision.action}: {canary.decision.reason}", t)
    if canary.decision.action != "promote":
        return _rollback(reg, out, steps, f"canary: {canary.decision.reason}", progress,
                         canary_test=canary.canary_test_id)

    t = time.monotonic()
    row = promote_local(deployment, canary, registry=reg, handover=handover, progress=progress)
    out.status, out.serving_draft, out.endpoint = "promoted", row.draft_ref, row.endpoint
    out.reason = canary.decision.reason
    steps.add("promote", "ok", f"{deployment} serves {row.draft_ref} on {row.target_ref} at {row.endpoint} "
              f"({handover})", t)
    return True


def _rollback(reg, out: HealOutcome, steps: _Steps, why: str, progress, canary_test: int | None = None) -> bool:
    from specops.heal.promote import rollback_local

    t = time.monotonic()
    how = rollback_local(out.deployment, registry=reg, canary=canary_name(out.deployment), reason=why,
                         progress=progress, canary_test=canary_test)
    row = reg.get_deployment(out.deployment)
    out.status, out.serving_draft, out.endpoint, out.reason = "rolled-back", row.draft_ref, row.endpoint, why
    steps.add("rollback", "ok", f"{out.deployment} keeps {row.draft_ref} ({how}): {why}", t)
    return True
