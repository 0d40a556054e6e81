"""The `specops ...` commands in the fenced code blocks of docs/*.md, as written (continuation lines
joined, a leading ``$ `` prompt dropped; comments kept, bash drops them when it runs the line)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
GENERATED = {"cli.md"}  # scripts/gen_cli_docs.py output: a reference, checked by test_docs.py
FENCE = re.compile(r"^[ \t]*```[^\n]*\n(.*?)^[ \t]*```", re.S | re.M)
# a synopsis, not an example: option brackets, alternatives, placeholders in capitals
SYNOPSIS = re.compile(r"\.\.\.$|\.\.\. |\[-|\s\|\s|\b(?:NAME|PATH|FILE|URL|JSON|TEXT|PID|N|F|S|M|X\.Y\.Z)\b")


@dataclass(frozen=True)
class Example:
    doc: str  # e.g. "deploy.md"
    line: int  # 1-based line of the command in the doc
    command: str  # as written, continuations joined

    @property
    def synopsis(self) -> bool:
        return bool(SYNOPSIS.search(self.command.split(" #", 1)[0]))

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def examples(docs: Path = DOCS) -> list[Example]:
    out = []
    for path in sorted(docs.glob("*.md")):
        if path.name in GENERATED:
            continue
        text = path.read_text()
        for block in FENCE.finditer(text):
            first = text[:block.start(1)].count("\n") + 1
            lines = block.group(1).splitlines()
            i = 0
            while i < len(lines):
                start, line = i, lines[i].strip()
                i += 1
                if line.startswith("$ "):
                    line = line[2:]
                if not line.startswith("specops "):
                    continue
                while line.split(" #", 1)[0].rstrip().endswith("\\") and i < len(lines):
                    line = line.split(" #", 1)[0].rstrip()[:-1].rstrip() + " " + lines[i].strip()
                    i += 1
                out.append(Example(path.name, first + start, line))
    return out
