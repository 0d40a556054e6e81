"""`specops metrics`, `specops bench`, `specops doctor`: measure engines (started by specops or adopted).

Exit codes: 0 ok; 2 nothing trustworthy could be measured (unreachable endpoint or Prometheus, missing
metrics, bad input); `bench` exits 1 when the engine's counters disagree with what the client received;
`doctor` exits 1 when any line is a problem.
"""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    app.command("metrics")(metrics_command)
    app.command("bench")(bench_command)
    app.command("doctor")(doctor_command)


def _fmt(v, spec: str = ".3f", unit: str = "") -> str:
    return "n/a" if v is None else f"{v:{spec}}{unit}"


def _ms(seconds) -> str:
    return "n/a" if seconds is None else f"{seconds * 1000:.2f}"


def metrics_command(
    deployment: str = typer.Option(None, "--deployment", "-d", help="Registered deployment to measure."),
    endpoint: str = typer.Option(None, "--endpoint", help="Engine base URL (reads its /metrics directly)."),
    served_name: str = typer.Option(None, "--served-name", help="Model name to report when an engine serves several."),
    prometheus_url: str = typer.Option(None, "--prometheus-url",
                                       help="Read through Prometheus (default: SPECOPS_PROMETHEUS_URL for --deployment)."),
    window: str = typer.Option(None, "--window", help="Window, e.g. 30s, 5m. Prometheus default 5m; "
                               "/metrics default: since the engine started (else two scrapes this far apart)."),
    output: str = typer.Option("table", "--output", "-o", help="table, json or yaml."),
) -> None:
    """Acceptance rate, mean acceptance length τ, per-token α, per-position rates and TPOT percentiles."""
    from specops.api.measure import measure
    from specops.cli.output import check_format, emit

    check_format(output)
    m = measure(deployment=deployment, endpoint=endpoint, served_name=served_name,
                prometheus_url=prometheus_url, window=window)
    emit(m, output, _metrics_table)


def _metrics_table(m) -> None:
    from rich.table import Table

    from specops.cli.output import console

    t = Table(title=f"{m.deployment}  ({m.source}, {m.window_start:%H:%M:%S}–{m.window_end:%H:%M:%S} UTC)")
    t.add_column("quantity")
    t.add_column("value", justify="right")
    rows = [
        ("acceptance rate (accepted/drafted)", _fmt(m.acceptance_rate)),
        ("mean acceptance length τ", _fmt(m.mean_acceptance_length)),
        (f"per-token α (i.i.d., K={m.num_speculative_tokens})", _fmt(m.per_token_alpha)),
        ("drafts / drafted / accepted", f"{m.num_drafts or 0:g} / {m.num_draft_tokens or 0:g} / "
                                        f"{m.num_accepted_tokens or 0:g}"),
    ]
    rows += [(f"position {i} rate", _fmt(r)) for i, r in enumerate(m.per_position_rate)]
    rows += [("TPOT p50 / p90 / p99", " / ".join(_fmt(v, ".4f", "s") for v in (m.tpot_p50, m.tpot_p90, m.tpot_p99))),
             ("KV-cache usage", _fmt(m.kv_cache_usage, ".1%")),
             ("requests running / waiting", f"{_fmt(m.requests_running, 'g')} / {_fmt(m.requests_waiting, 'g')}")]
    for k, v in rows:
        t.add_row(k, v)
    out = console()
    out.print(t)
    for note in m.notes:
        out.print(f"note: {note}")


def bench_command(
    deployment: str = typer.Option(None, "--deployment", "-d", help="Registered deployment (results are recorded)."),
    endpoint: str = typer.Option(None, "--endpoint", help="Engine base URL with speculation on."),
    served_name: str = typer.Option(None, "--served-name", help="Model name in requests (default: the only one)."),
    baseline_endpoint: str = typer.Option(None, "--baseline-endpoint", help="Same model, speculation off."),
    baseline_served_name: str = typer.Option(None, "--baseline-served-name", help="Model name on the baseline."),
    baseline: str = typer.Option(None, "--baseline", help="'redeploy': redeploy the deployment without speculation."),
    workload: str = typer.Option("code", "--workload", "-w", help="code, prose, long-output, or a JSONL file."),
    concurrency: str = typer.Option("1,4", "--concurrency", "-c", help="Comma-separated concurrency levels."),
    requests: int = typer.Option(16, "--requests", "-n", help="Requests per run."),
    rate: float = typer.Option(None, "--rate", help="Poisson arrivals at R requests/s (default: closed loop)."),
    stress_factor: float = typer.Option(None, "--stress-factor", help="Run at this multiple of --rate."),
    max_tokens: int = typer.Option(None, "--max-tokens", help="Override the workload's output length."),
    seed: int = typer.Option(1, "--seed", help="Seed for arrivals."),
    window: str = typer.Option("1s", "--window", help="Seconds between /metrics scrapes during a run."),
    warmup: int = typer.Option(1, "--warmup", help="Unmeasured warm-up requests per engine."),
    engine_pid: int = typer.Option(None, "--engine-pid", help="Local pid of the engine (memory)."),
    baseline_pid: int = typer.Option(None, "--baseline-pid", help="Local pid of the baseline engine."),
    api_key_env: str = typer.Option(None, "--api-key-env", help="Env var holding the API key."),
    output: str = typer.Option("table", "--output", "-o", help="table or json."),
    save: str = typer.Option(None, "--save", help="Also write the JSON result to this file."),
) -> None:
    """A/B benchmark: speculation on vs off — acceptance P50/P5, TPOT speedup, tokens/s, cross-checked."""

    from specops.api.measure import bench_deployment
    from specops.cli.output import check_format, check_writable, console, dumps, emit, versioned
    from specops.cli.output import progress as say

    check_format(output, ("table", "json"))
    if save:
        check_writable(save, "--save")  # before the benchmark runs, not after it
    with _progress() as progress:
        result = bench_deployment(
            deployment=deployment, endpoint=endpoint, served_name=served_name,
            baseline_endpoint=baseline_endpoint, baseline_served_name=baseline_served_name, baseline=baseline,
            workload=workload, concurrency=concurrency, requests=requests, rate=rate,
            stress_factor=stress_factor, max_tokens=max_tokens, seed=seed, window=window, warmup=warmup,
            engine_pid=engine_pid, baseline_pid=baseline_pid, api_key_env=api_key_env, progress=progress, say=say)
    emit(result, output, _bench_table)  # shown first: a failed save never loses the results
    if save:
        from specops.errors import InputError
        from specops.outputs import write_text

        try:
            write_text(save, dumps(versioned(result)) + "\n", "--save", what="results")  # the document -o json prints
        except InputError as exc:
            raise InputError(f"{exc.message}; the results are printed above",
                             "save them from the output, or give --save a writable path") from None
    if not result.crosscheck_ok:
        console(stderr=True).print("error: the engine's counters disagree with what the client received (see "
                                   "crosscheck). To fix: run on an engine with no other traffic.")
        raise typer.Exit(1)


class _progress:
    """A rich progress bar on stderr on a terminal (with the estimated time left), fed by the library's
    progress callback; without a terminal, plain lines through specops.cli.output.progress."""

    def __enter__(self):
        import time

        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        from specops.cli.output import console

        err = console(stderr=True)
        self._plain = not err.is_terminal
        self._bar = Progress("bench", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), "left",
                             TimeRemainingColumn(), console=err, transient=True,
                             disable=self._plain)  # no bar in pipes and logs
        self._bar.__enter__()
        self._task = self._bar.add_task("requests", total=None)
        self._done, self._total, self._t0 = 0, 0, time.monotonic()
        return self

    def __call__(self, event: str, amount: int) -> None:
        import time

        if event == "total":
            self._bar.update(self._task, total=amount)
            self._total = amount
        else:
            self._bar.advance(self._task, amount)
            self._done += amount
        if self._plain and self._total and self._done:
            from specops.api.measure import waiting
            from specops.cli.output import progress

            spent = time.monotonic() - self._t0
            progress(waiting(f"bench requests ({self._done} of {self._total})", spent,
                             spent * self._total / self._done))

    def __exit__(self, *exc):
        self._bar.__exit__(*exc)
        return False


def _bench_table(result) -> None:
    from rich.table import Table

    from specops.cli.output import console

    out = console()
    t = Table(title=f"bench {result.deployment or result.options.spec.endpoint} — workload {result.workload}")
    for col in ("engine", "conc", "ok", "tokens/s", "TTFT p50 ms", "TPOT p50 ms", "TPOT p90 ms", "accept P50",
                "accept P5", "τ P50", "counters"):
        t.add_column(col, justify="right" if col not in ("engine", "counters") else "left")
    for r in result.runs:
        t.add_row(r.role, str(r.concurrency), f"{r.ok}/{r.requests}", _fmt(r.tokens_per_s, ".1f"),
                  _ms(r.ttft_p50_s), _ms(r.tpot_p50_s), _ms(r.tpot_p90_s),
                  _fmt(r.acceptance_p50), _fmt(r.acceptance_p5), _fmt(r.acceptance_length_p50, ".2f"),
                  "agree" if r.crosscheck.agree else "DISAGREE")
    out.print(t)
    if result.comparisons:
        c = Table(title="speculation on vs off")
        for col in ("conc", "TPOT speedup (base/spec)", "95% interval", "verdict", "tokens/s spec", "tokens/s base",
                    "throughput ratio"):
            c.add_column(col, justify="left" if col == "verdict" else "right")
        for cmp in result.comparisons:
            interval = ("-" if cmp.tpot_speedup_low is None else
                        f"{cmp.tpot_speedup_low:.2f}–{cmp.tpot_speedup_high:.2f}x")
            c.add_row(str(cmp.concurrency), _fmt(cmp.tpot_speedup, ".2f", "x"), interval, cmp.speedup_verdict or "-",
                      _fmt(cmp.spec_tokens_per_s, ".1f"), _fmt(cmp.baseline_tokens_per_s, ".1f"),
                      _fmt(cmp.throughput_ratio, ".2f", "x"))
        out.print(c)
        out.print("95% interval: bootstrap of the ratio of median per-request TPOTs (2000 resamples of each run's "
                  "requests)")
        unsure = [cmp.concurrency for cmp in result.comparisons if cmp.speedup_verdict == "too few requests to tell"]
        if unsure:
            out.print(f"note: at concurrency {', '.join(map(str, unsure))} the interval spans 1x: too few requests "
                      "to tell speculation on from off. To fix: re-run with more --requests.")
    memory = {}
    for r in result.runs:
        for p in r.crosscheck.problems:
            out.print(f"crosscheck ({r.role}, c={r.concurrency}): {p}")
        if r.crosscheck.agree:
            out.print(f"crosscheck ({r.role}, c={r.concurrency}): engine counted "
                      f"{r.crosscheck.server_generation_tokens:g} tokens = client received {r.crosscheck.client_usage_tokens}")
        for n in r.notes:
            out.print(f"note ({r.role}, c={r.concurrency}): {n}")
        if r.memory:
            memory[r.role] = r.memory
    for role, mem in memory.items():
        out.print(f"memory ({role}): {mem.rss_mib:.0f} MiB RSS in {mem.processes} processes "
                  f"(peak {mem.peak_rss_mib:.0f} MiB)")
    for n in result.workload_notes + result.notes:
        out.print(f"note: {n}")
    out.print("recorded in the registry" if result.recorded else "not recorded (no --deployment)")


def doctor_command(
    output: str = typer.Option("table", "--output", "-o", help="table, json or yaml."),
) -> None:
    """Check what is installed and reachable: vLLM, GPUs, registry, Prometheus, cluster. Exit 1 on a problem,
    2 when a check could not evaluate (and none failed)."""
    from specops.api.measure import doctor
    from specops.cli.output import check_format, emit

    check_format(output)
    checks = doctor()
    emit(checks, output, _doctor_lines)
    if any(c.status == "problem" for c in checks):
        raise typer.Exit(1)
    if any(c.status == "could not evaluate" for c in checks):
        raise typer.Exit(2)


def _doctor_lines(checks) -> None:
    for c in checks:
        line = f"{c.status:<8} {c.name:<11} {c.detail}"
        if c.fix and c.status in ("problem", "could not evaluate"):
            line += f" To fix: {c.fix}"
        typer.echo(line)
