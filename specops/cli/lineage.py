"""`specops lineage ...`: register targets and drafts, judge pairs, show the tree, move and prune data.

Exit codes: 0 ok; 1 `check` found the pair incompatible; 2 bad input. Only typer and the stdlib are
imported here; specops.api.lineage is imported inside each command.
"""

from __future__ import annotations

import json
import sys
from typing import Optional

import typer

lineage_app = typer.Typer(help="Draft/target lineage: register models, check pairs, show the tree.",
                          no_args_is_help=True)

DB = typer.Option(None, "--db", help="Registry URL or SQLite path (default: SPECOPS_DB, else $SPECOPS_HOME/specops.db).")
OUTPUT = typer.Option("table", "--output", "-o", help="table or json.")


def register(app: typer.Typer) -> None:
    app.add_typer(lineage_app, name="lineage")


def _emit(data, output: str, table) -> None:
    from specops.cli.output import emit

    emit(data, output, table)


def _print_findings(findings, err: bool = True) -> None:
    for f in findings:
        typer.echo(f.one_line(), err=err)


def _table(title: str, rows: list[dict], columns: list[str]) -> None:
    from rich.table import Table

    from specops.cli.output import console

    t = Table(title=title)
    for c in columns:
        t.add_column(c)
    for r in rows:
        t.add_row(*[("" if r.get(c) is None else str(r.get(c))) for c in columns])
    console().print(t)


@lineage_app.command("register-target")
def register_target(path: str = typer.Argument(..., help="Local Hugging Face folder, or hub id ORG/NAME[@REV]."),
                    name: Optional[str] = typer.Option(None, "--name", help="Name (default: folder name or hub id)."),
                    version: Optional[str] = typer.Option(None, "--version", help="Version (default: next vN)."),
                    db: Optional[str] = DB, output: str = OUTPUT) -> None:
    """Fingerprint a target model and record it as NAME@VERSION."""
    from specops.api.lineage import register_target as run

    row = run(path, name=name, version=version, db=db)
    _emit(row, output, lambda r: typer.echo(f"registered target {r['ref']} ({r['fingerprint'] or 'a hub id without a revision: no fingerprint'})"))


@lineage_app.command("register-draft")
def register_draft(path: str = typer.Argument(..., help="Draft folder, hub id, or a name for ngram/suffix/mtp."),
                   target: str = typer.Option(..., "--target", help="Target it was trained against: NAME[@VERSION]."),
                   name: Optional[str] = typer.Option(None, "--name", help="Name (default: folder name)."),
                   version: Optional[str] = typer.Option(None, "--version", help="Version (default: next vN)."),
                   method: Optional[str] = typer.Option(None, "--method", help="eagle3, eagle, draft_model, mtp, "
                                                        "medusa, ngram, suffix, ... (default: from config.json)."),
                   trained_on: Optional[str] = typer.Option(None, "--trained-on", help="Training data description."),
                   trainer_cmd: Optional[str] = typer.Option(None, "--trainer-cmd", help="Command that trained it."),
                   db: Optional[str] = DB, output: str = OUTPUT) -> None:
    """Record a draft and the target version it was trained against (mismatches are warnings here)."""
    from specops.api.lineage import register_draft as run

    row, warnings = run(path, target=target, name=name, version=version, method=method, trained_on=trained_on,
                        trainer_cmd=trainer_cmd, db=db)
    _print_findings(warnings)
    _emit(row, output, lambda r: typer.echo(f"registered {r['method']} draft {r['ref']} for {r['target']}"))


@lineage_app.command("list")
def list_models(db: Optional[str] = DB, output: str = OUTPUT) -> None:
    """List registered targets and drafts."""
    from specops.api.lineage import list_models as run

    data = run(db)

    def table(d):
        _table("targets", d["targets"], ["ref", "architecture", "hidden_size", "vocab_size", "source"])
        _table("drafts", d["drafts"], ["ref", "method", "target", "vocab_size", "source"])
    _emit(data, output, table)


@lineage_app.command("show")
def show(ref: str = typer.Argument(..., help="NAME or NAME@VERSION of a target or draft."),
         db: Optional[str] = DB, output: str = OUTPUT) -> None:
    """Show every fact recorded for a target or draft (all versions when no @VERSION)."""
    from specops.api.lineage import show as run

    data = run(ref, db)
    _emit(data, output, _facts_tables)


def _facts_tables(rows: list[dict]) -> None:
    """One field | value table per version (``-`` where nothing was recorded; nested facts as JSON)."""
    from rich.markup import escape
    from rich.table import Table

    from specops.cli.output import console

    out = console()
    for row in rows:
        row = dict(row)
        tests = row.pop("canary_tests", None) or []
        ref = f"{row.get('name')}@{row.get('version')}"
        t = Table(title=escape(f"{row.get('kind', 'model')} {ref}"), show_header=True)
        t.add_column("field", no_wrap=True)
        t.add_column("value", overflow="fold")
        for key, value in row.items():
            shown = "-" if value is None else json.dumps(value) if isinstance(value, (dict, list)) else str(value)
            t.add_row(escape(key), escape(shown))
        out.print(t)
        for test in tests:  # the canary tests it took part in (specops heal), newest first
            out.print(escape(f"canary test {test['line']}"), soft_wrap=True)


@lineage_app.command("tree")
def tree(db: Optional[str] = DB, output: str = OUTPUT) -> None:
    """Targets -> drafts -> deployments, as a tree."""
    from specops.api.lineage import tree as run

    data = run(db)

    def render(d):
        from rich.markup import escape
        from rich.tree import Tree

        from specops.cli.output import console

        root = Tree("registry")
        for t in d:
            tn = root.add(f"[bold]{escape(t['ref'])}[/bold] (target)")
            for dep in t["deployments"]:
                tn.add(escape(f"deployment {dep['name']} [{dep['status']}] (no draft)"))
            for dr in t["drafts"]:
                dn = tn.add(escape(f"{dr['ref']} ({dr['method']})"))
                for dep in dr["deployments"]:
                    dn.add(escape(f"deployment {dep['name']} [{dep['status']}]"))
        console().print(root)
    _emit(data, output, render)


@lineage_app.command("check")
def check(target: str = typer.Option(..., "--target", help="Target NAME[@VERSION]."),
          draft: str = typer.Option(..., "--draft", help="Draft NAME[@VERSION]."),
          method: Optional[str] = typer.Option(None, "--method", help="Method to serve with (default: the draft's)."),
          vllm_version: str = typer.Option("0.33.0", "--vllm-version", help="vLLM release to check against."),
          db: Optional[str] = DB, output: str = OUTPUT) -> None:
    """Judge a target/draft pair. Exit 0 compatible, 1 incompatible, 2 could not evaluate or bad input."""
    from specops.api.lineage import check as run

    report = run(target, draft, vllm_version=vllm_version, method=method, db=db)

    def table(_):
        verdict = {"pass": "compatible", "fail": "INCOMPATIBLE"}.get(report.verdict, "COULD NOT EVALUATE")
        typer.echo(f"{report.draft} on {report.target} ({report.method}, vLLM {report.vllm_version}): {verdict}")
        _print_findings(report.findings, err=False)
    _emit(report.model_dump_public(), output, table)
    raise typer.Exit(report.exit_code)


@lineage_app.command("export")
def export(file: Optional[str] = typer.Option(None, "--file", help="Write here instead of stdout."),
           with_events: bool = typer.Option(False, "--with-events", help="Include the event log."),
           db: Optional[str] = DB) -> None:
    """Export the registry as JSON (targets, drafts, deployments, measurements, runs, jobs)."""
    from specops.api.lineage import export_json

    text = export_json(with_events=with_events, file=file, db=db)
    if not file:
        sys.stdout.write(text)


@lineage_app.command("import")
def import_(file: str = typer.Argument(..., help="A file written by `specops lineage export`."),
            db: Optional[str] = DB, output: str = OUTPUT) -> None:
    """Import an export (one transaction: a conflict or bad row writes nothing)."""
    from specops.api.lineage import import_file

    counts = import_file(file, db)
    _emit(counts, output, lambda c: typer.echo("imported " + ", ".join(f"{v} {k}" for k, v in c.items())))


@lineage_app.command("prune")
def prune(raw: str = typer.Option("7d", "--raw", help="Keep raw measurements this long, then hourly aggregates."),
          hourly: str = typer.Option("30d", "--hourly", help="Keep hourly aggregates this long, then daily."),
          horizon: str = typer.Option("365d", "--horizon", help="Delete measurements older than this."),
          apply: bool = typer.Option(False, "--apply", help="Do it (default: dry run, report only)."),
          db: Optional[str] = DB, output: str = OUTPUT) -> None:
    """Retention: downsample old measurements and delete beyond a horizon. Dry run unless --apply."""
    from specops.api.lineage import prune as run

    rep = run(raw=raw, hourly=hourly, horizon=horizon, apply=apply, db=db)

    def table(r):
        verb = "would" if r["dry_run"] else "did"
        typer.echo(f"{verb} delete {r['deleted']} measurements beyond {horizon}; fold {r['to_hourly']} raw rows into "
                   f"{r['hourly_rows']} hourly and {r['to_daily']} rows into {r['daily_rows']} daily aggregates; "
                   f"{r['remaining']} remain." + (" Run again with --apply to do it." if r["dry_run"] else ""))
    _emit(rep, output, table)
