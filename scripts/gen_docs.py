"""Regenerate everything in docs/ that the CLI prints, from the CLI itself.

    .venv/bin/python scripts/gen_docs.py            # rewrite the generated parts
    .venv/bin/python scripts/gen_docs.py --check    # exit 1 naming each stale file (tests/cli/test_docs_generated.py)

What it writes:
- every ``<!-- gen:NAME -->...<!-- /gen:NAME -->`` span of docs/*.md (inline or whole blocks): the text
  between the markers is what ``BLOCKS[NAME]`` prints, which runs the real CLI (in this process, in a
  fresh SPECOPS_HOME, at 100 columns, as a reader in a new shell would);
- docs/cli.md (scripts/gen_cli_docs.py);
- docs/schemas/*.schema.json (specops/api/schemas.py: the DeploymentSpec and the ``-o json`` outputs);
- manifests/grafana/specops-dashboard.json (scripts/gen_dashboard.py).

So a planner change that moves a worked number, or a rendering change, is one command away from the
docs again, and the test fails until that command has run.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

DOCS = REPO / "docs"
MARK = re.compile(r"(<!-- gen:(?P<name>[a-z0-9-]+) -->)(?P<body>.*?)(<!-- /gen:(?P=name) -->)", re.S)
FIX = "To fix: run .venv/bin/python scripts/gen_docs.py (and commit what it rewrites)."


# --- running the CLI -----------------------------------------------------------------------------

def _fresh_environment() -> None:
    """A reader's shell: a new SPECOPS_HOME, no SPECOPS_* settings, plain 100-column output."""
    for key in [k for k in os.environ if k.startswith("SPECOPS_")]:
        del os.environ[key]
    home = tempfile.mkdtemp(prefix="specops-gen-docs-")
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    os.environ["SPECOPS_HOME"] = home
    os.environ.update({"COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1", "TYPER_USE_RICH": "0"})


def cli(command: str, columns: int = 100) -> str:
    """stdout of ``specops <command>`` (shell words) on a ``columns``-wide terminal; an exit code other
    than 0 is an error here."""
    from specops.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    os.environ["COLUMNS"] = str(columns)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(shlex.split(command))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    os.environ["COLUMNS"] = "100"
    if code != 0:
        raise RuntimeError(f"`specops {command}` exited {code}: {err.getvalue()[-800:]}")
    return out.getvalue()


def cli_json(command: str) -> dict:
    return json.loads(cli(command + " -o json"))


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _range(p: dict) -> str:
    lo, hi = p.get("speedup_low"), p.get("speedup_high")
    return "-" if lo is None or hi is None else f"{lo:.2f}x-{hi:.2f}x"


def _pick(plan: dict) -> str:
    g = plan.get("num_speculative_tokens")
    return plan["method"] + (f" γ={g}" if g else "")


# --- the generated spans -------------------------------------------------------------------------

BLOCKS: dict[str, Callable[[], str]] = {}


def block(name: str):
    def wrap(fn: Callable[[], str]) -> Callable[[], str]:
        BLOCKS[name] = fn
        return fn
    return wrap


PERF_8B = "recommend --model meta-llama/Llama-3.1-8B-Instruct --gpu H100 --context-len 1024"


@block("perf-batch-sweep")
def perf_batch_sweep() -> str:
    """performance-model.md: Llama-3.1-8B + EAGLE-3 on one H100, 1K prompts, batch 1 / 64 / 512."""
    rows = ["| batch | `recommend` picks | predicted | range | EAGLE-3 at its best γ (`--method eagle3 --allow-uncertain`) |",
            "|---|---|---|---|---|"]
    for batch in (1, 64, 512):
        plan = cli_json(f"{PERF_8B} --batch-size {batch}")
        eagle = cli_json(f"{PERF_8B} --batch-size {batch} --method eagle3 --allow-uncertain")
        p, e = plan["predicted"], eagle["predicted"]
        rows.append(f"| {batch} | {_pick(plan)} | {_x(p['speedup'])} | {_range(p)} | γ={eagle['num_speculative_tokens']}: "
                    f"{_x(e['speedup'])}, range {_range(e)} |")
    return ("\n\n`specops " + PERF_8B + " --batch-size B [-o json]`:\n\n" + "\n".join(rows) + "\n\n")


def _console_lines(commands: list[str], starts: tuple[str, ...]) -> str:
    """Each command with its first line and the lines that start with ``starts``, on a wide terminal (one
    line each, unwrapped)."""
    out = ["", "```console"]
    for command in commands:
        out.append(f"$ specops {command}")
        printed = cli(command, columns=400).splitlines()
        out.extend(line.rstrip() for i, line in enumerate(printed) if i == 0 or line.startswith(starts))
    out += ["```", ""]
    return "\n".join(out)


@block("perf-evidence-rule")
def perf_evidence_rule() -> str:
    """performance-model.md, the evidence rule: each plan's pick, prediction and range."""
    base = "recommend --model meta-llama/Llama-3.1-8B-Instruct --gpu H100"
    return _console_lines([base, f"{base} --batch-size 256", f"{base} --batch-size 256 --allow-uncertain"],
                          ("predicted:", "range:"))


K8S_8B = "recommend --model llama-3.1-8b-instruct --gpu H100"


@block("k8s-acceptance-range")
def k8s_acceptance_range() -> str:
    """kubernetes.md: the spread of predicted accepted/drafted rates that rules out one threshold."""
    ngram = cli_json(f"{K8S_8B} --method ngram")["predicted"]
    eagle = cli_json(f"{K8S_8B} --method eagle3 --num-speculative-tokens 2")["predicted"]
    return (f"{ngram['acceptance_rate']:.2f} (`specops {K8S_8B} --method ngram`) to "
            f"{eagle['acceptance_rate']:.2f} (the same with `--method eagle3 --num-speculative-tokens 2`)")


@block("k8s-expectations")
def k8s_expectations() -> str:
    """kubernetes.md: the expectations block `recommend -o deployment` writes."""
    spec = cli(f"{K8S_8B} --output deployment --name chat-8b")
    lines = spec.splitlines()
    start = lines.index("expectations:")
    end = next((i for i in range(start + 1, len(lines)) if lines[i] and not lines[i].startswith(" ")), len(lines))
    return ("\n\n`specops " + K8S_8B + " --output deployment` writes:\n\n```yaml\n"
            + "\n".join(lines[start:end]) + "\n```\n\n")


@block("recommend-decision-comment")
def recommend_decision_comment() -> str:
    """recommend.md: the first comment line of `-o deployment`."""
    first = cli(f"{K8S_8B} --output deployment --name chat-8b").splitlines()[0]
    return f"`{first}`"


SWEEP = "recommend --model meta-llama/Llama-3.1-8B-Instruct --gpu A100-80GB --sweep batch=1,8,64,256"


@block("recommend-sweep")
def recommend_sweep() -> str:
    """recommend.md: the sweep's table and the candidates passed over (its warnings left out)."""
    lines = cli(SWEEP, columns=80).splitlines()
    end = next((i for i, line in enumerate(lines) if line.startswith("warning")), len(lines))
    return "\n\n```console\n$ specops " + SWEEP + "\n" + "\n".join(x.rstrip() for x in lines[:end]) + "\n```\n\n"


# --- files ---------------------------------------------------------------------------------------

def render_markdown(text: str) -> str:
    def one(m: re.Match) -> str:
        name = m.group("name")
        if name not in BLOCKS:
            raise KeyError(f'docs name a generated span "{name}" that scripts/gen_docs.py does not know')
        return m.group(1) + BLOCKS[name]() + m.group(4)
    return MARK.sub(one, text)


def generated_files(docs: Path = DOCS) -> dict[Path, str]:
    """Every generated file and what it should hold now."""
    _fresh_environment()
    out: dict[Path, str] = {}
    for path in sorted(docs.glob("*.md")):
        text = path.read_text()
        if MARK.search(text):
            out[path] = render_markdown(text)
    import gen_cli_docs

    out[docs / "cli.md"] = gen_cli_docs.render()
    if (docs.parent / "manifests" / "grafana").is_dir():  # the repository's (a copy of docs/ alone has none)
        import gen_dashboard

        out[docs.parent / "manifests" / "grafana" / "specops-dashboard.json"] = gen_dashboard.render()
    try:
        from specops.api.schemas import published_schemas
    except ModuleNotFoundError:
        pass
    else:
        for name, schema in published_schemas().items():
            out[docs / "schemas" / f"{name}.schema.json"] = json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
    return out


def stale(docs: Path = DOCS) -> list[str]:
    """The generated files under ``docs`` whose text differs from what the CLI prints now."""
    return [str(p.relative_to(docs.parent)) for p, text in generated_files(docs).items()
            if not p.is_file() or p.read_text() != text]


def main(argv: list[str]) -> int:
    docs = DOCS
    if "--docs" in argv:
        docs = Path(argv[argv.index("--docs") + 1]).resolve()
    if "--check" in argv:
        bad = stale(docs)
        for name in bad:
            print(f"{name} is out of date with the CLI. {FIX}")
        return 1 if bad else 0
    for path, text in generated_files(docs).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {path.relative_to(docs.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
