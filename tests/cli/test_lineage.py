"""`specops lineage ...` through the real CLI (subprocesses) on a real SQLite file in SPECOPS_HOME."""

from __future__ import annotations

import json

import pytest

from tests.registry.conftest import build_model

COMMANDS = ["register-target", "register-draft", "list", "show", "tree", "check", "export", "import", "prune"]


@pytest.fixture
def folders(tmp_path):
    return {"t1": build_model(tmp_path / "m" / "t1", seed=1), "t2": build_model(tmp_path / "m" / "t2", seed=2),
            "draft": build_model(tmp_path / "m" / "draft", seed=3, layers=1),
            "wide": build_model(tmp_path / "m" / "wide", seed=4, extra_words=("zzz",))}


def _ok(r):
    assert r.returncode == 0, r.stderr
    return r


def _one_error_line(r, code=2):
    assert r.returncode == code, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "To fix:" in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_every_lineage_command_has_help_text(cli):
    r = _ok(cli("lineage", "--help"))
    for name in COMMANDS:
        assert name in r.stdout
        assert "Usage" in _ok(cli("lineage", name, "--help")).stdout


def test_register_list_check_and_tree_round_trip(cli, folders, specops_home):
    _ok(cli("lineage", "register-target", str(folders["t1"]), "--name", "tiny", "--version", "1"))
    _ok(cli("lineage", "register-target", str(folders["t2"]), "--name", "tiny", "--version", "2"))
    r = _ok(cli("lineage", "register-draft", str(folders["draft"]), "--target", "tiny@1", "--trained-on", "stdlib"))
    assert "registered draft_model draft draft@v1 for tiny@1" in r.stdout
    assert (specops_home / "specops.db").is_file()
    listing = json.loads(_ok(cli("lineage", "list", "--output", "json")).stdout)
    assert [(t["name"], t["version"]) for t in listing["targets"]] == [("tiny", "1"), ("tiny", "2")]
    assert [(d["name"], d["version"], d["target"], d["method"]) for d in listing["drafts"]] == \
        [("draft", "v1", "tiny@1", "draft_model")]
    assert _ok(cli("lineage", "check", "--target", "tiny@1", "--draft", "draft")).returncode == 0
    stale = cli("lineage", "check", "--target", "tiny", "--draft", "draft", "--output", "json")
    assert stale.returncode == 1
    report = json.loads(stale.stdout)
    assert report["ok"] is False and [f["code"] for f in report["findings"]] == ["STALE_DRAFT"]
    tree = json.loads(_ok(cli("lineage", "tree", "--output", "json")).stdout)
    assert tree[0]["ref"] == "tiny@1" and tree[0]["drafts"][0]["ref"] == "draft@v1" and tree[1]["drafts"] == []
    assert "draft@v1 (draft_model)" in _ok(cli("lineage", "tree")).stdout
    shown = json.loads(_ok(cli("lineage", "show", "tiny", "--output", "json")).stdout)
    assert [s["version"] for s in shown] == ["1", "2"]
    table = _ok(cli("lineage", "show", "tiny")).stdout  # the default, --output table: a table per version
    assert "target tiny@1" in table and "target tiny@2" in table and "┃ field" in table
    assert not table.lstrip().startswith(("[", "{"))
    row = next(line for line in table.splitlines() if line.startswith("│ num_layers "))
    assert row.split("│")[2].strip() == str(shown[0]["num_layers"])


def test_a_vocab_mismatch_registers_with_a_warning_and_check_exits_1(cli, cli_subprocess, folders):
    _ok(cli("lineage", "register-target", str(folders["t1"]), "--name", "tiny"))
    r = _ok(cli("lineage", "register-draft", str(folders["wide"]), "--target", "tiny"))
    assert "[warning] VOCAB_MISMATCH" in r.stderr
    r = cli_subprocess("lineage", "check", "--target", "tiny", "--draft", "wide")  # exit 1 through a real process
    assert r.returncode == 1 and "[error] VOCAB_MISMATCH" in r.stdout and "To fix:" in r.stdout


def test_bad_input_prints_one_line_exits_2_and_writes_nothing(cli, folders, tmp_path):
    _ok(cli("lineage", "register-target", str(folders["t1"]), "--name", "tiny", "--version", "1"))
    (folders["wide"] / "config.json").write_text("{not json")
    cases = [("register-target", str(tmp_path / "missing")),
             ("register-target", str(folders["wide"])),
             ("register-draft", str(folders["draft"]), "--target", "tiyn"),
             ("register-target", str(folders["t2"]), "--name", "tiny", "--version", "1"),
             ("check", "--target", "tiny", "--draft", "nope"),
             ("prune", "--raw", "soon")]
    for args in cases:
        _one_error_line(cli("lineage", *args))
    listing = json.loads(_ok(cli("lineage", "list", "--output", "json")).stdout)
    assert [t["version"] for t in listing["targets"]] == ["1"] and listing["drafts"] == []


def test_export_import_into_an_empty_registry_exports_identically(cli, folders, tmp_path):
    _ok(cli("lineage", "register-target", str(folders["t1"]), "--name", "tiny"))
    _ok(cli("lineage", "register-draft", str(folders["draft"]), "--target", "tiny"))
    first = _ok(cli("lineage", "export")).stdout
    assert '"events"' not in first
    dump = tmp_path / "registry.json"
    _ok(cli("lineage", "export", "--with-events", "--file", str(dump)))
    other = f"sqlite:///{tmp_path / 'other.db'}"
    _ok(cli("lineage", "import", str(dump), "--db", other))
    assert _ok(cli("lineage", "export", "--with-events", "--db", other)).stdout == dump.read_text()
    assert _ok(cli("lineage", "export", "--db", other)).stdout == first
    _one_error_line(cli("lineage", "import", str(dump), "--db", other))  # everything already there
    _one_error_line(cli("lineage", "import", str(tmp_path / "nope.json")))


def test_prune_is_a_dry_run_unless_applied(cli, specops_home):
    from datetime import datetime, timedelta, timezone

    from specops.registry import open_registry

    reg = open_registry()
    reg.upsert_deployment("web", platform="local", status="running")
    old = datetime.now(timezone.utc) - timedelta(days=400)
    reg.record_measurement("web", window_start=old, window_end=old, acceptance_rate=0.5, mean_acceptance_length=2,
                           per_position=None, num_drafts=1, num_draft_tokens=2, num_accepted_tokens=1)
    reg.close()
    dry = _ok(cli("lineage", "prune"))
    assert "would delete 1 measurements" in dry.stdout and "--apply" in dry.stdout
    done = json.loads(_ok(cli("lineage", "prune", "--apply", "--output", "json")).stdout)
    assert (done["dry_run"], done["deleted"], done["remaining"]) == (False, 1, 0)


def test_tree_shows_deployments_with_their_status(cli, folders):
    from specops.registry import open_registry

    _ok(cli("lineage", "register-target", str(folders["t1"]), "--name", "tiny", "--version", "1"))
    _ok(cli("lineage", "register-draft", str(folders["draft"]), "--target", "tiny@1"))
    open_registry().upsert_deployment("svc", platform="local", status="running", target_ref="tiny@1",
                                      draft_ref="draft@v1", method="draft_model")
    out = _ok(cli("lineage", "tree")).stdout
    assert "deployment svc [running]" in out


def test_a_target_whose_config_became_unreadable_cannot_be_judged_exit_2(cli, folders):
    _ok(cli("lineage", "register-target", str(folders["t1"]), "--name", "tiny"))
    _ok(cli("lineage", "register-draft", str(folders["draft"]), "--target", "tiny"))
    assert _ok(cli("lineage", "check", "--target", "tiny", "--draft", "draft")).returncode == 0
    (folders["t1"] / "config.json").write_text("{")
    r = cli("lineage", "check", "--target", "tiny", "--draft", "draft", "--output", "json")
    assert r.returncode == 2, (r.stdout, r.stderr)
    report = json.loads(r.stdout)
    assert report["ok"] is False and report["verdict"] == "could not evaluate"
    unreadable = next(f for f in report["findings"] if f["code"] == "FOLDER_UNREADABLE")
    assert unreadable["evaluated"] is False and str(folders["t1"]) in unreadable["message"]
    table = cli("lineage", "check", "--target", "tiny", "--draft", "draft")
    assert table.returncode == 2 and "COULD NOT EVALUATE" in table.stdout and "compatible" not in table.stdout
