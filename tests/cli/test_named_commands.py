"""Every `specops ...` a user is told to run exists, with the options it names: in fix messages and
other strings of the library, in playbooks (runbooks, policies, checklists), in rendered manifests
(alert annotations) and in the docs. Real CLI tree (typer's click commands); nothing is faked."""

from __future__ import annotations

import ast
import re
import sys

import pytest

from tests.conftest import REPO
from tests.helpers.source import parsed

MENTION = re.compile(r"(?<![\w./$-])specops ((?:[a-z][a-z0-9-]*)(?: [^`'\"\n)\]|;,]*)?)")


def _tree():
    sys.path.insert(0, str(REPO / "scripts"))
    import gen_cli_docs

    return {tuple(path[1:]): cmd for path, cmd in gen_cli_docs.walk()}


def _texts():
    """(where, text, code) for every place a user reads a command from; ``code``: a line of a fenced
    block in the docs, where a line that starts with `specops` is a command to run."""
    for f in sorted((REPO / "specops").rglob("*.py")):
        for node in ast.walk(parsed(f)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                yield f"{f.relative_to(REPO)}:{node.lineno}", node.value, False
            elif isinstance(node, ast.JoinedStr):  # f-strings: their literal parts
                parts = [v.value if isinstance(v, ast.Constant) else "X" for v in node.values]
                yield f"{f.relative_to(REPO)}:{node.lineno}", "".join(parts), False
    files = [*sorted((REPO / "playbooks").rglob("*.yaml")), *sorted((REPO / "manifests").rglob("*.yaml")),
             *sorted((REPO / "docs").rglob("*.md")), REPO / "README.md"]
    for f in files:
        fenced = False
        for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            yield f"{f.relative_to(REPO)}:{i}", line, fenced


def _resolve(tree, words: list[str]):
    """The deepest command the leading words name, and the words left for it."""
    for n in (2, 1):
        if tuple(words[:n]) in tree:
            return tree[tuple(words[:n])], words[n:]
    return None, words


def _mentions(text: str, code: bool = False):
    """(words, in a command context) for each `specops ...` in ``text``. A command context is where a
    reader is told to run it: in backticks, after "run:"/"$ ", at the start of a (code) line, in
    parentheses; elsewhere ("specops renders ...") only mentions that start with a command count."""
    for m in MENTION.finditer(text):
        before = text[:m.start()].rstrip(" ")
        context = before.endswith(("`", "$", "run:", "Run:", "command:", "(")) or (code and not before.strip())
        words = m.group(1).split("#")[0].split()
        yield words, context


def _problems(texts=None) -> list[str]:
    tree = _tree()
    tops = {k[0] for k in tree if k}
    out = []
    for where, text, code in (texts if texts is not None else _texts()):
        for words, context in _mentions(text, code):
            if not words or (not context and words[0] not in tops):
                continue
            cmd, rest = _resolve(tree, words)
            shown = " ".join(words)
            if cmd is None:
                out.append(f"{where}: `specops {shown}`: no command {' '.join(words[:2])!r}")
                continue
            known = {o for p in cmd.params for o in (*p.opts, *getattr(p, "secondary_opts", []))} | {"--help", "-h"}
            for w in rest:
                flag = w.split("=")[0]
                if re.fullmatch(r"--?[a-z][a-z0-9-]*", flag) and flag not in known:
                    out.append(f"{where}: `specops {shown}`: {cmd.name} has no {flag}")
    return out


def test_every_named_command_exists_with_the_options_it_names():
    assert _problems() == []


@pytest.mark.parametrize("text, ok", [("run `specops monitor --once --record-baseline`", True),
                                      ("run `specops measure -d x`", False),
                                      ("promote with `specops promote NAME --dry-run`", False),
                                      ("fix: open a job (specops retrain --runner job)", False),
                                      ("specops renders manifests", True),
                                      ("specops status --bogus in prose", False)])
def test_the_check_sees_a_missing_command_or_option(text, ok):
    assert (_problems([("t", text, False)]) == []) is ok
