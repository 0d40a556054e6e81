"""Docs are checked: every command has help text and a page, and docs/cli.md is generated from the CLI."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def _commands():
    sys.path.insert(0, str(REPO / "scripts"))
    import gen_cli_docs

    return list(gen_cli_docs.walk())


def test_every_command_has_help_text():
    missing = [" ".join(path) for path, cmd in _commands() if not (cmd.help or "").strip()]
    assert missing == []


def test_every_option_has_help_text():
    missing = []
    for path, cmd in _commands():
        for p in cmd.params:
            if getattr(p, "param_type_name", "") == "option" and not (getattr(p, "help", "") or "").strip():
                missing.append(f"{' '.join(path)} {p.opts[0]}")
    assert missing == []


def test_every_top_level_command_is_documented_with_an_example():
    docs = "\n".join(p.read_text() for p in (REPO / "docs").glob("*.md") if p.name != "cli.md")
    undocumented = [" ".join(path) for path, _ in _commands()
                    if len(path) == 2 and f"specops {path[1]}" not in docs]
    assert undocumented == []


def test_cli_reference_is_up_to_date():
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_cli_docs.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_cli_reference_shows_help_as_the_cli_prints_it():
    """A page of docs/cli.md is the text `specops ... --help` prints (a real subprocess on an 80+ column
    terminal): `-h, --help` included, which a context built without the app's settings would drop."""
    import os

    text = (REPO / "docs" / "cli.md").read_text()
    for words in (["lineage", "show"], ["config", "show"]):
        env = dict(os.environ, COLUMNS="100", TERM="dumb", NO_COLOR="1", TYPER_USE_RICH="0")
        printed = subprocess.run([sys.executable, "-m", "specops", *words, "--help"], capture_output=True, text=True,
                                 cwd=REPO, env=env).stdout
        page = text.split(f"## `specops {' '.join(words)}`\n\n```\n", 1)[1].split("\n```", 1)[0]
        assert "-h, --help" in page
        assert page == "\n".join(line.rstrip() for line in printed.strip().splitlines())
