"""The retrain driver end to end on small real models and a real SQLite registry: lease, local
distillation, lineage registration, train-stage check, decision."""

from __future__ import annotations

import json

import pytest

from specops.errors import InputError
from specops.retrain.driver import CHECKLIST, retrain
from specops.retrain.prompts import write_prompts
from specops.settings import deployment_dir

PARAMS = {"steps": 60, "threads": 1, "max_new_tokens": 32, "batch_size": 16, "lr": 3e-3}


def test_local_retrain_recovers_acceptance_and_records_the_lineage(stale_registry, train_prompts, heldout_prompts,
                                                                   tmp_path):
    reg = stale_registry
    data = write_prompts(train_prompts + heldout_prompts, tmp_path / "prompts.jsonl")
    out = retrain("chat", backend="local", data=data, registry=reg, params=PARAMS, heldout=6, min_gain=0.1,
                  reason="acceptance drop")
    c = out.comparison
    print(f"held-out acceptance: stale {c.incumbent_acceptance.acceptance_rate:.3f} -> "
          f"candidate {c.candidate_acceptance.acceptance_rate:.3f} ({out.result.metrics['train_seconds']} s training)")
    assert out.status == "succeeded" and out.decision.action == "promote"
    assert c.candidate_acceptance.acceptance_rate >= c.incumbent_acceptance.acceptance_rate + 0.1
    assert out.result.initialised_from and out.result.initialised_from.endswith("draft-a")

    draft = reg.get_draft(out.draft)
    assert draft.target == "tiny@v2" and draft.method == "draft_model" and draft.name == "tiny-draft"
    assert draft.trained_against_fingerprint == reg.get_target("tiny@v2").fingerprint
    assert "specops.retrain.local" in draft.trainer_cmd and out.result.data_sha256 in draft.trained_on
    assert reg.check_lineage("tiny@v2", out.draft).ok

    (lineage_event,) = reg.events(subject=out.draft, kind="retrain.lineage")
    assert lineage_event.data["target_fingerprint"] == draft.trained_against_fingerprint
    assert {"torch", "transformers"} <= set(lineage_event.data["packages"])
    assert json.loads((deployment_dir("chat") / "retrain" / f"job-{out.job_id}" / "lineage.json").read_text()
                      )["data_sha256"] == out.result.data_sha256

    (run,) = reg.validation_runs("chat")
    assert run.checklist == CHECKLIST and run.passed
    (job,) = reg.retrain_jobs("chat")
    assert job.status == "succeeded" and job.result_draft_ref == out.draft
    assert reg.get_deployment("chat").draft_ref == "tiny-draft@v1"  # the incumbent keeps serving


def test_dry_run_prints_the_command_and_takes_no_lease(stale_registry, train_prompts, tmp_path):
    data = write_prompts(train_prompts, tmp_path / "p.jsonl")
    out = retrain("chat", backend="local", data=data, registry=stale_registry, params=PARAMS, dry_run=True)
    assert out.status == "dry-run" and out.result.commands[0][1:3] == ["-m", "specops.retrain.local"]
    assert stale_registry.retrain_jobs("chat") == []


def test_from_traffic_reads_the_deployments_prompt_log(stale_registry, train_prompts):
    from specops.retrain.prompts import traffic_path

    write_prompts(train_prompts, traffic_path("chat"))
    out = retrain("chat", from_traffic=True, registry=stale_registry, params=PARAMS, dry_run=True)
    assert out.result.trained_on.startswith(f"{len(train_prompts) - 8} prompts from traffic")


@pytest.mark.parametrize("kwargs, match", [
    ({}, "exactly one source"),
    ({"data": "x.jsonl", "from_traffic": True}, "exactly one source"),
    ({"data": "/nonexistent/p.jsonl"}, "does not exist"),
    ({"from_traffic": True}, "no recorded traffic"),
])
def test_bad_prompt_sources_are_refused_with_a_fix(stale_registry, kwargs, match):
    with pytest.raises(InputError, match=match) as err:
        retrain("chat", registry=stale_registry, dry_run=True, **kwargs)
    assert err.value.fix
