"""What `specops recommend` calls.

- ``build_request``: a RecommendRequest from loose values (the CLI's flags): settings precedence,
  choices with "did you mean", and pydantic errors turned into one-line InputErrors.
- ``recommend_with_defaults``: the planner with what this installation has learned (measured
  acceptance from the registry, a calibration from ``specops tune``).
- ``deployment_yaml``: the DeploymentSpec YAML of a plan, for ``specops deploy``.
- ``sweep`` / ``sweep_plot``: ``--sweep VAR=...`` and its ``--plot`` (specops.api.sweep).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from specops.errors import InputError, unknown

if TYPE_CHECKING:
    from specops.planner.types import Plan, RecommendRequest


def gpu_names_for_help() -> str:
    """The catalog's GPU names for ``recommend --help`` (a cheap read: every command's help is built at start)."""
    from specops.planner.names import gpu_names_for_help as names

    return names()


def choices() -> dict[str, tuple[str, ...]]:
    """The flags with a fixed set of values (loads the planner's types)."""
    from specops.planner.types import METHODS, QUANTIZATIONS, TASKS

    return {"task": TASKS, "method": METHODS, "quantization": QUANTIZATIONS, "objective": ("latency", "throughput"),
            "engine": ("vllm", "sglang", "tensorrt-llm", "hf")}


def build_request(**values: Any) -> RecommendRequest:
    """A validated RecommendRequest; gpu and vllm_version fall back to SPECOPS_* / config.yaml.

    Names are checked before the planner loads: a mistyped --gpu or an unmodelled --method costs a
    read of gpus.yaml / the method table, not the import of the performance model."""
    from specops.planner.names import check_gpu_name
    from specops.settings import setting

    values = {k: v for k, v in values.items() if v is not None}
    if "qps" in values and "batch_size" in values:
        raise InputError("--qps and --batch-size both set the batch", "give one of them: --qps for a request rate, "
                         "--batch-size for a fixed concurrency")
    values["gpu"] = setting("gpu", values.get("gpu"))
    if not values.get("gpu"):
        raise InputError("no GPU given", "pass --gpu (e.g. --gpu H100) or set SPECOPS_GPU / `gpu:` in config.yaml")
    check_gpu_name(str(values["gpu"]))
    if "method" in values:
        refuse_unmodelled(str(values["method"]))
    if values.get("parallel_drafting"):  # P-EAGLE is eagle3 drafting in parallel
        pinned = str(values.get("method") or "eagle3").strip().lower()
        if pinned not in ("eagle3", "eagle3.1", "eagle-3", "eagle-3.1", "eagle31"):
            raise InputError(f"--parallel-drafting is P-EAGLE, an eagle3 option; --method {pinned} does not take it",
                             "drop --parallel-drafting or use --method eagle3")
        values["method"] = "eagle3"
    from pydantic import ValidationError

    from specops.capabilities import DEFAULT_VLLM_VERSION
    from specops.planner.types import RecommendRequest

    values["vllm_version"] = str(setting("vllm_version", values.get("vllm_version"), DEFAULT_VLLM_VERSION))
    for key, allowed in choices().items():
        if key in values:
            values[key] = str(values[key]).strip().lower()
            if values[key] not in allowed:
                raise unknown(key.replace("_", " "), values[key], allowed, fix=f"use --{key} " + "|".join(allowed))
    for key, value in values.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"--{key.replace('_', '-')} must be a finite number, got {value}", "give a number")
    try:
        request = RecommendRequest(**values)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err.get("loc") else "input"
        flag = "--" + key.replace("_", "-")
        msg = err.get("msg", "invalid value").removeprefix("Value error, ")
        got = values.get(key)
        raise InputError(f"{flag} {got}: {msg}", f"give {flag} a valid value (see `specops recommend --help`)") from None
    precheck(request)
    return request


def refuse_unmodelled(method: str) -> None:
    """--method naming a method vLLM serves but the planner does not model (dspark, step5_mtp, ...): refused
    with what is modelled, since a plan without a prediction is not a recommendation."""
    from specops.speculation import ALIASES, METHODS, PLANNED

    name = ALIASES.get(method.strip().lower(), method.strip().lower())
    info = METHODS.get(name)
    if info is None or info.modelled or info.family == "tooling":
        return
    raise InputError(f"--method {name} is served by vLLM but not modelled by specops (no published measurement "
                     "gives it an acceptance prior), so no speedup can be predicted",
                     f"pin a modelled method ({', '.join(PLANNED)}), or write a DeploymentSpec with "
                     f"speculative.method: {name} for `specops deploy` and measure it with `specops bench`")


def precheck(request: RecommendRequest) -> None:
    """The checks that need only the catalogs (released vLLM version, GPU and model names, --quantization against
    the checkpoint, tensor-parallel size), before the planner and what this installation learned are loaded:
    a mistyped name costs little."""
    from specops.capabilities import released_version
    from specops.planner.catalog import load_catalogs

    version = released_version(request.vllm_version)
    if request.parallel_drafting:
        from specops.capabilities import default_table, format_version
        from specops.errors import CapabilityError

        table = default_table()
        row = table.lookup("field", "parallel_drafting")
        if row is not None and not table.has("field", "parallel_drafting", version):
            raise CapabilityError(f"--parallel-drafting: speculative_config key parallel_drafting does not exist in "
                                  f"vLLM {format_version(version)} (it exists in {row.span()})",
                                  "use --vllm-version 0.16.0 or later, or drop --parallel-drafting")
    from specops.errors import CheckpointMissing

    cat = load_catalogs()
    cat.gpu(request.gpu)
    try:
        model = cat.model(request.model, params_b=request.params_b, quantization=request.quantization,
                          active_params_b=request.active_params_b)
    except CheckpointMissing:  # predicted at that precision, the launch withheld (planner.recommend.resolve)
        model = cat.model(request.model, params_b=request.params_b, active_params_b=request.active_params_b)
    from specops.planner.recommend import check_tensor_parallel

    check_tensor_parallel(model, request.gpus)


def recommend_with_defaults(request: RecommendRequest, calibration: str | None = None,
                            use_registry: bool = True) -> Plan:
    """recommend() with what this installation has learned.

    - Measured acceptance from the registry (stored by ``specops bench``/``validate``) becomes the
      prior for that draft × task (only when a registry already exists; nothing is created).
    - A calibration from ``specops tune``: the one named, else the newest whose model matches the
      request (and only on the hardware it was measured on, i.e. ``--gpu cpu`` for CPU runs).
    The plan's ``learned_from`` says which were used and how many samples stand behind them.
    """
    from specops.planner.priors import default_priors
    from specops.planner.recommend import recommend

    priors = default_priors()
    notes: list[str] = []
    if use_registry:
        measured = _registry_priors(notes)
        if measured:
            priors = priors.with_measured(*measured)
            notes.append(f"registry: {len(measured)} measured acceptance prior(s), "
                         f"{sum(m.samples for m in measured)} verify steps")
    profile = fitted = None
    cal = _calibration_for(request, calibration)
    if cal is not None:
        from specops.tune.calibration import FittedModel, to_planner

        profile, cal_measured = to_planner(cal, request.task)
        priors = priors.with_measured(*cal_measured)
        fitted = FittedModel(cal)
        notes.append(f"calibration {cal.ref}: {cal.samples} measured points on {cal.hardware} "
                     f"(vLLM {cal.engine_version}, workload {cal.workload}); its fitted model ranks "
                     f"{', '.join(sorted(fitted.drafts()))}")
    plan = recommend(request, priors=priors, calibration=profile, measured=fitted)
    plan.learned_from = notes
    return plan


def _registry_priors(notes: list[str]) -> list:
    from specops.settings import database_url

    url = database_url()
    if url.startswith("sqlite:///") and not _sqlite_has_acceptance(url[len("sqlite:///"):]):
        return []  # nothing to learn from: the registry (sqlmodel, ~0.5 s of imports) is not loaded
    from specops.checks.priors import measured_priors
    from specops.errors import SpecopsError
    from specops.registry import open_registry

    try:
        return measured_priors(open_registry(url), draft_key="source", notes=notes)
    except SpecopsError as exc:  # priors only add knowledge: an unreadable registry is a note, not a failure
        notes.append(f"registry: not used for priors ({exc.one_line()})")
        return []


def _sqlite_has_acceptance(path: str) -> bool:
    """Whether a SQLite registry holds a measurement with per-position acceptance (what becomes a prior),
    read with the standard library: False for a missing file or one without such rows; True when it
    cannot tell (the registry then reads it and reports what is wrong as a note)."""
    import sqlite3
    from pathlib import Path

    if not Path(path).is_file():
        return False
    try:
        con = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
        try:
            row = con.execute("SELECT 1 FROM measurement WHERE per_position IS NOT NULL AND per_position != 'null' "
                              "AND num_drafts > 0 LIMIT 1").fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return True
    return row is not None


def _calibration_for(request: RecommendRequest, name: str | None):
    if not name and str(request.gpu).lower() != "cpu":  # calibrations measured here are CPU runs
        return None
    from specops.tune.calibration import load_calibration, newest_calibration

    if name:
        return load_calibration(name)
    return newest_calibration(model=request.model)


def deployment_yaml(plan: Plan, name: str | None = None, *, edit=None, extra: list[str] | None = None) -> str:
    """The DeploymentSpec of ``plan`` as YAML (what ``recommend -o deployment`` prints); ``edit`` (spec -> spec) and
    ``extra`` comment lines are the capacity search's (specops.api.capacity)."""
    from specops.engines.spec import PIN, dump_spec, unpinned_hub_models
    from specops.planner.render import to_deployment

    spec = to_deployment(plan, name)
    if edit is not None:
        spec = edit(spec)
    unpinned = unpinned_hub_models(spec)  # not in the user's Hugging Face cache: the user pins them
    pin = ([f"pin: {' and '.join(f'{r}.revision' for r in unpinned)} {'is' if len(unpinned) == 1 else 'are'} {PIN} "
            "(not in this machine's Hugging Face cache): set each to its commit (`hf download MODEL` prints the "
            "snapshot path, whose last part is the commit); `specops gate` and `specops deploy` refuse the spec until "
            "then"] if unpinned else [])
    return decision_comments(plan, [*(extra or []), *pin]) + dump_spec(spec, unpinned)


def decision_comments(plan: Plan, extra: list[str] | None = None) -> str:
    """YAML comment lines above the spec: a one-line summary of the decision, why (the deciding rules: a
    veto names what it refused), every warning, and ``extra`` lines (the spec loads the same without them)."""
    p = plan.predicted
    what = "no speculation" if plan.method == "none" else f"{plan.method} γ={plan.num_speculative_tokens}"
    rng = f" (range {p.speedup_low:.2f}-{p.speedup_high:.2f}x)" if p.speedup_low is not None else ""
    lines = [f"specops recommend: {what}, KV {plan.kv_cache_dtype}, on {plan.gpus}x {plan.gpu}: predicted "
             f"{p.speedup:.2f}x{rng}, TPOT {p.tpot_ms:.1f} ms at batch {p.effective_batch}"]
    lines += [f"why: {s.outcome}" for s in plan.decision_path if s.rule in ("cost_model", "evidence")]
    lines += list(extra or [])
    lines += [f"warning: {w}" for w in plan.warnings]
    return "".join("# " + " ".join(line.split()) + "\n" for line in lines)


def sweep(values: dict[str, Any], spec: str, calibration: str | None = None):
    """One plan per value of ``spec`` (``batch=1,8,64``; :func:`specops.api.sweep.run_sweep`)."""
    from specops.api.sweep import run_sweep

    return run_sweep(values, spec, calibration=calibration)


def sweep_plot(result, html: bool) -> str:
    """The sweep's picture: an inline SVG, or a self-contained HTML page with the table."""
    from specops.api.sweep import sweep_html, sweep_svg

    return sweep_html(result) if html else sweep_svg(result) + "\n"
