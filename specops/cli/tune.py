"""`specops tune`: measure a small grid on the real engine, fit the performance model, store a
named calibration, and report predicted vs measured.

Exit codes: 0 done (some points may have failed: they are in the report); 2 bad input, or nothing
could be measured.
"""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    app.command("tune")(tune_command)


def tune_command(
    deployment: str = typer.Option(None, "--deployment", "-d", help="Registered deployment whose model to tune."),
    spec: str = typer.Option(None, "--spec", help="Deployment spec (deploy.yaml) whose target/draft to tune."),
    model: str = typer.Option(None, "--model", help="Target model folder (instead of --deployment/--spec)."),
    draft: str = typer.Option(None, "--draft", help="Draft folder for draft_model/eagle3 (default: the spec's)."),
    workload: str = typer.Option("code", "--workload", "-w", help="Built-in workload (code, prose, long-output) or JSONL."),
    methods: str = typer.Option("ngram,draft_model", "--methods", help="Methods to tune; the baseline 'none' is always measured."),
    gammas: str = typer.Option("1,2,3,4,6", "--gammas", help="γ values: a list or range, e.g. 1-8 or 1,2,3,4,6."),
    concurrency: str = typer.Option("1,4", "--concurrency", help="Concurrency levels (varied without a restart)."),
    budget_minutes: float = typer.Option(None, "--budget-minutes", help="Wall-clock budget; most informative points "
                                         "first. With --resume: the budget of this continuation."),
    name: str = typer.Option(None, "--name", help="Calibration name (default tune-<run id>)."),
    resume: str = typer.Option(None, "--resume", help="Continue an interrupted run (its stored options are reused)."),
    passes: int = typer.Option(2, "--passes", help="Visits per configuration, interleaved A B A B (spread)."),
    max_passes: int = typer.Option(None, "--max-passes", help="Most passes incl. extra ones for noisy "
                                   "configurations (default --passes + 2)."),
    spread_target: float = typer.Option(None, "--spread-target", help="Repeat a configuration while a point "
                                        "spreads more than this share of its median (default 0.10)."),
    requests: int = typer.Option(8, "--requests", help="Requests per run."),
    max_tokens: int = typer.Option(64, "--max-tokens", help="Output tokens per request."),
    enforce_eager: bool = typer.Option(False, "--enforce-eager", help="Start engines with --enforce-eager."),
    dtype: str = typer.Option(None, "--dtype", help="Engine --dtype (default bfloat16; float32 on CPUs without "
                              "AVX512-BF16)."),
    cpus: str = typer.Option(None, "--cpus", help="Pin local engines and the load generator to these CPUs, e.g. 1 "
                             "or 0-3 (steadier numbers on a small shared box)."),
    inner_repeats: int = typer.Option(None, "--inner-repeats", help="Runs per load inside one engine life (default 1)."),
    endpoint_for: list[str] = typer.Option(None, "--endpoint-for",
                                           help="Remote engine per configuration, CONFIG=URL (none, ngram-g2, "
                                           "draft_model-g3, ...): tune only, no redeploy. Repeatable."),
    cost_fit: str = typer.Option("auto", "--cost-fit", help="Step-cost fit: synthetic (extra runs at set acceptance "
                                 "through vLLM's synthetic rejection sampler), joint (from the standard runs), or "
                                 "auto (synthetic where the installed vLLM runs it)."),
    synthetic_rates: str = typer.Option(None, "--synthetic-rates", help="α of the synthetic cost runs, e.g. 0.3,0.8 "
                                        "(default)."),
    refit: bool = typer.Option(False, "--refit", help="With --resume: fit and report the stored points, "
                               "measuring nothing (a new calibration revision)."),
    html: str = typer.Option(None, "--html", help="Also write the HTML report (plots) to this file."),
    list_: bool = typer.Option(False, "--list", help="List stored tune runs and calibrations, then exit."),
    output: str = typer.Option("table", "--output", "-o", help="table or json."),
) -> None:
    """Measure a grid on the real engine, fit the performance model, store a calibration, report."""
    from specops.api.tune import options_from_flags, run, stored
    from specops.cli.output import check_format, emit

    check_format(output, ("table", "json"))
    if html:
        from specops.cli.output import check_writable

        check_writable(html, "--html", makes_folders=True)  # before anything is planned or started
    if list_:
        emit(stored(), output, _list_table)
        return
    opts = None
    if not resume:
        opts = options_from_flags(deployment=deployment, spec=spec, model=model, draft=draft, endpoint_for=endpoint_for,
                                  workload=workload, methods=methods, gammas=gammas, concurrency=concurrency,
                                  name=name, passes=passes, requests=requests, max_tokens=max_tokens,
                                  enforce_eager=enforce_eager, dtype=dtype, inner_repeats=inner_repeats,
                                  max_passes=max_passes, spread_target=spread_target, cpus=cpus,
                                  budget_minutes=budget_minutes, cost_fit=cost_fit,
                                  synthetic_rates=synthetic_rates)
    progress = _progress() if output == "table" else None
    _sigterm_interrupts()  # a terminated run stops its engine (finally blocks) and stays resumable
    data = run(opts, resume=resume, refit=refit, budget_minutes=budget_minutes, html=html, progress=progress)
    emit(data, output, _table)


def _sigterm_interrupts() -> None:
    import signal

    def handler(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def _progress():
    from specops.cli.output import console

    err = console(stderr=True)

    def show(event: str, info: dict) -> None:
        if event == "start":
            err.print(f"[dim]starting engine {info['config']} ({info['points']} runs)…[/dim]")
        elif event == "failed":
            err.print(f"[red]{info['config']}: {info['error']}[/red]")
        elif event == "point":
            err.print(f"[dim]  {info['point']}: {info['status']}[/dim]")
        elif event == "budget":
            err.print(f"[yellow]budget: skipping {info['config']}[/yellow]")
    return show


def _fig(f) -> str:
    return "n/a" if f is None else f"{f.median:.1f} [{f.low:.1f}–{f.high:.1f}]"


def _pct(v) -> str:
    return "n/a" if v is None else f"{v:+.1f}%"


def _table(data) -> None:
    from rich.table import Table

    from specops.cli.output import console

    rep = data["report"]
    t = Table(title=f"tune {rep.run_id} → calibration {rep.calibration}")
    for col in ("config", "c", "tok/s median [spread]", "TPOT ms", "acceptance", "predicted tok/s", "error",
                "left-out error"):
        t.add_column(col, justify="left" if col == "config" else "right")
    for r in rep.rows:
        if r.status == "failed":
            t.add_row(r.config.key, str(r.concurrency), f"[red]failed: {(r.error or '')[:60]}[/red]", "", "", "", "", "")
            continue
        t.add_row(r.config.key, str(r.concurrency), _fig(r.tokens_per_s), _fig(r.tpot_ms),
                  "n/a" if r.acceptance_rate is None else f"{r.acceptance_rate:.2f}",
                  f"{r.predicted_tokens_per_s:.1f}", _pct(r.error_pct), _pct(r.leave_out_error_pct))
    out = console()
    out.print(t)
    out.print(f"median |error| {_pct(rep.median_error_pct)}; left out of the fit {_pct(rep.median_leave_out_error_pct)}")
    if rep.held_out:
        errs = sorted(abs(h.error_pct) for h in rep.held_out)
        out.print(f"each (method, γ, batch) left out of the fit: median |error| {errs[len(errs) // 2]:.1f}%, "
                  f"max {errs[-1]:.1f}% over {len(errs)} (cost fit: {rep.cost_fit})")
    for pick in rep.model_picks:
        out.print(f"c={pick.concurrency}: fitted model picks {pick.config.key} ({pick.tokens_per_s:.1f} tok/s predicted)")
    for best in rep.best_measured:
        out.print(f"c={best.concurrency}: best measured {best.config.key} ({best.tokens_per_s:.1f} tok/s)")
    for line in rep.pick_within + rep.notes:
        out.print(line)
    for p in data["recommend_picks"]:
        what = "no speculation" if p["method"] == "none" else f"{p['method']} γ={p['gamma']}"
        measured = "not measured" if p["tokens_per_s_measured"] is None else f"measured {p['tokens_per_s_measured']:.1f}"
        out.print(f"c={p['concurrency']}: `specops recommend --calibration {data['calibration']}` picks {what} "
                  f"({measured} tok/s)")
    if data["html"]:
        out.print(f"HTML report: {data['html']}")
    out.print(f"calibration stored in the registry: {data['calibration']} "
              f"(use it with `specops recommend --gpu cpu --calibration {data['calibration']}`)")


def _list_table(data) -> None:
    from rich.table import Table

    from specops.cli.output import console

    out = console()
    t = Table(title="tune runs")
    for col in ("run id", "created", "model", "methods", "points"):
        t.add_column(col, no_wrap=col == "run id")
    for r in data["runs"]:
        t.add_row(r["run_id"], r["created_at"][:19], r["model"], ",".join(r["methods"]), str(r["points"]))
    out.print(t)
    c = Table(title="calibrations (newest revision)")
    for col in ("calibration", "created", "model", "hardware", "engine", "points"):
        c.add_column(col, no_wrap=col == "calibration")
    for x in data["calibrations"]:
        c.add_row(x["ref"], x["created_at"][:19], x["model"], x["hardware"], x["engine_version"], str(x["samples"]))
    out.print(c)
