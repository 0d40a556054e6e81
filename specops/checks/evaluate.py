"""Evaluate checklists: one function per check kind, results as pass / fail / error / skipped.

Fail closed: anything that stops a check from being evaluated (unreachable Prometheus, no samples,
a missing metric, no baseline, no registry record to judge) makes it ``error``, and any ``error``
makes the run exit 2. Nothing is ever passed by default.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

from specops.checks.sources import Sources, auth_headers, bench_events, http_complete
from specops.checks.thresholds import OPS, performance_floor, speedup_model, statistic
from specops.checks.types import Check, Checklist, CheckResult, Profile, ValidationReport
from specops.errors import CouldNotEvaluate, SpecopsError

Unevaluable = CouldNotEvaluate
"""A check could not be evaluated (becomes status ``error``)."""


class Outcome:
    """What a kind evaluator returns: observed value, pass/fail, words, evidence."""

    def __init__(self, observed, ok: bool, message: str, evidence: dict | None = None,
                 threshold: float | None = None, threshold_source: str | None = None, fix: str | None = None,
                 warn: bool = False):
        self.observed, self.ok, self.message = observed, ok, message
        self.warn = warn  # passed, with something to watch for (shown as warn, never as a failure)
        self.fix = fix  # a fix specific to this finding (default: the checklist's)
        self.evidence = evidence or {}
        self.threshold, self.threshold_source = threshold, threshold_source


def run_checklist(checklist: Checklist, profile_name: str, profile: Profile, sources: Sources) -> ValidationReport:
    started = datetime.now(timezone.utc)
    results = [evaluate(c, profile_name, profile, sources) for c in checklist.checks]
    report = ValidationReport(checklist=checklist.name, deployment=sources.deployment.get("name", "?"),
                              profile=profile_name, started_at=started, finished_at=datetime.now(timezone.utc),
                              results=results)
    report.data = plot_data(sources, profile)
    return report


def evaluate(check: Check, profile_name: str, profile: Profile, sources: Sources) -> CheckResult:
    base = dict(id=check.id, description=check.description, kind=check.kind, severity=check.severity,
                source=check.source, op=check.threshold.op if check.threshold else None)
    if check.id in profile.skip:
        return CheckResult(**base, status="skipped", message=f"skipped by profile {profile_name}: "
                           f"{profile.skip[check.id]}", fix="run with a profile that includes it")
    t0 = time.monotonic()
    try:
        out = KINDS[check.kind](check, profile, sources)
    except SpecopsError as exc:
        return CheckResult(**base, status="error", message=f"could not evaluate: {exc.message}", fix=exc.fix,
                           seconds=time.monotonic() - t0)
    except Exception as exc:  # noqa: BLE001 - fail closed on anything unexpected
        return CheckResult(**base, status="error", message=f"could not evaluate: {exc.__class__.__name__}: {exc}",
                           fix="re-run with SPECOPS_DEBUG=1 and report it", seconds=time.monotonic() - t0)
    return CheckResult(**base, status=("warn" if out.warn else "pass") if out.ok else "fail", message=out.message,
                       fix=None if out.ok else (out.fix or check.fix), observed=out.observed, threshold=out.threshold,
                       threshold_source=out.threshold_source, evidence=out.evidence, seconds=time.monotonic() - t0)


# --- thresholds -------------------------------------------------------------------------------------

def resolve(check: Check, profile: Profile, sources: Sources) -> tuple[float, str]:
    th = check.threshold
    assert th is not None
    if th.value is not None:
        return th.value, "checklist"
    if th.profile == "performance_floor":
        gamma = _gamma(sources)
        model, where = speedup_model(profile, sources.deployment, sources.registry)
        floor = performance_floor(model, gamma)
        return floor, f"performance floor at γ={gamma}: predicted speedup < 1 below this ({where})"
    return float(getattr(profile, th.profile)), f"profile {th.profile}"


def _compare(check: Check, observed: float, profile: Profile, sources: Sources, what: str,
             evidence: dict) -> Outcome:
    limit, where = resolve(check, profile, sources)
    op = check.threshold.op
    ok = OPS[op](observed, limit)
    msg = f"{what} = {observed:.3f} ({'meets' if ok else 'misses'} {op} {limit:.3f}, {where})"
    return Outcome(observed, ok, msg, evidence, limit, where)


def _gamma(sources: Sources) -> int:
    g = sources.deployment.get("num_speculative_tokens")
    if not g:
        raise Unevaluable("the deployment records no γ (num_speculative_tokens)",
                          "register the deployment with its speculative config")
    return int(g)


# --- metric -----------------------------------------------------------------------------------------

def _metric(check: Check, profile: Profile, sources: Sources) -> Outcome:
    ms = sources.metric_windows(profile.window_s, profile.windows)
    if check.measure == "spec_counters_present":
        present = any(m.speculation for m in ms)
        if not ms:
            raise Unevaluable(f"no metric samples in the last {profile.window_s:g}s",
                              "check that Prometheus scrapes the engine and traffic is flowing")
        return Outcome(present, present, "vllm:spec_decode_* counters are exported" if present else
                       "the engine exports no vllm:spec_decode_* counters", {"windows": len(ms)})
    spec = [m for m in ms if m.speculation and not m.empty_window and (m.num_drafts or 0) > 0]
    drafts = sum(m.num_drafts or 0 for m in spec)
    if len(spec) < profile.min_windows or drafts < profile.min_drafts:
        raise Unevaluable(f"too few samples: {len(spec)} non-empty windows of {len(ms)} and {drafts:.0f} drafts in "
                          f"the last {profile.window_s:g}s (profile needs {profile.min_windows} and "
                          f"{profile.min_drafts})", "send traffic to the deployment (or lengthen the window) and "
                          "check that Prometheus scrapes it")
    resets = [m for m in spec if m.counter_reset]
    reset_names = ", ".join(sorted({c for m in resets for c in m.reset_counters}))
    if resets and 2 * len(resets) >= len(spec):
        raise Unevaluable(f"the counters went back in {len(resets)} of the {len(spec)} windows ({reset_names}): the "
                          "engine restarts all the time, or what answers is not one engine's counters",
                          "check the engine's uptime and log (specops status, specops logs) and that a single "
                          "engine answers at this endpoint")
    values = [v for v in (_value(check.measure, m) for m in spec) if v is not None]
    if not values:
        raise Unevaluable(f"no window yields {check.measure}", "check that the engine exports per-position counters")
    observed = statistic(values, check.statistic)
    evidence = {"windows": len(spec), "drafts": drafts, "values": [round(v, 4) for v in values],
                "statistic": check.statistic, "gamma": spec[-1].num_speculative_tokens,
                "counter_resets": len(resets)}
    out = _compare(check, observed, profile, sources, f"{check.statistic} {check.measure}", evidence)
    if resets:
        out.message += (f"; the counters went back in {len(resets)} of {len(spec)} windows ({reset_names}: "
                        "an engine restart; post-restart values used)")
    return out


def _value(measure: str, m) -> float | None:
    if measure == "per_token_alpha":
        return m.per_token_alpha
    if measure == "position0_acceptance":
        return m.per_position_rate[0] if m.per_position_rate else None
    return getattr(m, measure)


# --- benchmark (stored `specops bench` results) --------------------------------------------------------

def _benches(sources: Sources) -> list[dict]:
    if sources.bench_events is None:
        reg = sources.need_registry()
        sources.bench_events = bench_events(reg, sources.deployment["name"])
    return sources.bench_events


def _benchmark(check: Check, profile: Profile, sources: Sources) -> Outcome:
    events = _benches(sources)
    name = sources.deployment["name"]
    if check.measure == "long_output_tested":
        longs = [e for e in events if (e.get("data") or {}).get("workload") == "long-output"]
        ok = bool(longs)
        return Outcome(ok, ok, f"a long-output (> {profile.long_output_tokens} tokens) benchmark is recorded"
                       if ok else "no long-output benchmark recorded", {"benchmarks": len(events)})
    if not events:
        raise Unevaluable(f"no benchmark recorded for {name}",
                          f"run `specops bench --deployment {name} --baseline-endpoint URL --workload code`")
    latest = events[0]
    data = latest.get("data") or {}
    if check.measure == "crosscheck_ok":
        ok = bool(data.get("crosscheck_ok"))
        return Outcome(ok, ok, "engine counters agreed with the client's token counts" if ok else
                       "engine counters disagreed with the client's token counts", {"event": latest.get("id")})
    speedups = [(c["concurrency"], c["tpot_speedup"]) for c in data.get("comparisons") or []
                if c.get("tpot_speedup") is not None]
    if not speedups:
        raise Unevaluable(f"the latest benchmark of {name} has no baseline comparison",
                          f"re-run `specops bench --deployment {name}` with --baseline-endpoint")
    unsure = [c["concurrency"] for c in data.get("comparisons") or []
              if c.get("speedup_verdict") == "too few requests to tell"]
    if unsure:  # fail closed: a speedup whose interval spans 1 is no evidence either way
        raise Unevaluable(f"the latest benchmark of {name} had too few requests to tell speculation on from off at "
                          f"concurrency {', '.join(map(str, unsure))} (its 95% interval spans 1x)",
                          f"re-run `specops bench --deployment {name}` with more --requests")
    observed = statistic([s for _, s in speedups], check.statistic)
    return _compare(check, observed, profile, sources, f"{check.statistic} TPOT speedup over concurrency "
                    + ",".join(str(c) for c, _ in speedups), {"by_concurrency": dict(speedups)})


# --- lineage ------------------------------------------------------------------------------------------

def _lineage(check: Check, profile: Profile, sources: Sources) -> Outcome:
    d = sources.deployment
    method = (d.get("method") or "none").lower()
    from specops.speculation import needs_draft

    if not needs_draft(method):
        return Outcome(True, True, f"method {method} uses no separate draft weights: nothing to keep in sync",
                       {"method": method})
    if not d.get("target_ref") or not d.get("draft_ref"):
        raise Unevaluable(f"deployment {d.get('name')} records no target/draft references",
                          "register both models (`specops lineage register-target/-draft`) and redeploy")
    report = sources.need_registry().check_lineage(d["target_ref"], d["draft_ref"],
                                                   vllm_version=d.get("vllm_version") or "0.33.0", method=method)
    errors = [f for f in report.findings if f.severity == "error"]
    msg = (f"{report.draft} belongs to {report.target}" if not errors else
           "; ".join(f"{f.code}: {f.message}" for f in errors))
    return Outcome(not errors, not errors, msg, {"findings": [f.model_dump(mode="json") for f in report.findings]})


# --- config -------------------------------------------------------------------------------------------

def _config(check: Check, profile: Profile, sources: Sources) -> Outcome:
    d = sources.deployment
    sc = d.get("speculative_config") or {}
    if check.measure == "fallback_in_place":
        schedule = sc.get("num_speculative_tokens_per_batch_size") or []
        off = [r for r in schedule if len(r) == 3 and r[2] == 0]
        baseline = sources.baseline_endpoint
        ok = bool(off) or bool(baseline)
        how = (f"speculation off at batch {off[0][0]}-{off[0][1]} (per-batch γ schedule)" if off else
               f"baseline endpoint {baseline} recorded" if baseline else
               "no fallback: no per-batch schedule with K=0 and no baseline endpoint")
        return Outcome(ok, ok, how, {"schedule": schedule, "baseline_endpoint": baseline})
    if check.measure == "gamma_within_profile":
        gamma = _gamma(sources)
        ok = gamma <= profile.gamma_max
        return Outcome(ok, ok, f"γ={gamma} (profile allows up to {profile.gamma_max})", {"gamma": gamma})
    if check.measure == "no_known_bugs":
        return _known_bugs(sources)
    argv = d.get("argv_redacted")
    if argv is None:
        raise Unevaluable("the deployment records no launch argv", "deploy it with `specops deploy` or record argv")
    ok = "--disable-log-stats" not in argv
    return Outcome(ok, ok, "metrics enabled" if ok else "launched with --disable-log-stats: no metrics", {})


def _known_bugs(sources: Sources) -> Outcome:
    """The known-bug rows against the deployment as recorded (argv, engine_config, speculative config)."""
    from specops.engines.bugs import recorded_findings

    d = sources.deployment
    source = model_type = None
    if d.get("target_ref") and sources.registry is not None:
        try:
            t = sources.registry.get_target(d["target_ref"])
            source, model_type = t.source, t.model_type
        except SpecopsError:
            pass
    status, message, fix, evidence = recorded_findings(d, target_source=source, target_model_type=model_type)
    if status == "error":
        raise Unevaluable(message.removeprefix("could not evaluate: "), fix or "")
    ok = status in ("pass", "warn")
    return Outcome(ok, ok, message, evidence, fix=fix, warn=status == "warn")


# --- output equality ------------------------------------------------------------------------------------

def _equality(check: Check, profile: Profile, sources: Sources) -> Outcome:
    from specops.benchmark.workloads import builtin

    d = sources.deployment
    if not d.get("endpoint"):
        raise Unevaluable(f"deployment {d.get('name')} has no endpoint", "register its endpoint")
    if not sources.baseline_endpoint:
        raise Unevaluable("no baseline (speculation off) endpoint to compare with",
                          "pass --baseline-endpoint URL (the same target served without speculation)")
    if sources.complete is None:
        raise Unevaluable("no completion client", "run with a reachable endpoint")
    from specops.checks.probes import http_tokenizer, lossless_prompts, server_max_model_len

    short = [p.prompt for p in builtin("code", count=profile.equality_prompts, seed=7).prompts]
    headers = auth_headers(d)
    max_len = (d.get("engine_config") or {}).get("max_model_len")
    tokenize = None
    if sources.complete is http_complete:  # a real server: ask it for its context length and token counts
        max_len = max_len or server_max_model_len(d["endpoint"], headers)
        tokenize = http_tokenizer(d["endpoint"], d.get("served_model_name"), headers)
    named = lossless_prompts(short, max_len, profile.equality_max_tokens, tokenize)
    prompts = [p for _, p in named]
    spec = sources.complete(d["endpoint"], d.get("served_model_name"), prompts, profile.equality_max_tokens, headers)
    base = sources.complete(sources.baseline_endpoint, None, prompts, profile.equality_max_tokens, headers)
    out = compare_outputs(spec, base, [n for n, _ in named])
    out.evidence["probes"] = [n for n, _ in named]
    if not max_len:
        out.message += "; no long-context needle (the engine's max_model_len is unknown)"
    return out


def compare_outputs(spec: list[dict], base: list[dict], names: list[str] | None = None) -> Outcome:
    diffs = []
    by_tokens = all(s.get("tokens") and b.get("tokens") for s, b in zip(spec, base, strict=False))
    for i, (s, b) in enumerate(zip(spec, base, strict=False)):
        a, c = (s["tokens"], b["tokens"]) if by_tokens else (s["text"], b["text"])
        if a != c:
            pos = next((j for j, (x, y) in enumerate(zip(a, c, strict=False)) if x != y), min(len(a), len(c)))
            diffs.append({"prompt": i, "first_difference_at": pos,
                          **({"probe": names[i]} if names and i < len(names) else {})})
    unit = "token ids" if by_tokens else "text"
    ok = not diffs and len(spec) == len(base)
    msg = (f"greedy outputs identical ({unit}) on {len(spec)} prompts with speculation on vs off" if ok else
           f"{len(diffs)} of {len(spec)} prompts differ ({unit}); first at prompt {diffs[0]['prompt']} "
           f"({diffs[0].get('probe', '?')}), "
           f"position {diffs[0]['first_difference_at']}" if diffs else "different numbers of answers")
    return Outcome(ok, ok, msg, {"compared": unit, "prompts": len(spec), "differences": diffs})


# --- record ---------------------------------------------------------------------------------------------

def _record(check: Check, profile: Profile, sources: Sources) -> Outcome:
    reg = sources.need_registry()
    d = sources.deployment
    name = d["name"]
    m = check.measure
    if m == "baseline_recorded":
        with_base = [e for e in _benches(sources) if (e.get("data") or {}).get("comparisons")]
        ok = bool(with_base)
        return Outcome(ok, ok, f"{len(with_base)} benchmark(s) with a no-speculation baseline recorded", {})
    if m in ("recent_acceptance_review", "validation_passed_recently"):
        runs = [r for r in reg.validation_runs(name, limit=50) if r.checklist in ("deploy", "ops")]
        cutoff = sources.now.replace(tzinfo=None) - timedelta(days=profile.review_max_age_days)
        recent = [r for r in runs if r.finished_at >= cutoff]
        if m == "validation_passed_recently":
            recent = [r for r in recent if r.passed]
        ok = bool(recent)
        return Outcome(ok, ok, f"{len(recent)} {'passing ' if m.endswith('recently') else ''}review(s) in the last "
                       f"{profile.review_max_age_days:g} days", {"latest": recent[0].finished_at.isoformat()
                                                               if recent else None})
    if m == "offline_acceptance_recorded":
        rows = [r for r in reg.measurements(name, limit=200) if r.source == "bench"]
        ok = bool(rows)
        return Outcome(ok, ok, f"{len(rows)} benchmark acceptance measurement(s) recorded", {})
    if not d.get("draft_ref"):
        return Outcome(True, True, f"method {d.get('method')} has no trained draft", {})
    draft = reg.get_draft(d["draft_ref"])
    if m == "training_data_recorded":
        ok = bool(draft.trained_on)
        return Outcome(ok, ok, f"trained on: {draft.trained_on}" if ok else f"{draft.ref} records no training data",
                       {"draft": draft.ref})
    ok = bool(draft.trainer_cmd) or bool(reg.retrain_jobs(name, limit=1))
    return Outcome(ok, ok, f"{draft.ref} can be retrained (trainer command recorded)" if ok else
                   f"{draft.ref} records no trainer command and no retraining job exists", {"draft": draft.ref})


KINDS = {"metric": _metric, "benchmark": _benchmark, "lineage": _lineage, "config": _config,
         "output_equality": _equality, "record": _record}


# --- data for plots --------------------------------------------------------------------------------------

def plot_data(sources: Sources, profile: Profile) -> dict:
    """Series behind the report's plots (what is available; missing parts stay empty)."""
    data: dict = {"per_position": [], "over_time": [], "tpot_by_concurrency": []}
    ms = sources._cache.get(("windows", profile.window_s, profile.windows)) or []
    spec = [m for m in ms if m.speculation and (m.num_drafts or 0) > 0]
    if spec and spec[-1].accepted_per_position:
        from specops.speculation import Acceptance

        pooled = Acceptance.pooled(Acceptance(m.num_drafts or 0, m.num_draft_tokens or 0, m.num_accepted_tokens or 0,
                                              tuple(m.accepted_per_position)) for m in spec)
        data["per_position"] = pooled.per_position or []
    data["over_time"] = [{"t": m.window_end.isoformat(), "alpha": m.per_token_alpha,
                          "rate": m.acceptance_rate} for m in spec]
    if sources.bench_events:
        cmps = (sources.bench_events[0].get("data") or {}).get("comparisons") or []
        data["tpot_by_concurrency"] = [{"concurrency": c["concurrency"], "spec": c.get("spec_tpot_p50_s"),
                                        "baseline": c.get("baseline_tpot_p50_s")} for c in cmps]
    return data
