"""Exit codes that say what happened (docs/cli.md, "Exit codes" of each command): nothing watched or
nothing reachable is never a success. Real registry rows in a real SQLite file; the engines are loopback
HTTP peers (tests/metrics/hostile.py, standing in for vLLM's /health and /metrics) or a closed port."""

from __future__ import annotations

import json

from tests.checks.helpers import exposition

DOWN = "http://127.0.0.1:9"  # the discard port: nothing listens


def _rows(**deployments):
    from specops.registry import open_registry

    with open_registry() as reg:
        for name, (status, endpoint) in deployments.items():
            reg.upsert_deployment(name, platform="external" if status == "adopted" else "local", status=status,
                                  method="ngram", num_speculative_tokens=3, endpoint=endpoint,
                                  served_model_name="tiny")


def test_monitor_once_on_an_empty_registry_exits_2_and_says_nothing_was_watched(cli):
    r = cli("monitor", "--once", "-o", "json")
    assert r.returncode == 2, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["outcome"] == "idle"
    assert "nothing to watch" in r.stderr and "To fix:" in r.stderr and "SPECOPS_HOME" in r.stderr


def test_monitor_once_with_only_stopped_deployments_watches_nothing_and_exits_2(cli):
    _rows(old=("stopped", DOWN))
    r = cli("monitor", "--once")
    assert r.returncode == 2 and "nothing to watch" in r.stderr, (r.stdout, r.stderr)
    assert "not watched: old" in r.stderr
    assert "cycle idle: 0 seen" in r.stdout and "-> could not evaluate" in r.stdout  # the shared status words


def test_status_exit_codes_every_reachable_some_down_all_down_all_stopped(cli, peer):
    up = peer({"/health": (200, ""), "/metrics": (200, exposition(10, [7, 4, 2], 40))})
    _rows(up=("adopted", up.url), old=("stopped", DOWN))
    r = cli("status", "-o", "json")
    assert r.returncode == 0, r.stderr
    by = {d["name"]: d for d in json.loads(r.stdout)}
    assert by["up"]["health"] == "ok"
    assert by["old"]["health"] == "stopped" and by["old"]["note"] is None  # shown stopped, never probed
    _rows(down=("adopted", DOWN))
    r = cli("status")
    assert r.returncode == 1 and "down: not healthy (unreachable)" in r.stderr, (r.stdout, r.stderr)
    _rows(up=("adopted", DOWN))
    assert cli("status").returncode == 1  # every one that should serve is unreachable: not 0
    assert cli("status", "old").returncode == 2  # only a stopped one: nothing was checked


def test_status_of_a_stopped_deployment_shows_stopped_without_probing(cli, peer):
    engine = peer({"/health": (200, "")})
    _rows(old=("stopped", engine.url))
    r = cli("status", "old")
    assert "stopped" in r.stdout and "unreachable" not in r.stdout
    assert engine.hits.get("/health", 0) == 0


def test_every_documented_exit_code_row_names_a_real_command_and_the_reference_shows_it():
    import sys

    from specops.cli.exitcodes import EXIT_CODES
    from tests.conftest import REPO

    sys.path.insert(0, str(REPO / "scripts"))
    import gen_cli_docs

    leaves = {" ".join(p[1:]) for p, cmd in gen_cli_docs.walk() if len(p) > 1 and not getattr(cmd, "commands", None)}
    assert set(EXIT_CODES) <= leaves, set(EXIT_CODES) - leaves
    top = {name for name in leaves if " " not in name}
    assert top - set(EXIT_CODES) == set(), "every top-level command documents its exit codes"
    reference = (REPO / "docs" / "cli.md").read_text()
    assert reference.count("**Exit codes.**") == len(leaves)
