"""scripts/test_budget.py and its hook: a real junit XML and events file in, the report out (a real
subprocess running the script); the hook writes what the script reads. No engine is started: the
events file is written by the hook itself, called as the engine start and the vLLM check call it."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="1"
skipped="1" tests="3" time="42.5"><testcase classname="tests.test_budget_script" name="test_a" time="30.0"/>
<testcase classname="tests.test_budget_script" name="test_b" time="2.0"><failure message="x"/></testcase>
<testcase classname="tests.test_budget_script" name="test_c" time="0.5"><skipped message="y"/></testcase>
</testsuite></testsuites>"""


def test_the_hook_records_each_event_with_the_test_that_caused_it(tmp_path, monkeypatch):
    from specops.engines.local import note_for_tests

    events = tmp_path / "t.events"
    note_for_tests("engine_start", 1.0)  # no SPECOPS_TEST_EVENTS: nothing written anywhere
    monkeypatch.setenv("SPECOPS_TEST_EVENTS", str(events))
    note_for_tests("engine_start", 55.25)
    note_for_tests("vllm_check", 12.0)
    lines = events.read_text().splitlines()
    assert [ln.split("\t")[:2] for ln in lines] == [["engine_start", "55.2"], ["vllm_check", "12.0"]]
    assert all(ln.split("\t")[2].startswith("tests/test_budget_script.py::test_the_hook_records") for ln in lines)


def test_the_report_lists_the_slowest_tests_the_engine_starts_and_the_tier_total(tmp_path):
    (tmp_path / "j.xml").write_text(JUNIT)
    (tmp_path / "e.events").write_text("engine_start\t50.0\ttests/test_budget_script.py::test_a (setup)\n"
                                       "engine_start\t40.0\ttests/test_budget_script.py::test_a (call)\n"
                                       "vllm_check\t12.0\ttests/test_budget_script.py::test_a (call)\n"
                                       "engine_start_failed\t3.0\ttests/test_budget_script.py::test_b (call)\n")
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "test_budget.py"), "report", "--junit",
                        str(tmp_path / "j.xml"), "--events", str(tmp_path / "e.events"), "--tier", "demo",
                        "--slowest", "2"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    slow = r.stdout.split("== real")[0].splitlines()
    assert "30.0 s  [demo]  tests/test_budget_script.py::test_a" in slow[1] and "test_b" in slow[2]
    assert len([ln for ln in slow if "[demo]" in ln]) == 2
    assert "test_a (setup): engine_start x1 (50 s)" in r.stdout
    assert "test_a (call): engine_start x1 (40 s), vllm_check x1 (12 s)" in r.stdout
    row = next(ln for ln in r.stdout.splitlines() if ln.startswith("| demo"))
    assert [c.strip() for c in row.split("|")[3:11]] == ["3", "1", "1", "42 s", "-", "2", "1", "1"]


def test_run_records_a_command_and_nothing_recorded_is_exit_2(tmp_path):
    script = [sys.executable, str(REPO / "scripts" / "test_budget.py")]
    out = ["--out", str(tmp_path / "b")]
    r = subprocess.run([*script, "report", *out], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "To fix:" in r.stderr
    hook = "from specops.engines.local import note_for_tests; note_for_tests('engine_start', 7.0)"
    r = subprocess.run([*script, "run", *out, "demo", "--", sys.executable, "-c", hook], capture_output=True, text=True,
                       timeout=120, cwd=str(REPO))
    assert r.returncode == 0, r.stderr
    row = next(ln for ln in r.stdout.splitlines() if ln.startswith("| demo"))
    assert row.split("|")[8].strip() == "1"  # the child's engine start, through the inherited SPECOPS_TEST_EVENTS
    assert (tmp_path / "b" / "demo.json").is_file()


def test_a_tier_of_several_pytest_runs_is_all_their_junit_parts_and_old_parts_go(tmp_path):
    """scripts/test.sh runs pytest twice and turns the budget's --junitxml=OUT/TIER.xml into
    OUT/TIER.fast.xml and OUT/TIER.rest.xml: the tier is both files; a part left by an earlier run is not.
    Run inside an outer tier (CI times `make test`, whose tests run this), the outer --junitxml in the inherited
    PYTEST_ADDOPTS is dropped, other options kept: the parts land in this tier's folder, not the outer one's."""
    outer = tmp_path / "outer"
    outer.mkdir()
    out = tmp_path / "b"
    out.mkdir()
    (out / "demo.stale.xml").write_text(JUNIT)  # an earlier run's part: deleted by `run`, never counted
    # the command writes a part beside the file PYTEST_ADDOPTS names, as scripts/test.sh's junit() does
    write = ("import os, re, pathlib; base = re.search(r'--junitxml=(\\S+)\\.xml', os.environ['PYTEST_ADDOPTS'])[1]; "
             f"pathlib.Path(base + '.fast.xml').write_text({JUNIT!r}); pathlib.Path(base + '.rest.xml').write_text({JUNIT!r})")
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "test_budget.py"), "run", "--out", str(out), "demo", "--",
                        sys.executable, "-c", write + "; assert '-p no:cacheprovider' in os.environ['PYTEST_ADDOPTS']"],
                       capture_output=True, text=True, timeout=120, cwd=str(REPO),
                       env={**os.environ, "PYTEST_ADDOPTS": f"-p no:cacheprovider --junitxml={outer / 'test.xml'}"})
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.glob("demo.*.xml")) == ["demo.fast.xml", "demo.rest.xml"]
    assert list(outer.iterdir()) == []
    row = next(ln for ln in r.stdout.splitlines() if ln.startswith("| demo"))
    # the same three test ids in both parts: 3 tests, their times added; failures and pytest time of both
    assert [c.strip() for c in row.split("|")[3:7]] == ["3", "2", "2", "85 s"]


def test_make_tests_junit_part_names_follow_the_budgets_file():
    """scripts/test.sh's junit(): the part's file from the budget's PYTEST_ADDOPTS, nothing without one."""
    fn = next(ln for ln in (REPO / "scripts" / "test.sh").read_text().splitlines() if ln.startswith("junit()"))
    for addopts, want in (("-x --junitxml=/o/test.xml", "--junitxml=/o/test.fast.xml"), ("", "")):
        r = subprocess.run(["bash", "-c", f"{fn}\njunit fast"], capture_output=True, text=True, timeout=30,
                           env={"PATH": "/usr/bin:/bin", "PYTEST_ADDOPTS": addopts})
        assert r.returncode == 0 and r.stdout.strip() == want, (addopts, r.stdout, r.stderr)
