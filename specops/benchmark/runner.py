"""Drive the A/B benchmark: for each concurrency level, run the workload against the speculative engine
and (optionally) the baseline, scraping ``/metrics`` before, during (every ``window_s``) and after.

Per run: TTFT/TPOT per request, tokens/s, the server's spec-counter deltas, acceptance P50/P5 across
requests (when the server offers per-request spec metrics) or across scrape windows, process memory,
and the cross-check of engine counters against what the client received.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Callable
from datetime import datetime, timezone

from specops.benchmark.client import RequestResult, completion_body, plain_completion, stream_completion
from specops.benchmark.crosscheck import crosscheck
from specops.benchmark.procmem import process_memory
from specops.benchmark.stats import bootstrap_ratio_interval, percentile, speedup_verdict
from specops.benchmark.types import ABComparison, BenchOptions, BenchResult, BenchTarget, RunResult
from specops.benchmark.workloads import Workload, cap_to_context, load_workload
from specops.engines.client import COMPLETIONS, MODELS, route
from specops.errors import InputError, MeasurementError
from specops.metrics import base_url
from specops.metrics.derive import delta, pick_group, require_speculation
from specops.metrics.scrape import ascrape

Progress = Callable[[str, int], None]  # (event, amount): "total" sets the total, "advance" steps


def auth_headers(target: BenchTarget) -> dict:
    if not target.api_key_env:
        return {}
    value = os.environ.get(target.api_key_env)
    if not value:
        raise InputError(f"environment variable {target.api_key_env} (the API key) is not set",
                         f"export {target.api_key_env}=... before running")
    return {"Authorization": f"Bearer {value}"}


async def _model_info(client, target: BenchTarget, headers: dict) -> tuple[str, int | None]:
    import httpx

    url = route(target.endpoint, MODELS)
    try:
        resp = await asyncio.wait_for(client.get(url, headers=headers, timeout=10), 10)
    except asyncio.TimeoutError:
        raise MeasurementError(f"{url} did not answer within 10s",
                               "check that the engine is running; a healthy engine answers in milliseconds") from None
    except httpx.HTTPError as exc:
        raise MeasurementError(f"cannot reach {url} ({exc.__class__.__name__})",
                               "check that the engine is running and the URL/port is right") from None
    if resp.status_code != 200:
        fix = "set --api-key-env to the variable holding its key" if resp.status_code == 401 else \
            "point at an OpenAI-compatible vLLM server"
        raise MeasurementError(f"{url} answered HTTP {resp.status_code}", fix)
    try:
        models = {m["id"]: m for m in resp.json()["data"]}
        if not all(isinstance(k, str) and k and isinstance(v, dict) for k, v in models.items()):
            raise TypeError("ids are not names")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise MeasurementError(f"{url} did not answer like an OpenAI-compatible server (a JSON object whose "
                               f"data lists models with an id; {exc.__class__.__name__})",
                               "point at a vLLM server's base URL") from None
    name = target.served_name or (next(iter(models)) if len(models) == 1 else None)
    if name is None or name not in models:
        raise InputError(f"{target.endpoint} serves {', '.join(models) or 'no models'}; "
                         f"cannot use \"{target.served_name or ''}\"", "pass --served-name with one of them")
    return name, models[name].get("max_model_len")


async def _prompt_tokens(client, endpoint: str, model: str, prompts: list[str], headers: dict) -> list[int]:
    out = []
    for p in prompts:
        try:
            r = await asyncio.wait_for(client.post(base_url(endpoint) + "/tokenize", json={"model": model, "prompt": p},
                                                   headers=headers, timeout=10), 10)
            out.append(int(r.json()["count"]) if r.status_code == 200 else len(p.encode()))
        except Exception:  # noqa: BLE001 - an upper bound is enough to cap max_tokens
            out.append(len(p.encode()))
    return out


def arrival_times(n: int, rate: float | None, seed: int) -> list[float]:
    """Poisson arrivals (exponential gaps) at ``rate`` per second; all at 0 for a closed loop."""
    if not rate:
        return [0.0] * n
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(rate)
    return out


async def _settled(client, endpoint: str, first):
    """Scrape until the counters stop moving (the engine records stats just after the last chunk)."""
    snap = first
    for _ in range(15):
        await asyncio.sleep(0.2)
        nxt = await ascrape(client, endpoint)
        same = all(nxt.groups.get(g) == v for g, v in snap.groups.items())
        snap = nxt
        if same:
            break
    return snap


async def run_once(target: BenchTarget, model: str, workload: Workload, concurrency: int, opts: BenchOptions,
                   rate: float | None, progress: Progress | None = None) -> RunResult:
    import httpx

    headers = auth_headers(target)
    url = route(target.endpoint, COMPLETIONS)
    prompts = [workload.prompts[i % len(workload.prompts)] for i in range(opts.requests)]
    arrivals = arrival_times(len(prompts), rate, opts.seed)
    limits = httpx.Limits(max_connections=concurrency + 4)
    async with httpx.AsyncClient(timeout=opts.request_timeout_s, limits=limits) as client:
        before = await _settled(client, target.endpoint, await ascrape(client, target.endpoint))
        group = pick_group(before, model)
        snapshots = [before]
        stop = asyncio.Event()

        async def scraper():
            while not stop.is_set():
                try:
                    await asyncio.wait_for(stop.wait(), timeout=opts.window_s)
                except asyncio.TimeoutError:
                    snapshots.append(await ascrape(client, target.endpoint))

        sem = asyncio.Semaphore(concurrency)
        t0 = time.perf_counter()
        started = datetime.now(timezone.utc)

        async def one(i: int) -> RequestResult:
            delay = arrivals[i] - (time.perf_counter() - t0)
            if delay > 0:
                await asyncio.sleep(delay)
            async with sem:
                body = completion_body(model, prompts[i].prompt, prompts[i].max_tokens, stream=opts.stream)
                send = stream_completion if opts.stream else plain_completion
                res = await send(client, url, body, i, time.perf_counter() - t0, headers)
            if progress:
                progress("advance", 1)
            return res

        scrape_task = asyncio.create_task(scraper())
        results = await asyncio.gather(*(one(i) for i in range(len(prompts))))
        duration = time.perf_counter() - t0
        ended = datetime.now(timezone.utc)
        stop.set()
        await scrape_task
        after = await _settled(client, target.endpoint, await ascrape(client, target.endpoint))
    snapshots.append(after)
    return _summarise(target, model, group, concurrency, rate, results, before, after, snapshots,
                      started, ended, duration)


def _summarise(target, model, group, concurrency, rate, results, before, after, snapshots,
               started, ended, duration) -> RunResult:
    ok = [r for r in results if r.ok]
    errors = sorted({r.error for r in results if r.error})[:5]
    m = delta(before, after, group)
    if target.role == "spec":
        require_speculation(m, target.endpoint)
    tokens = sum(r.completion_tokens or 0 for r in ok)
    run = RunResult(
        role=target.role, endpoint=target.endpoint, served_name=model, concurrency=concurrency, rate=rate,
        requests=len(results), ok=len(ok), failed=len(results) - len(ok), errors=errors,
        started_at=started, ended_at=ended, duration_s=round(duration, 4), output_tokens=tokens,
        tokens_per_s=tokens / duration if duration > 0 and tokens else None,
        ttft_p50_s=percentile([r.ttft_s for r in ok], 50), ttft_p90_s=percentile([r.ttft_s for r in ok], 90),
        tpot_p50_s=percentile([r.tpot_s for r in ok], 50), tpot_p90_s=percentile([r.tpot_s for r in ok], 90),
        tpot_mean_s=(sum(t) / len(t)) if (t := [r.tpot_s for r in ok if r.tpot_s is not None]) else None,
        e2e_per_token_p50_s=percentile([r.e2e_s / r.completion_tokens for r in ok
                                        if r.e2e_s and r.completion_tokens], 50),
        measurement=m, crosscheck=crosscheck(m, results), request_results=list(results),
        memory=process_memory(target.pid) if target.pid else None)
    if m.speculation:
        _acceptance(run, ok, snapshots, group)
    if not ok:
        run.notes.append("every request failed: no latency or throughput numbers")
    if run.tpot_p50_s and run.e2e_per_token_p50_s and run.tpot_p50_s < 0.25 * run.e2e_per_token_p50_s:
        run.notes.append(f"bursty stream: streamed TPOT {run.tpot_p50_s * 1000:.2f} ms vs end-to-end "
                         f"{run.e2e_per_token_p50_s * 1000:.2f} ms per token (tokens arrived in bursts: a "
                         "CPU-starved server or client); trust end-to-end time and tokens/s here")
    return run


def _acceptance(run: RunResult, ok: list[RequestResult], snapshots, group: str) -> None:
    per_req = [r.spec for r in ok if r.spec and r.spec.get("num_draft_tokens")]
    if per_req:
        rates = [s["draft_acceptance_rate"] for s in per_req]
        lengths = [s["mean_acceptance_length"] for s in per_req]
        run.acceptance_source = "requests"
    else:
        windows = [delta(a, b, group) for a, b in zip(snapshots, snapshots[1:], strict=False)]
        windows = [w for w in windows if not w.empty_window and w.acceptance_rate is not None]
        rates = [w.acceptance_rate for w in windows]
        lengths = [w.mean_acceptance_length for w in windows]
        run.acceptance_source = "windows"
        if len(windows) < 5:
            run.notes.append(f"acceptance P50/P5 over only {len(windows)} window(s): run longer or lower "
                             "--window, or start vLLM with --per-request-spec-decode-metrics summary")
    run.acceptance_samples = len(rates)
    run.acceptance_p50 = percentile(rates, 50)
    run.acceptance_p5 = percentile(rates, 5)
    run.acceptance_length_p50 = percentile(lengths, 50)


async def _warm(target: BenchTarget, model: str, workload: Workload, n: int) -> None:
    import httpx

    if n <= 0:
        return
    url = route(target.endpoint, COMPLETIONS)
    async with httpx.AsyncClient(timeout=600) as client:
        for i in range(n):
            p = workload.prompts[i % len(workload.prompts)]
            await stream_completion(client, url, completion_body(model, p.prompt, min(p.max_tokens, 16)), i, 0.0,
                                    auth_headers(target))


async def prepare_target(client, target: BenchTarget, base: Workload) -> tuple[str, Workload]:
    """(served model name, ``base`` capped to the engine's context) for one engine."""
    model, max_len = await _model_info(client, target, auth_headers(target))
    counts = await _prompt_tokens(client, target.endpoint, model, [p.prompt for p in base.prompts],
                                  auth_headers(target)) if max_len else []
    return model, cap_to_context(base, max_len, counts)


async def warm(target: BenchTarget, model: str, workload: Workload, n: int) -> None:
    """``n`` untimed requests (first-request compilation, caches) before any measurement."""
    await _warm(target, model, workload, n)


async def run_bench(opts: BenchOptions, progress: Progress | None = None) -> BenchResult:
    """Run every (engine, concurrency) pair; the library never prints."""
    import httpx

    rate = opts.rate * opts.stress_factor if (opts.rate and opts.stress_factor) else opts.rate
    if opts.stress_factor and not opts.rate:
        raise InputError("--stress-factor multiplies a normal request rate, and none was given",
                         "pass --rate R (the normal rate) with --stress-factor")
    base = load_workload(opts.workload, opts.max_tokens, opts.seed)
    targets = [opts.spec] + ([opts.baseline] if opts.baseline else [])
    prepared: dict[str, tuple[str, Workload]] = {}
    async with httpx.AsyncClient() as client:
        for t in targets:
            prepared[t.role] = await prepare_target(client, t, base)
    notes = list(prepared["spec"][1].notes)
    if progress:
        progress("total", opts.requests * len(targets) * len(opts.concurrency))
    for t in targets:
        await _warm(t, prepared[t.role][0], prepared[t.role][1], opts.warmup)
    runs: list[RunResult] = []
    for c in opts.concurrency:
        for t in targets:
            model, workload = prepared[t.role]
            runs.append(await run_once(t, model, workload, c, opts, rate, progress))
    comparisons = compare(runs) if opts.baseline else []
    return BenchResult(deployment=opts.deployment, workload=opts.workload, workload_notes=notes, options=opts,
                       runs=runs, comparisons=comparisons, crosscheck_ok=all(r.crosscheck.agree for r in runs),
                       notes=[] if opts.baseline else ["no baseline: pass --baseline-endpoint (or --baseline "
                                                       "redeploy) for TPOT speedup"])


def compare(runs: list[RunResult]) -> list[ABComparison]:
    out = []
    for c in sorted({r.concurrency for r in runs}):
        spec = next((r for r in runs if r.concurrency == c and r.role == "spec"), None)
        base = next((r for r in runs if r.concurrency == c and r.role == "baseline"), None)
        if not spec or not base:
            continue
        speedup = (base.tpot_p50_s / spec.tpot_p50_s) if (base.tpot_p50_s and spec.tpot_p50_s) else None
        ratio = (spec.tokens_per_s / base.tokens_per_s) if (spec.tokens_per_s and base.tokens_per_s) else None
        interval = bootstrap_ratio_interval([r.tpot_s for r in base.request_results if r.ok],
                                            [r.tpot_s for r in spec.request_results if r.ok], seed=c)
        out.append(ABComparison(concurrency=c, spec_tpot_p50_s=spec.tpot_p50_s, baseline_tpot_p50_s=base.tpot_p50_s,
                              tpot_speedup=speedup, tpot_speedup_low=interval[0] if interval else None,
                              tpot_speedup_high=interval[1] if interval else None,
                              speedup_verdict=speedup_verdict(interval) if speedup is not None else None,
                              spec_tokens_per_s=spec.tokens_per_s,
                              baseline_tokens_per_s=base.tokens_per_s, throughput_ratio=ratio))
    return out
