"""The human rendering of a CapacityPlan (`specops recommend --gpus-available N --qps Q --tpot-slo MS`):
the layouts tried, the one chosen, its headroom and crossover. JSON/YAML come from the same model."""

from __future__ import annotations


def _what(row) -> str:
    return "none" if row.method == "none" else row.method


def print_capacity(cap) -> None:
    from specops.cli.output import console
    from specops.cli.plan_view import _fit_table, _line

    out = console()
    slo = f"TPOT ≤ {cap.tpot_slo_ms:g} ms" + (f", TTFT ≤ {cap.ttft_slo_ms:g} ms" if cap.ttft_slo_ms else "")
    _line(out, f"{cap.model}: {cap.qps:g} req/s of {cap.context_len}-in / {cap.output_len}-out {cap.task} on up to "
          f"{cap.gpus_available}x {cap.gpu}, {slo}")
    rows = []
    for r in cap.rows:
        layout = (f"DP{r.data_parallel_size}" if r.data_parallel_size > 1 else f"TP{r.tensor_parallel_size}") + (
            f"xPP{r.pipeline_parallel_size}" if r.pipeline_parallel_size > 1 else "") + ("+EP" if r.expert_parallel else "")
        rows.append([str(r.gpus_per_replica), layout, _what(r), f"{r.capacity_rps:.2f}", r.limited_by,
                     str(r.replicas or "-"), str(r.gpus_total or "-"),
                     "-" if r.headroom is None else f"{r.headroom:+.0%}",
                     ("chosen" if r == cap.chosen else "yes" if r.fits_pool else "no")])
    cols = [("GPU/rep", "right", False), ("layout", "right", False), ("spec", "left", False),
            ("req/s/rep", "right", False), ("limit", "left", True), ("reps", "right", False),
            ("GPUs", "right", False), ("headroom", "right", False), ("fits", "left", False)]
    table, dropped = _fit_table(out, "layouts tried (capacity = highest rate one replica serves within the SLO)",
                                cols, rows)
    out.print(table)
    if dropped:
        _line(out, f"({', '.join(dropped)} left out at this width; -o json has them)")
    c, p = cap.chosen, cap.plan
    spec = "no speculation" if c.method == "none" else f"{c.method} γ={p.num_speculative_tokens}" + (
        f" (draft {c.draft})" if c.draft else "")
    _line(out, f"chosen: {c.replicas} replicas × {c.gpus_per_replica} GPUs ("
          + (f"DP {c.data_parallel_size} attention" if c.data_parallel_size > 1 else f"TP {c.tensor_parallel_size}")
          + (f", PP {c.pipeline_parallel_size}" if c.pipeline_parallel_size > 1 else "")
          + (", expert parallel" if c.expert_parallel else "") + f") = {c.gpus_total} of {cap.gpus_available} GPUs, "
          f"{spec}; {c.capacity_rps:.2f} req/s a replica, headroom {c.headroom:+.0%} at {cap.qps:g} req/s")
    if cap.capacity_low_rps is not None:
        _line(out, f"capacity range (the speedup's 80% range): {cap.capacity_low_rps:.2f}-{cap.capacity_high_rps:.2f} "
              f"req/s a replica", indent=2)
    ld = p.load
    if ld is not None and ld.tpot_ms is not None:
        _line(out, f"at {cap.per_replica_qps:g} req/s a replica: {ld.concurrency} in flight, TPOT {ld.tpot_ms:.1f} ms, "
              f"TTFT {ld.ttft_ms:.0f} ms (prefills take {ld.prefill_share:.0%} of the GPU)", indent=2)
    if cap.gpus_without_speculation is not None and c.method != "none":
        _line(out, f"without speculation: {cap.gpus_without_speculation} GPUs", indent=2)
    elif c.method != "none":
        _line(out, "without speculation: no layout of the pool serves it", indent=2)
    if cap.speculation_gain is not None:
        _line(out, f"speculation on this layout: {cap.speculation_gain:.2f}x the capacity", indent=2)
    cross = (f"crossover: {cap.crossover_rps_per_replica:.2f} req/s a replica ({cap.crossover_rps:.1f} over "
             f"{c.replicas}): " if cap.crossover_rps_per_replica is not None else "crossover: none: ")
    _line(out, cross + cap.crossover_note, indent=2)
    if cap.evidence:
        _line(out, "evidence: " + cap.evidence + ("" if cap.evidence_near is not False else
                                                  " (no published row is near this configuration)"), indent=2)
    for n in cap.notes:
        _line(out, "note: " + n, indent=2)
    import shlex

    if p.vllm.withheld:
        for w in p.vllm.withheld:
            _line(out, "launch (each replica): withheld: " + w.line())
    else:
        _line(out, "launch (each replica): " + shlex.join(p.vllm.argv))


def run_capacity(values: dict, gpus_available, tpot_slo, ttft_slo, keda: bool, fmt: str, name, sweep,
                 calibration) -> None:
    """`recommend --gpus-available ...`: the capacity search, printed as a table, JSON/YAML, or a DeploymentSpec
    with replicas and autoscaling (`-o deployment`)."""
    import typer

    from specops.api.capacity import capacity, capacity_deployment_yaml
    from specops.cli.output import emit
    from specops.errors import InputError

    if gpus_available is None:
        raise InputError("--tpot-slo, --ttft-slo and --keda belong to the capacity search",
                         "add --gpus-available N (the GPUs of the pool) and --qps Q")
    if values.get("qps") is None:
        raise InputError("--gpus-available needs the request rate the pool must serve", "add --qps Q (req/s)")
    if sweep is not None:
        raise InputError("--sweep and --gpus-available both vary the plan", "drop --sweep")
    if keda and fmt != "deployment":
        raise InputError("--keda changes the autoscaler of the rendered deployment", "add -o deployment")
    result = capacity(values, gpus_available=gpus_available, qps=values["qps"],
                      tpot_slo_ms=tpot_slo, ttft_slo_ms=ttft_slo, calibration=calibration)
    if fmt == "deployment":
        typer.echo(capacity_deployment_yaml(result, values, name, keda=keda), nl=False)
        return
    emit(result, fmt, print_capacity)
