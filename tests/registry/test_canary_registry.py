"""The canary test's record (table canary_test, migration 0003_canary_tests): stored with its samples,
decision and error rates, found by deployment and by draft, reachable from a registry of the previous
schema, and shown by `lineage show`. Real SQLite files; nothing is faked."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import inspect

from specops.errors import NotFoundError
from specops.heal.sequential import SequentialTest, run
from specops.registry import open_registry
from specops.registry.db import make_engine
from specops.registry.migrations import MIGRATIONS, apply_migrations


def _verdict(samples: list[float], **kw) -> dict:
    return run(samples, SequentialTest(**kw)).verdict(power_runs=50).model_dump(mode="json")


def _stale_pair(reg) -> None:
    reg.register_target("org/tiny@abc", name="tiny", version="1")  # hub ids: recorded as given, no folders
    reg.register_draft("org/tiny-draft@abc", target="tiny@1", name="d", version="1", method="draft_model")
    reg.register_draft("org/tiny-draft@def", target="tiny@1", name="d", version="2", method="draft_model")
    reg.upsert_deployment("web", platform="local", status="running", target_ref="tiny@1", draft_ref="d@1")


def test_a_canary_test_is_stored_with_its_samples_decision_and_error_rates(reg):
    _stale_pair(reg)
    v = _verdict([0.6] * 20, min_gain=0.15, budget=24)
    data = [{"i": i, "d": 0.6, "incumbent": [10, 30], "candidate": [28, 30]} for i in range(v["samples"])]
    row = reg.record_canary_test("web", candidate="d@2", incumbent="d@1", target="tiny@1", canary="web-canary",
                                 traffic="replayed-prompts", metric="acceptance-rate difference", verdict=v, data=data)
    assert (row.decision, row.samples, row.budget, row.alpha, row.min_gain) == ("better", v["samples"], 24, 0.05, 0.15)
    assert row.power == v["power"] and row.mean_gain == pytest.approx(0.6) and row.data == data
    assert reg.get_canary_test(row.id).verdict == v
    assert [t.id for t in reg.canary_tests(draft="d@1")] == [t.id for t in reg.canary_tests(deployment="web")] == [row.id]
    assert reg.canary_tests(draft="d@9") == []
    ev = reg.events(subject="web", kind="canary.test", limit=5)[0]
    assert ev.data["canary_test"] == row.id and "better after" in ev.message
    with pytest.raises(NotFoundError, match="no canary test 999"):
        reg.get_canary_test(999)


def test_a_registry_of_the_previous_schema_gains_the_table_and_keeps_its_rows(specops_home):
    url = f"sqlite:///{specops_home / 'old.db'}"
    engine = make_engine(url)
    previous = [m for m in MIGRATIONS if m.name < "0003_canary_tests"]
    apply_migrations(engine, previous)
    assert "canary_test" not in inspect(engine).get_table_names()
    engine.dispose()
    with open_registry(url, migrate=False) as reg:
        reg.upsert_deployment("web", platform="local", status="running")
    with open_registry(url) as reg:  # the normal open applies 0003
        assert reg.get_deployment("web").status == "running"
        reg.record_canary_test("web", candidate="d@2", traffic="replayed-prompts", metric="m",
                               verdict=_verdict([0.0] * 8, budget=8), data=[])
        assert reg.canary_tests()[0].decision == "no-decision"


def test_lineage_show_prints_the_tests_a_draft_took_part_in(cli):
    with open_registry() as reg:
        _stale_pair(reg)
        reg.record_canary_test("web", candidate="d@2", incumbent="d@1", traffic="replayed-prompts", metric="m",
                               verdict=_verdict([0.0] * 10, budget=10), data=[])
    r = cli("lineage", "show", "d@1", "--output", "json")
    assert r.returncode == 0, r.stderr
    (t,) = json.loads(r.stdout)[0]["canary_tests"]
    assert (t["role"], t["decision"], t["samples"], t["budget"], t["alpha"]) == ("incumbent", "no-decision", 10, 10, 0.05)
    r = cli("lineage", "show", "d@2")
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("canary test #"))
    assert "d@2 vs d@1: no-decision after 10/10 samples (alpha 0.05, margin 0" in line and "replayed-prompts" in line


def test_export_and_import_carry_canary_tests_with_their_samples_and_links(reg, specops_home):
    """A registry's canary tests travel through `lineage export` / `import`: every sample, the verdict, and
    the events and validation runs that name a test still name it after the import renumbers it."""
    _stale_pair(reg)
    v = _verdict([0.6] * 20, min_gain=0.15, budget=24)
    data = [{"i": i, "d": 0.6, "incumbent": [10, 30], "candidate": [28, 30], "seconds": [0.5, 0.4]}
            for i in range(v["samples"])]
    row = reg.record_canary_test("web", candidate="d@2", incumbent="d@1", target="tiny@1", canary="web-canary",
                                 traffic="live-share", metric="acceptance-rate difference per window", verdict=v,
                                 data=data)
    reg.record_validation_run("web", checklist="heal/canary", passed=True, summary={"canary_test": row.id})
    reg.record_event("heal.promoted", "web", "web: d@1 -> d@2", data={"canary_test": row.id, "to": "d@2"})
    doc = json.loads(json.dumps(reg.export_data(with_events=True)))
    assert [(t["id"], t["candidate"], t["deployment"], t["data"]) for t in doc["canary_tests"]] == \
        [(row.id, "d@2", "web", data)]

    with open_registry(f"sqlite:///{specops_home / 'empty.db'}") as empty:  # export -> import -> export: the same
        assert empty.import_data(doc)["canary_tests"] == 1
        assert json.dumps(empty.export_data(with_events=True), sort_keys=True) == json.dumps(doc, sort_keys=True)

    with open_registry(f"sqlite:///{specops_home / 'busy.db'}") as busy:  # holds tests already: renumbered
        busy.upsert_deployment("other", platform="local", status="running")
        for _ in range(2):
            busy.record_canary_test("other", candidate="x@1", traffic="replayed-prompts", metric="m",
                                    verdict=_verdict([0.0] * 4, budget=4), data=[])
        busy.import_data(doc)
        [test] = busy.canary_tests(deployment="web")
        assert test.id != row.id and (test.data, test.verdict, test.decision) == (data, v, "better")
        assert test.started_at == row.started_at
        [promoted] = busy.events(subject="web", kind="heal.promoted", limit=5)
        assert promoted.data == {"canary_test": test.id, "to": "d@2"}
        [run] = [r for r in busy.validation_runs("web") if r.checklist == "heal/canary"]
        assert run.summary == {"canary_test": test.id}
