"""What docs/ shows of the CLI's output is generated from the CLI (scripts/gen_docs.py): the worked
numbers of performance-model.md, kubernetes.md's acceptance figures, recommend.md's decision comment,
docs/cli.md and docs/schemas/. These tests fail when any of it is stale, so a planner or rendering
change lands with `.venv/bin/python scripts/gen_docs.py` run."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "gen_docs.py"
OPEN = re.compile(r"<!-- gen:([a-z0-9-]+) -->")
CLOSE = re.compile(r"<!-- /gen:([a-z0-9-]+) -->")


def _gen():
    sys.path.insert(0, str(REPO / "scripts"))
    import gen_docs

    return gen_docs


def _run(*argv: str) -> tuple[int, str]:
    """The script as a developer runs it: its own process (typer's help rendering is set per process)."""
    r = subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.stderr == "", r.stderr
    return r.returncode, r.stdout


def test_every_generated_span_is_closed_known_and_used():
    gen = _gen()
    opened, closed = [], []
    for path in sorted((REPO / "docs").glob("*.md")):
        text = path.read_text()
        opened += OPEN.findall(text)
        closed += CLOSE.findall(text)
        assert len(gen.MARK.findall(text)) == len(OPEN.findall(text)), f"{path.name}: a gen span is not closed"
    assert sorted(opened) == sorted(closed)
    assert sorted(set(opened)) == sorted(gen.BLOCKS), "a block no doc uses, or a span no block fills"
    for name in ("perf-batch-sweep", "k8s-acceptance-range", "k8s-expectations"):
        assert name in opened


@pytest.mark.costly  # runs scripts/gen_docs.py
def test_a_stale_number_is_caught_and_the_fix_named(tmp_path):
    """Edit one generated number the way a stale doc has it: --check names the file and the command,
    and running that command puts the number back and rewrites nothing else (so every other generated
    part of docs/ is current too)."""
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs)
    page = docs / "kubernetes.md"
    text = page.read_text()
    span = re.search(r"<!-- gen:k8s-acceptance-range -->(\d\.\d\d)", text)
    assert span is not None
    page.write_text(text[:span.start(1)] + "0.99" + text[span.end(1):])
    code, out = _run("--check", "--docs", str(docs))
    assert code == 1
    assert out.strip().splitlines() == ["docs/kubernetes.md is out of date with the CLI. To fix: run "
                                        ".venv/bin/python scripts/gen_docs.py (and commit what it rewrites)."]
    code, out = _run("--docs", str(docs))  # the fix, as the message says
    assert code == 0 and out.strip().splitlines() == ["wrote docs/kubernetes.md"]
    assert page.read_text() == (REPO / "docs" / "kubernetes.md").read_text()


@pytest.mark.costly  # runs scripts/gen_docs.py
def test_the_generated_parts_of_docs_are_what_the_cli_prints_now():
    """`scripts/gen_docs.py --check` as a developer types it (a subprocess) exits 0 on this checkout."""
    assert _run("--check") == (0, "")
