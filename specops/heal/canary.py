"""The local canary: the incumbent and the candidate, one after the other, on the same prompts.

On one small machine two CPU engines generating at once would measure each other, so the prompts go
first to the incumbent engine (it keeps serving throughout), then to a canary engine started from the
deployment's own saved spec with only the draft swapped (deployment ``<name>-canary``, a free port).
Acceptance comes from each engine's own ``vllm:spec_decode_*`` counters (``/metrics`` before and
after the prompt set), never from timing. Greedy decoding with ``ignore_eos`` makes both runs see the
same target tokens, so the two numbers are comparable.

The canary engine is left running when this returns: promotion may adopt it (no third start) or
stop it (see :mod:`specops.heal.promote`).
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

from specops.engines.local import free_port
from specops.errors import InputError, MeasurementError
from specops.heal.sequential import SequentialTest
from specops.heal.types import CanaryResult, EngineAcceptance
from specops.retrain.types import Comparison, DraftAcceptance

CANARY_SUFFIX = "-canary"
MEASUREMENT_SOURCE = "canary"


def canary_name(deployment: str) -> str:
    return (deployment[: 63 - len(CANARY_SUFFIX)] + CANARY_SUFFIX).replace("_", "-").lower()


def _headers(api_key_env: str | None) -> dict:
    from specops.checks.sources import auth_headers

    return auth_headers({"api_key_env": api_key_env})


def measure_engine(deployment: str, endpoint: str, served_name: str | None, prompts: list[str], *,
                   max_tokens: int = 48, gamma: int = 3, api_key_env: str | None = None,
                   draft: str | None = None) -> EngineAcceptance:
    """Send ``prompts`` one by one (greedy, ``ignore_eos``) and read the counters' deltas."""
    from specops.engines.client import VllmClient, completion_body
    from specops.metrics import delta, pick_group, scrape

    if not prompts:
        raise InputError("no canary prompts", "give at least one held-out prompt")
    headers = _headers(api_key_env)
    before = scrape(endpoint, headers=headers)
    group = pick_group(before, served_name)
    t0 = time.monotonic()
    client = VllmClient(endpoint, headers, deadline_s=600.0)
    for p in prompts:  # each request within one overall deadline (a dripping engine cannot hold it)
        client.complete(completion_body(served_name or group, p, max_tokens, ignore_eos=True),
                        fix=f"check the engine: specops status {deployment}")
    seconds = time.monotonic() - t0
    m = delta(before, scrape(endpoint, headers=headers), group)
    if m.counter_reset or not m.num_draft_tokens or not m.num_drafts:
        raise MeasurementError(f"{deployment}: no speculative drafts counted over {len(prompts)} prompts"
                               + (" (the engine restarted meanwhile)" if m.counter_reset else ""),
                               "check that the deployment speculates (specops status) and run the canary again")
    acc = m.num_accepted_tokens or 0.0
    acceptance = DraftAcceptance(acceptance_rate=min(1.0, m.acceptance_rate or 0.0),
                            mean_acceptance_length=m.mean_acceptance_length,
                            per_position=[round(x or 0.0, 6) for x in m.per_position_rate],
                            num_drafts=int(m.num_drafts), num_draft_tokens=int(m.num_draft_tokens),
                            num_accepted_tokens=int(acc), num_prompts=len(prompts),
                            gamma=m.num_speculative_tokens or gamma, max_new_tokens=max_tokens)
    return EngineAcceptance(deployment=deployment, endpoint=endpoint, draft=draft, acceptance=acceptance,
                            seconds=round(seconds, 2))


def record(reg, run: EngineAcceptance, *, started: datetime, extra: dict | None = None) -> None:
    a = run.acceptance
    reg.record_measurement(run.deployment, window_start=started, window_end=datetime.now(timezone.utc),
                           acceptance_rate=a.acceptance_rate, mean_acceptance_length=a.mean_acceptance_length,
                           per_position=a.per_position, num_drafts=a.num_drafts, num_draft_tokens=a.num_draft_tokens,
                           num_accepted_tokens=a.num_accepted_tokens, source=MEASUREMENT_SOURCE,
                           extra={"draft": run.draft, "prompts": a.num_prompts, "max_tokens": a.max_new_tokens,
                                  **(extra or {})})


def saved_spec(deployment: str):
    """The resolved spec the deployment was last started from (``spec.yaml`` in its folder)."""
    from specops.engines.layout import DeploymentFolder
    from specops.engines.spec import load_spec
    from specops.errors import NotFoundError

    path = DeploymentFolder.of(deployment).spec
    if not path.is_file():
        raise NotFoundError(f"deployment {deployment} has no saved spec ({path})",
                            "heal works on deployments started by `specops deploy SPEC` on this machine")
    return load_spec(path)


def candidate_spec(spec, *, name: str, draft, target_ref: str, port: int):
    """The same spec with the candidate draft (and the live target's ref), under another name and port."""
    from specops.engines.spec import ModelRef

    serve = spec.serve.model_copy(update={"port": port, "served_model_name": spec.served_name()})
    return spec.model_copy(update={
        "name": name, "serve": serve,
        "target": spec.target.model_copy(update={"ref": target_ref}),
        "draft": ModelRef(model=draft.source, ref=draft.ref)})


def canary_local(deployment: str, candidate: str, prompts: list[str], *, registry, max_tokens: int = 48,
                 min_gain: float = 0.0, floor: float = 0.0, port: int | None = None,
                 progress=None, test: SequentialTest | None = None) -> CanaryResult:
    """Measure the incumbent engine, start the canary engine with ``candidate``, measure it on the same
    prompts, decide. The canary engine is left running; on any failure it is stopped.

    With ``test`` (what `specops heal` passes) the decision is the sequential test's
    (:mod:`specops.heal.canarytest`): prompt by prompt on both engines, promote only on "better", the
    test recorded in the registry (``canary_test``). Without it, the two engines' acceptance over all
    prompts is compared with ``min_gain`` (a point comparison with no stated error rate)."""
    if test is not None:
        return _canary_tested(deployment, candidate, prompts, registry=registry, max_tokens=max_tokens, floor=floor,
                              port=port, progress=progress, test=test)
    from specops.engines import local
    from specops.engines.deploy import deploy_local
    from specops.engines.manage import stop
    from specops.retrain.acceptance import decide, prompts_sha256

    reg = registry
    dep, draft, spec, gamma, name, cspec = _canary_plan(reg, deployment, candidate, port=port)
    incumbent = None
    if dep.status == "running" and local.alive(dep.pid, dep.pid_start_time):
        if progress:
            progress(f"canary: measuring the incumbent {dep.draft_ref} on {len(prompts)} prompts")
        t = datetime.now(timezone.utc)
        incumbent = measure_engine(deployment, dep.endpoint, dep.served_model_name, prompts, max_tokens=max_tokens,
                                   gamma=gamma, api_key_env=dep.api_key_env, draft=dep.draft_ref)
        record(reg, incumbent, started=t, extra={"role": "incumbent"})
    if progress:
        progress(f"canary: starting {name} ({candidate} on {draft.target}) on port {cspec.serve.port}")
    started = deploy_local(cspec, registry=reg, check=False, progress=progress)
    try:
        t = datetime.now(timezone.utc)
        if progress:
            progress(f"canary: measuring {candidate} on the same {len(prompts)} prompts")
        cand = measure_engine(name, started.endpoint, spec.served_name(), prompts, max_tokens=max_tokens,
                              gamma=gamma, api_key_env=dep.api_key_env, draft=candidate)
        record(reg, cand, started=t, extra={"role": "candidate", "incumbent_deployment": deployment})
    except BaseException:
        stop(name, registry=reg, grace_s=10)
        raise
    comparison = Comparison(target=draft.target, incumbent=dep.draft_ref, candidate=candidate,
                            prompts_sha256=prompts_sha256(prompts),
                            incumbent_acceptance=incumbent.acceptance if incumbent else None,
                            candidate_acceptance=cand.acceptance, min_gain=min_gain, floor=floor)
    decision = decide(comparison)
    reg.record_validation_run(deployment, checklist="heal/canary", passed=decision.action == "promote",
                              summary={"comparison": comparison.model_dump(mode="json"),
                                       "decision": decision.model_dump(mode="json"), "canary": name,
                                       "measured_by": "engine spec_decode counters"})
    return CanaryResult(deployment=deployment, canary=name, canary_endpoint=started.endpoint, canary_running=True,
                        candidate=candidate, target=draft.target, incumbent=incumbent, candidate_run=cand,
                        comparison=comparison, decision=decision, started_in_s=started.started_in_s)



def _canary_plan(reg, deployment: str, candidate: str, *, port: int | None):
    """(deployment row, candidate draft, saved spec, γ, canary name, the canary's spec): refused unless local."""
    dep = reg.get_deployment(deployment)
    if dep.platform != "local":
        raise InputError(f"deployment {deployment} runs on {dep.platform}", "the local canary is for local engines; "
                         "on Kubernetes use `specops deploy SPEC --canary-of NAME`")
    draft = reg.get_draft(candidate)
    spec = saved_spec(deployment)
    gamma = spec.speculative.num_speculative_tokens or 3
    name = canary_name(deployment)
    cspec = candidate_spec(spec, name=name, draft=draft, target_ref=draft.target,
                           port=port or free_port(spec.serve.host if spec.serve.host != "0.0.0.0" else "127.0.0.1"))
    return dep, draft, spec, gamma, name, cspec


def _start_canary(reg, deployment: str, candidate: str, *, port: int | None, progress):
    """(deployment row, candidate draft, saved spec, γ, canary name, started engine)."""
    from specops.engines.deploy import deploy_local

    dep, draft, spec, gamma, name, cspec = _canary_plan(reg, deployment, candidate, port=port)
    if progress:
        progress(f"canary: starting {name} ({candidate} on {draft.target}) on port {cspec.serve.port}")
    started = deploy_local(cspec, registry=reg, check=False, progress=progress)
    return dep, draft, spec, gamma, name, started


def _acceptance(arm, *, deployment: str, draft: str | None, prompts: int, gamma: int, max_tokens: int) -> EngineAcceptance:
    m = arm.total()
    if m.counter_reset or not m.num_draft_tokens or not m.num_drafts:
        raise MeasurementError(f"{deployment}: no speculative drafts counted over {prompts} prompts"
                               + (" (the engine restarted meanwhile)" if m.counter_reset else ""),
                               "check that the deployment speculates (specops status) and run the canary again")
    acceptance = DraftAcceptance(acceptance_rate=min(1.0, m.acceptance_rate or 0.0),
                                 mean_acceptance_length=m.mean_acceptance_length,
                                 per_position=[round(x or 0.0, 6) for x in m.per_position_rate],
                                 num_drafts=int(m.num_drafts), num_draft_tokens=int(m.num_draft_tokens),
                                 num_accepted_tokens=int(m.num_accepted_tokens or 0), num_prompts=prompts,
                                 gamma=m.num_speculative_tokens or gamma, max_new_tokens=max_tokens)
    return EngineAcceptance(deployment=deployment, endpoint=arm.endpoint, draft=draft, acceptance=acceptance,
                            seconds=round(arm.seconds, 2))


def _canary_tested(deployment: str, candidate: str, prompts: list[str], *, registry, max_tokens: int, floor: float,
                   port: int | None, progress, test: SequentialTest) -> CanaryResult:
    from specops.engines import local
    from specops.engines.manage import stop
    from specops.heal.canarytest import METRIC, TRAFFIC_LOCAL, EngineArm, paired_test
    from specops.retrain.acceptance import prompts_sha256
    from specops.retrain.types import Decision

    reg = registry
    if not prompts:
        raise InputError("no canary prompts", "give at least one held-out prompt")
    dep = reg.get_deployment(deployment)
    if not (dep.status == "running" and local.alive(dep.pid, dep.pid_start_time)):
        raise InputError(f"the incumbent {deployment} is not serving, so the canary has nothing to test against",
                         f"start it (specops restart {deployment}) and heal again")
    dep, draft, spec, gamma, name, started = _start_canary(reg, deployment, candidate, port=port, progress=progress)
    try:
        t = datetime.now(timezone.utc)
        headers = _headers(dep.api_key_env)
        inc_arm = EngineArm(deployment, dep.endpoint, dep.served_model_name, headers)
        cand_arm = EngineArm(name, started.endpoint, spec.served_name(), headers)
        used = prompts[: test.budget]
        if progress:
            progress(f"canary test: {dep.draft_ref} vs {candidate}, prompt by prompt, at most {len(used)} of "
                     f"{test.budget} samples (alpha {test.alpha:g}, margin {test.min_gain:g})")
        seq, samples = paired_test(inc_arm, cand_arm, used, test, max_tokens=max_tokens, progress=progress)
        n = len(samples)
        incumbent = _acceptance(inc_arm, deployment=deployment, draft=dep.draft_ref, prompts=n, gamma=gamma,
                                max_tokens=max_tokens)
        cand = _acceptance(cand_arm, deployment=name, draft=candidate, prompts=n, gamma=gamma, max_tokens=max_tokens)
        record(reg, incumbent, started=t, extra={"role": "incumbent"})
        record(reg, cand, started=t, extra={"role": "candidate", "incumbent_deployment": deployment})
        verdict = seq.verdict()
    except BaseException:
        stop(name, registry=reg, grace_s=10)
        raise
    comparison = Comparison(target=draft.target, incumbent=dep.draft_ref, candidate=candidate,
                            prompts_sha256=prompts_sha256(prompts[:n]), incumbent_acceptance=incumbent.acceptance,
                            candidate_acceptance=cand.acceptance, min_gain=test.min_gain, floor=floor)
    traffic = f"{TRAFFIC_LOCAL} ({n} held-out prompts replayed to both engines, not live traffic)"
    row = reg.record_canary_test(deployment, candidate=candidate, incumbent=dep.draft_ref, target=draft.target,
                                 canary=name, traffic=TRAFFIC_LOCAL, metric=METRIC,
                                 verdict=verdict.model_dump(mode="json"), data=samples, started_at=t)
    nums = dict(candidate_rate=round(cand.acceptance.acceptance_rate, 4),
                incumbent_rate=round(incumbent.acceptance.acceptance_rate, 4))
    line = f"canary test {row.id}: {verdict.line()}; {traffic}"
    if verdict.decision == "better" and cand.acceptance.acceptance_rate < floor:
        decision = Decision(action="rollback", reason=f"{line}; but the candidate's acceptance "
                            f"{cand.acceptance.acceptance_rate:.3f} is below the floor {floor:.3f}", **nums)
    else:
        decision = Decision(action="promote" if verdict.decision == "better" else "rollback", reason=line, **nums)
    reg.record_validation_run(deployment, checklist="heal/canary", passed=decision.action == "promote",
                              summary={"comparison": comparison.model_dump(mode="json"),
                                       "decision": decision.model_dump(mode="json"), "canary": name,
                                       "canary_test": row.id, "verdict": verdict.model_dump(mode="json"),
                                       "measured_by": "per-request spec-decode acceptance, sequential test"})
    return CanaryResult(deployment=deployment, canary=name, canary_endpoint=started.endpoint, canary_running=True,
                        candidate=candidate, target=draft.target, incumbent=incumbent, candidate_run=cand,
                        comparison=comparison, decision=decision, started_in_s=started.started_in_s,
                        verdict=verdict, canary_test_id=row.id, traffic=traffic)
