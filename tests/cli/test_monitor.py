"""`specops monitor` and `specops runbook` through the real CLI (subprocesses) against a real SQLite
registry in SPECOPS_HOME and a real /metrics endpoint (tests/drift/fakeengine.py: vLLM's recorded
exposition text with counters the test advances; the engine itself is the mock)."""

from __future__ import annotations

import json

import pytest

from specops.registry import open_registry
from tests.drift.fakeengine import FakeEngine
from tests.drift.wiring import make_fleet, swap_folder


@pytest.fixture
def engine():
    e = FakeEngine()
    yield e
    e.close()


@pytest.fixture
def fleet(tmp_path, engine):
    with open_registry() as reg:
        return make_fleet(reg, tmp_path, engine.url)


def _one_error_line(r, code=2):
    assert r.returncode == code, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "To fix:" in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


def test_monitor_once_exits_0_when_it_saw_every_deployment(cli, fleet, engine):
    engine.advance(500, 0.7)
    r = cli("monitor", "--once", "--output", "json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["outcome"] == "ok" and report["seen"] == ["chat"] and report["unseen"] == {}


def test_monitor_once_exits_2_and_names_the_deployment_it_could_not_see(cli, fleet, engine, tmp_path):
    with open_registry() as reg:
        make_fleet(reg, tmp_path / "b", "http://127.0.0.1:9", name="ghost")
    engine.advance(500, 0.7)
    r = cli("monitor", "--once")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "unseen: ghost: direct scrape failed: cannot reach http://127.0.0.1:9/metrics" in r.stderr
    assert "1 seen, 1 unseen, 0 not watched" in r.stdout


def test_a_swapped_target_is_flagged_and_the_runbook_names_it(cli, fleet, engine):
    for _ in range(2):
        engine.advance(500, 0.7)
        assert cli("monitor", "--once", "--record-baseline").returncode == 0
    swap_folder(fleet["v2"], fleet["served"])
    engine.advance(500, 0.1)
    r = cli("monitor", "--once", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "[error] CHANGED_MODEL: chat: the live target" in r.stdout and "ACCEPTANCE_DROP" in r.stdout
    assert "action open_retraining on chat (retrain-stale-draft, CHANGED_MODEL): dry-run" in r.stdout
    r = cli("runbook", "run", "acceptance-drop", "--deployment", "chat")
    assert r.returncode == 0, r.stderr
    assert "FINGERPRINT_MISMATCH: chat: the target changed under the draft" in r.stdout
    assert "now holds tiny@2" in r.stdout and "run: specops retrain --deployment chat" in r.stdout


def test_record_baseline_says_when_there_is_not_enough_to_record(cli, fleet, engine):
    engine.advance(500, 0.7)
    r = cli("monitor", "--once", "--record-baseline")
    assert r.returncode == 0 and "note: baseline not recorded: chat: not enough windows" in r.stdout


def test_the_policy_name_comes_from_the_environment_setting(cli, fleet, engine):
    engine.advance(500, 0.7)
    r = cli("monitor", "--once", env={"SPECOPS_POLICY": "defualt"})
    assert 'unknown policy "defualt"' in _one_error_line(r)


@pytest.mark.parametrize("args, match", [
    (("monitor", "--once", "--interval", "0"), "--interval 0 is not a positive number"),
    (("monitor", "--once", "--policy", "nope"), 'unknown policy "nope"'),
    (("monitor", "--once", "--output", "yaml"), 'unknown output format "yaml"'),
    (("runbook", "show", "acceptance-drops"), 'Did you mean "acceptance-drop"'),
    (("runbook", "run", "acceptance-drop", "--deployment", "chta"), 'unknown deployment "chta"'),
])
def test_bad_input_is_one_line_with_a_fix(cli, fleet, args, match):
    assert match in _one_error_line(cli(*args))


def test_runbook_list_and_show(cli):
    r = cli("runbook", "list", "--output", "json")
    names = [b["name"] for b in json.loads(r.stdout)]
    assert {"acceptance-drop", "draft-target-mismatch", "kv-cache-pressure"} <= set(names)
    r = cli("runbook", "show", "acceptance-drop")
    assert r.returncode == 0 and r.stdout.startswith("### acceptance-drop:") and "5. **Restart probe**" in r.stdout
