"""What `specops bench` calls: resolve the engines (registry or URLs), run, record in the registry."""

from __future__ import annotations

from pydantic import ValidationError

from specops.benchmark import bench
from specops.benchmark.types import BenchOptions, BenchResult, Target
from specops.errors import InputError


def parse_concurrency(text: str) -> list[int]:
    try:
        levels = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        levels = []
    if not levels or any(c < 1 or c > 4096 for c in levels):
        raise InputError(f'--concurrency "{text}" is not a list of positive integers', "use e.g. 1,4,16")
    return sorted(set(levels))


def bench_deployment(*, deployment: str | None = None, endpoint: str | None = None, served_name: str | None = None,
                     baseline_endpoint: str | None = None, baseline_served_name: str | None = None,
                     baseline: str | None = None, workload: str = "code", concurrency: str = "1,4",
                     requests: int = 16, rate: float | None = None, stress_factor: float | None = None,
                     max_tokens: int | None = None, seed: int = 1, window: str = "1s", warmup: int = 1,
                     engine_pid: int | None = None, baseline_pid: int | None = None,
                     api_key_env: str | None = None, progress=None) -> BenchResult:
    from specops.metrics import base_url, parse_duration

    if bool(deployment) == bool(endpoint):
        raise InputError("pass exactly one of --deployment NAME or --endpoint URL",
                         "name a registered deployment (see `specops deployment list`), or give a base URL")
    if baseline not in (None, "redeploy"):
        raise InputError(f'--baseline "{baseline}" is not known', "use --baseline redeploy, or --baseline-endpoint URL")
    if baseline and baseline_endpoint:
        raise InputError("--baseline redeploy and --baseline-endpoint both given", "pick one")
    row = None
    if deployment:
        from specops.metrics.measure import registered

        row = registered(deployment)
        if not row.endpoint:
            raise InputError(f'deployment "{deployment}" has no endpoint recorded',
                             f"re-register it: specops deployment register {deployment} --endpoint URL")
        endpoint = row.endpoint
        served_name = served_name or row.served_model_name
        engine_pid = engine_pid or row.pid
        api_key_env = api_key_env or row.api_key_env
    levels = parse_concurrency(concurrency)
    try:
        spec = Target(role="spec", endpoint=base_url(endpoint), served_name=served_name, pid=engine_pid,
                      api_key_env=api_key_env)
        base = None
        if baseline_endpoint:
            base = Target(role="baseline", endpoint=base_url(baseline_endpoint),
                          served_name=baseline_served_name, pid=baseline_pid, api_key_env=api_key_env)
        opts = BenchOptions(deployment=deployment, spec=spec, baseline=base, workload=workload, concurrency=levels,
                            requests=requests, rate=rate, stress_factor=stress_factor, max_tokens=max_tokens,
                            seed=seed, window_s=parse_duration(window), warmup=warmup)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(f"--{str(err['loc'][-1]).replace('_', '-')}: {err['msg']}",
                         "see `specops bench --help`") from None
    if baseline == "redeploy":
        result = _with_redeployed_baseline(deployment, row, opts, progress)
    else:
        result = bench(opts, progress)
    if deployment:
        record(result)
    return result


def _with_redeployed_baseline(deployment: str | None, row, opts: BenchOptions, progress) -> BenchResult:
    """Start the deployment's own engine config without speculation on a free loopback port, bench both
    engines, then stop the temporary one. The speculative deployment keeps serving meanwhile."""
    if not deployment or row is None or row.platform != "local":
        raise InputError("--baseline redeploy works for local deployments specops started (it needs their "
                         "spec)", "pass --baseline-endpoint URL of an engine serving the same model "
                         "without speculation")
    from specops.benchmark.twin import baseline_twin

    with baseline_twin(deployment, row) as (url, pid):
        base = Target(role="baseline", endpoint=url, served_name=opts.spec.served_name, pid=pid,
                      api_key_env=opts.spec.api_key_env)
        return bench(opts.model_copy(update={"baseline": base}), progress)


def record(result: BenchResult) -> None:
    """One registry measurement per speculative run, plus one `bench` event."""
    from specops.registry import open_registry

    reg = open_registry()
    by_c = {c.concurrency: c for c in result.comparisons}
    for run in result.runs:
        m = run.measurement
        if run.role != "spec" or m is None or not m.speculation:
            continue
        cmp = by_c.get(run.concurrency)
        reg.record_measurement(
            result.deployment, window_start=run.started_at, window_end=run.ended_at,
            acceptance_rate=m.acceptance_rate, mean_acceptance_length=m.mean_acceptance_length,
            per_position=[r for r in m.per_position_rate if r is not None] or None,
            num_drafts=int(m.num_drafts or 0), num_draft_tokens=int(m.num_draft_tokens or 0),
            num_accepted_tokens=int(m.num_accepted_tokens or 0), task=_task(result.workload), source="bench",
            extra={"concurrency": run.concurrency, "rate": run.rate, "tokens_per_s": run.tokens_per_s,
                   "tpot_p50_s": run.tpot_p50_s, "ttft_p50_s": run.ttft_p50_s,
                   "acceptance_p50": run.acceptance_p50, "acceptance_p5": run.acceptance_p5,
                   "acceptance_source": run.acceptance_source, "per_token_alpha": m.per_token_alpha,
                   "tpot_speedup": cmp.tpot_speedup if cmp else None, "crosscheck_agree": run.crosscheck.agree})
    summary = "; ".join(f"c={c.concurrency}: TPOT speedup {c.tpot_speedup:.2f}x" for c in result.comparisons
                        if c.tpot_speedup is not None) or "no baseline"
    reg.record_event("bench", result.deployment, f"bench {result.workload}: {summary}", actor="specops bench",
                     data={"workload": result.workload, "concurrency": result.options.concurrency,
                           "crosscheck_ok": result.crosscheck_ok,
                           "comparisons": [c.model_dump(mode="json") for c in result.comparisons]})
    result.recorded = True


def _task(workload: str) -> str:
    from pathlib import Path

    return workload if "/" not in workload and not workload.endswith(".jsonl") else Path(workload).stem
