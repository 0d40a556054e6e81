"""Issue 39, doctor fails closed: each check is ok, problem, could not evaluate or info; a registry
every other command refuses (a newer schema, corrupt inner pages) is a problem, never "migrations
applied"; a Prometheus answer that is not a count (NaN, "abc", +Inf, no value) is "could not
evaluate" for that line and the rest of the report is still there. Real registry files, a real HTTP
peer (tests/metrics/hostile.py, faked: what Prometheus answers), the CLI in this process."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from tests.cli.inproc import run_main


def _doctor(env: dict | None = None) -> tuple[int, dict, str]:
    old = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        code, out, err = run_main("doctor", "-o", "json")
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert "internal error" not in err and "Traceback" not in err, err
    return code, {c["name"]: c for c in json.loads(out)}, err


def test_a_registry_from_a_newer_schema_is_a_problem_not_ok(specops_home):
    from specops.registry import open_registry

    open_registry().upsert_deployment("web", platform="local", status="running")
    with sqlite3.connect(specops_home / "specops.db") as conn:
        conn.execute("INSERT INTO specops_migrations (name, applied_at) VALUES ('0099_from_the_future', 'now')")
    code, checks, _ = _doctor()
    assert code == 1 and checks["registry"]["status"] == "problem", checks["registry"]
    assert "0099_from_the_future" in checks["registry"]["detail"] and checks["registry"]["fix"]
    assert run_main("deployment", "list")[0] == 2  # the verdict every other command gives


def test_a_registry_with_corrupt_inner_pages_is_a_problem_not_ok(specops_home):
    from tests.helpers.registry_damage import corrupt_inner_pages

    corrupt_inner_pages(specops_home)
    code, checks, _ = _doctor()
    assert code == 1 and checks["registry"]["status"] == "problem", checks["registry"]
    assert "corrupt" in checks["registry"]["detail"]


def _count_answer(value) -> str:
    sample = {"metric": {}, "value": [1700000000, value]} if value is not None else {"metric": {}}
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": [sample]}})


@pytest.mark.parametrize("value", ["NaN", "abc", "+Inf", None, "-3", "1e400", "2.5"])
def test_a_prometheus_answer_that_is_not_a_count_is_could_not_evaluate_and_the_report_is_kept(peer, value):
    s = peer({"/api/v1/query": (200, _count_answer(value)), "/-/ready": (200, "ok"), "/api/v1/status/buildinfo":
              (200, json.dumps({"status": "success", "data": {"version": "2.50.0"}}))},
             content_type="application/json")
    code, checks, _ = _doctor({"SPECOPS_PROMETHEUS_URL": s.url})
    assert set(checks) == {"vllm", "gpus", "registry", "prometheus", "cluster"}
    assert checks["prometheus"]["status"] == "could not evaluate", checks["prometheus"]
    assert checks["prometheus"]["status"] != "ok" and code in (1, 2)


def test_a_check_that_breaks_is_could_not_evaluate_and_the_others_still_run(monkeypatch):
    import specops.api.measure as measure

    def broken():
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(measure, "check_cluster", broken)
    code, checks, _ = _doctor()
    assert checks["cluster"]["status"] == "could not evaluate" and "ZeroDivisionError" in checks["cluster"]["detail"]
    assert checks["registry"]["status"] in ("ok", "info") and code == 2
    code, out, _ = run_main("doctor")
    assert "could not evaluate" in out and "To fix:" in out
