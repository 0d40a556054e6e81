"""Generate docs/cli.md from the real CLI's --help (run: `.venv/bin/python scripts/gen_cli_docs.py`).

`--check` exits 1 when docs/cli.md is out of date (tests/cli/test_docs.py runs it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

os.environ.setdefault("COLUMNS", "100")
os.environ["TERM"] = "dumb"
os.environ["NO_COLOR"] = "1"
os.environ["TYPER_USE_RICH"] = "0"  # plain click help, stable text


def walk():
    """Yield (path, click command) for every command and group, depth-first."""
    import typer

    from specops.cli import main as m

    m._register_all()
    root = typer.main.get_command(m.app)

    def rec(cmd, path):
        yield path, cmd
        for name in sorted(getattr(cmd, "commands", {}) or {}):
            sub = cmd.commands[name]
            if getattr(sub, "hidden", False):
                continue
            yield from rec(sub, path + [name])

    yield from rec(root, ["specops"])


def plain_help(cmd, path) -> str:
    import typer._click as click  # typer vendors click

    from specops.cli import main as m

    # the app's context settings (``-h, --help``) reach every subcommand through its parent context
    # when the CLI runs; a context built alone must be given them, or the page shows only ``--help``
    ctx = click.Context(cmd, info_name=" ".join(path), terminal_width=78,  # as the CLI wraps on 80+ columns
                        **m.app.info.context_settings)
    return cmd.get_help(ctx)


def render() -> str:
    out = ["# CLI reference", "",
           "Generated from the CLI by `scripts/gen_cli_docs.py`; `tests/cli/test_docs.py` fails when it is",
           "out of date. Concepts and examples are in the other pages of docs/.", ""]
    import textwrap

    from specops.cli.exitcodes import exit_codes

    for path, cmd in walk():
        title = " ".join(path)
        out.append(f"## `{title}`")
        out.append("")
        out.append("```")
        out.append(_strip(plain_help(cmd, path)))
        out.append("```")
        out.append("")
        if len(path) > 1 and not getattr(cmd, "commands", None):  # commands, not groups
            out.append("**Exit codes.** " + textwrap.fill(exit_codes(" ".join(path[1:])), 100))
            out.append("")
    return "\n".join(out)


def _strip(text: str) -> str:
    import re

    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def main() -> int:
    target = REPO / "docs" / "cli.md"
    text = render()
    if "--check" in sys.argv:
        if not target.is_file() or target.read_text() != text:
            print("docs/cli.md is out of date. To fix: run .venv/bin/python scripts/gen_cli_docs.py")
            return 1
        return 0
    target.write_text(text)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
