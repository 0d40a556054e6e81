"""Registering real model folders and judging pairs, on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest
from sqlmodel import Session, func, select

from specops.errors import ConfigFileError, InputError, NotFoundError
from specops.registry.schema import Draft, Event, Target


def _rows(reg) -> tuple[int, int, int]:
    with Session(reg.engine) as s:
        return (s.exec(select(func.count()).select_from(Target)).one(),
                s.exec(select(func.count()).select_from(Draft)).one(),
                s.exec(select(func.count()).select_from(Event)).one())


def test_a_matching_draft_passes_check_with_no_findings(reg, models):
    reg.register_target(str(models("target", seed=1)), name="tiny", version="1")
    d, warnings = reg.register_draft(str(models("draft", seed=2, layers=1)), target="tiny@1")
    assert warnings == []
    assert (d.method, d.target, d.trained_against_fingerprint) == ("draft_model", "tiny@1",
                                                                   reg.get_target("tiny@1").fingerprint)
    report = reg.check_lineage("tiny@1", d.ref)
    assert report.ok and report.findings == []


def test_a_draft_trained_against_an_older_target_version_is_stale(reg, models):
    reg.register_target(str(models("t1", seed=1)), name="tiny", version="1")
    reg.register_target(str(models("t2", seed=2)), name="tiny", version="2")
    d, _ = reg.register_draft(str(models("draft", seed=3)), target="tiny@1")
    report = reg.check_lineage("tiny", d.ref)  # "tiny" = latest = tiny@2
    assert not report.ok
    assert [f.code for f in report.findings] == ["STALE_DRAFT"]
    assert report.findings[0].fix and "tiny@2" in report.findings[0].fix


def test_a_target_folder_rewritten_in_place_makes_its_draft_stale_by_fingerprint(reg, models, tmp_path):
    folder = models("target", seed=1)
    reg.register_target(str(folder), name="tiny", version="1")
    d, _ = reg.register_draft(str(models("draft", seed=3)), target="tiny@1")
    models("target", seed=9)  # fine-tuned and re-saved under the same name and version
    report = reg.check_lineage("tiny@1", d.ref)
    assert not report.ok
    stale = [f for f in report.findings if f.code == "STALE_DRAFT"]
    assert stale and stale[0].evidence["registered"] != stale[0].evidence["on_disk"]


def test_the_same_weights_under_another_version_are_not_stale(reg, models):
    folder = models("target", seed=1)
    reg.register_target(str(folder), name="tiny", version="1")
    reg.register_target(str(folder), name="tiny", version="1-copy")
    d, _ = reg.register_draft(str(models("draft", seed=3)), target="tiny@1")
    report = reg.check_lineage("tiny@1-copy", d.ref)
    assert report.ok and [f.code for f in report.findings] == ["SAME_WEIGHTS"]


def test_a_vocab_mismatch_registers_with_a_warning_and_fails_check(reg, models):
    reg.register_target(str(models("target", seed=1)), name="tiny", version="1")
    d, warnings = reg.register_draft(str(models("draft", seed=2, extra_words=("zzz", "qqq"))), target="tiny@1")
    assert {w.code for w in warnings} == {"VOCAB_MISMATCH", "TOKENIZER_MISMATCH"}
    assert all(w.severity == "warning" for w in warnings)
    assert reg.get_draft(d.ref).vocab_size == reg.get_target("tiny").vocab_size + 2
    report = reg.check_lineage("tiny@1", d.ref)
    assert not report.ok
    assert {f.code for f in report.findings if f.severity == "error"} == {"VOCAB_MISMATCH", "TOKENIZER_MISMATCH"}


def test_an_eagle_head_with_another_hidden_size_is_incompatible(reg, models):
    reg.register_target(str(models("target", hidden=32)), name="tiny", version="1")
    head = models("eagle", arch="LlamaForCausalLMEagle3", hidden=16, with_tokenizer=False,
                  vocab=reg.get_target("tiny").vocab_size, config_extra={"norm_output": True})
    d, _ = reg.register_draft(str(head), target="tiny@1")
    # A SpecForge-layout head (LlamaForCausalLMEagle3) with norm_output is not an EAGLE 3.1 draft: SpecForge
    # 0.2.0 used norm_output only while training, so vLLM serves it with a norm it was not trained with.
    assert (d.method, d.eagle_generation) == ("eagle3", "3")
    codes = {f.code: f.severity for f in reg.check_lineage("tiny@1", d.ref).findings}
    assert codes == {"HIDDEN_SIZE_MISMATCH": "error", "EAGLE_NORM_MISMATCH": "warning"}


def test_an_fc_norm_head_is_eagle_3_1_in_lineage(reg, models):
    reg.register_target(str(models("target")), name="tiny", version="1")
    head = models("eagle31", arch="Eagle3Speculator", with_tokenizer=False, vocab=reg.get_target("tiny").vocab_size,
                  config_extra={"speculators_model_type": "eagle3", "speculators_version": "0.9.0", "fc_norm": True})
    d, _ = reg.register_draft(str(head), target="tiny@1")
    assert (d.method, d.eagle_generation) == ("eagle3", "3.1")
    assert d.facts["eagle"]["trainer_version"] == "0.9.0"
    assert "EAGLE_3_1" in {f.code for f in reg.check_lineage("tiny@1", d.ref).findings}


def test_a_method_removed_from_the_chosen_vllm_is_unsupported(reg, models):
    reg.register_target(str(models("target")), name="tiny", version="1")
    d, _ = reg.register_draft(str(models("medusa", arch="MedusaModel")), target="tiny@1")
    assert d.method == "medusa"
    assert not reg.check_lineage("tiny@1", d.ref, vllm_version="0.33.0").ok
    assert reg.check_lineage("tiny@1", d.ref, vllm_version="0.8.5").ok


def test_a_speculators_draft_naming_a_missing_verifier_path_is_flagged(reg, models, tmp_path):
    reg.register_target(str(models("target")), name="tiny", version="1")
    cfg = {"speculators_model_type": "eagle3", "speculators_config": {
        "proposal_methods": [{"proposal_type": "eagle3"}],
        "verifier": {"name_or_path": str(tmp_path / "gone" / "llama")}}}
    d, _ = reg.register_draft(str(models("spec", arch="Eagle3Speculator", config_extra=cfg)), target="tiny@1")
    assert d.method == "eagle3" and d.facts["verifier"].endswith("gone/llama")
    codes = [f.code for f in reg.check_lineage("tiny@1", d.ref).findings]
    assert "VERIFIER_UNRESOLVABLE" in codes


def test_weightless_methods_register_without_a_folder(reg, models):
    reg.register_target(str(models("target")), name="tiny", version="1")
    d, warnings = reg.register_draft("ngram", target="tiny", method="ngram")
    assert (d.ref, d.source_kind, warnings) == ("ngram@v1", "none", [])
    assert reg.check_lineage("tiny", "ngram").ok


def test_hub_ids_are_recorded_as_given(reg):
    t = reg.register_target("meta-llama/Llama-3.1-8B@0123456789abcdef0123456789abcdef01234567")
    assert (t.name, t.version, t.source_kind) == ("meta-llama/Llama-3.1-8B", "0123456789abcdef0123456789abcdef01234567",
                                                  "hub")
    assert t.hub_commit == t.version and t.fingerprint.startswith("hub:")
    assert reg.get_target("meta-llama/Llama-3.1-8B").id == t.id


def test_find_by_path_returns_the_model_registered_from_that_folder(reg, models):
    folder = models("target")
    t = reg.register_target(str(folder), name="tiny")
    assert reg.find_by_path(str(folder)).ref == t.ref == "tiny@v1"
    assert reg.find_by_path(str(models("other", seed=5))) is None


def test_registering_the_same_folder_twice_without_a_version_is_idempotent(reg, models):
    folder = models("target")
    a = reg.register_target(str(folder), name="tiny")
    b = reg.register_target(str(folder), name="tiny")
    assert a.id == b.id and _rows(reg)[0] == 1


@pytest.mark.parametrize("case", ["missing folder", "bad json", "no config", "duplicate version", "unknown target"])
def test_bad_input_is_an_input_error_and_writes_nothing(reg, models, tmp_path, case):
    reg.register_target(str(models("target")), name="tiny", version="1")
    before = _rows(reg)
    draft = models("draft", seed=2)
    if case == "missing folder":
        call, exc = (lambda: reg.register_target(str(tmp_path / "nope"))), InputError
    elif case == "bad json":
        (draft / "config.json").write_text('{"hidden_size": 32,\n  oops}')
        call, exc = (lambda: reg.register_draft(str(draft), target="tiny")), ConfigFileError
    elif case == "no config":
        (draft / "config.json").unlink()
        call, exc = (lambda: reg.register_target(str(draft))), InputError
    elif case == "duplicate version":
        call, exc = (lambda: reg.register_target(str(draft), name="tiny", version="1")), InputError
    else:
        call, exc = (lambda: reg.register_draft(str(draft), target="tiyn")), NotFoundError
    with pytest.raises(exc) as info:
        call()
    assert info.value.fix and "\n" not in info.value.one_line()
    assert _rows(reg) == before
    if case == "bad json":
        assert ":2:" in info.value.message  # file:line
    if case == "unknown target":
        assert 'Did you mean "tiny"' in info.value.message


def test_unknown_refs_suggest_the_closest_name(reg, models):
    reg.register_target(str(models("target")), name="llama-8b", version="1")
    with pytest.raises(NotFoundError, match='Did you mean "llama-8b"'):
        reg.get_target("llama-8")
    with pytest.raises(NotFoundError, match='Did you mean "llama-8b@1"'):
        reg.get_target("llama-8b@2")


def test_export_import_into_an_empty_registry_exports_identically(reg, models, tmp_path, db_url):
    from datetime import datetime, timedelta, timezone

    from specops.registry import open_registry

    reg.register_target(str(models("target")), name="tiny", version="1")
    d, _ = reg.register_draft(str(models("draft", seed=2)), target="tiny@1", trained_on="stdlib", trainer_cmd="x")
    reg.upsert_deployment("dep", platform="local", status="running", target_ref="tiny", draft_ref=d.ref,
                          engine_config={"k": 1}, labels={"team": "a"})
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for i in range(5):
        reg.record_measurement("dep", window_start=t0 + timedelta(minutes=i), window_end=t0 + timedelta(minutes=i + 1),
                               acceptance_rate=0.5, mean_acceptance_length=2.0, per_position=[0.6, 0.4], num_drafts=10,
                               num_draft_tokens=20, num_accepted_tokens=10, task="code")
    reg.record_validation_run("dep", checklist="basic", passed=True)
    job = reg.start_retrain_job("dep", backend="local")
    reg.finish_retrain_job(job.id, result_draft_ref=d.ref)
    reg.start_retrain_job("dep", backend="local")  # still running: the lease travels too
    doc = reg.export_data()
    assert "events" not in doc and doc["drafts"][0]["target"] == "tiny@1"
    full = reg.export_data(with_events=True)
    other = open_registry(f"sqlite:///{tmp_path / 'copy.db'}")
    other.import_data(json.loads(json.dumps(full)))
    assert json.dumps(other.export_data(with_events=True), sort_keys=True) == json.dumps(full, sort_keys=True)
    assert json.dumps(other.export_data(), sort_keys=True) == json.dumps(doc, sort_keys=True)
    from specops.registry import LeaseHeldError

    with pytest.raises(LeaseHeldError):
        other.start_retrain_job("dep", backend="local")
    with pytest.raises(InputError, match="already in the registry"):
        other.import_data(doc)
    other.close()
