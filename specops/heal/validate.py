"""Train-stage validation of a candidate draft before any engine runs it.

Two parts, both recorded:

1. the retraining job's held-out check (incumbent and candidate acceptance measured in-process on
   prompts never trained on; validation run ``retrain/train-stage``) must say ``promote``;
2. the ``train`` checklist (playbooks/checklists/train.yaml: lineage, data and retraining plan on
   record, offline acceptance measured) runs on the candidate pair. The pair is the canary
   deployment's row (``<name>-canary``, not started yet): its target and draft refs are the live
   target and the candidate, and the held-out acceptance is recorded on it as its offline benchmark
   (measurement source ``bench``, ``extra.how`` says how it was measured).
"""

from __future__ import annotations

from datetime import datetime, timezone

from specops.heal.canary import canary_name


def prepare_canary_row(reg, deployment: str, target_ref: str, draft_ref: str):
    """The canary deployment's row describes the candidate pair (its status is left as it is)."""
    dep = reg.get_deployment(deployment)
    row = reg.get_deployment(canary_name(deployment))
    return reg.upsert_deployment(row.name, platform="local", status=row.status, target_ref=target_ref,
                                 draft_ref=draft_ref, method=dep.method, num_speculative_tokens=dep.num_speculative_tokens,
                                 vllm_version=dep.vllm_version, served_model_name=dep.served_model_name,
                                 labels={"canary_of": deployment})


def train_stage(reg, deployment: str, outcome, *, profile: str = "gpu-default") -> tuple[bool, str]:
    """(passed, one line) for a :class:`specops.retrain.RetrainOutcome`."""
    from specops.checks.run import validate

    d = outcome.decision
    if d is not None and d.action != "promote":
        return False, f"held-out check: {d.reason}"
    row = prepare_canary_row(reg, deployment, outcome.target, outcome.draft)
    held = "the held-out check is the canary's (no in-process measurement for this backend)"
    if outcome.comparison is not None:
        a = outcome.comparison.candidate_acceptance
        now = datetime.now(timezone.utc)
        reg.record_measurement(row.name, window_start=now, window_end=now, acceptance_rate=a.acceptance_rate,
                               mean_acceptance_length=a.mean_acceptance_length, per_position=a.per_position,
                               num_drafts=a.num_drafts, num_draft_tokens=a.num_draft_tokens,
                               num_accepted_tokens=a.num_accepted_tokens, source="bench",
                               extra={"how": "in-process greedy verification on held-out prompts",
                                      "job": outcome.job_id, "draft": outcome.draft,
                                      "prompts_sha256": outcome.comparison.prompts_sha256})
        held = f"held-out check: {d.reason}" if d else f"held-out acceptance {a.acceptance_rate:.3f}"
    report = validate("train", row.name, profile=profile, registry=reg)
    bad = [r for r in report.results if r.status in ("fail", "error") and r.severity == "error"]
    if bad:
        return False, f"train checklist: {bad[0].id} {bad[0].status}: {bad[0].message}"
    return True, f"{held}; train checklist passed ({report.counts()})"
