"""Run a checklist against one deployment and record it as a validation run (``validate``); the
acceptance lines of its report (``floors``). ``specops validate`` and heal's train stage call it."""

from __future__ import annotations

from specops.checks.evaluate import run_checklist
from specops.checks.playbook import get_profile, load_checklist
from specops.checks.sources import Sources, default_sources
from specops.checks.thresholds import performance_floor, speedup_model
from specops.checks.types import Profile, ValidationReport


def validate(checklist: str, deployment: str, *, profile: str = "gpu-default", prometheus_url: str | None = None,
             baseline_endpoint: str | None = None, sources: Sources | None = None, record: bool = True,
             registry=None, window_s: float | None = None, progress=None) -> ValidationReport:
    """Run one checklist against one registered deployment and record it as a validation run.
    ``window_s``: read this many seconds of metrics instead of the profile's ``window_s`` (see
    :func:`with_window`); ``progress`` hears about long waits (a live /metrics sample)."""
    cl = load_checklist(checklist)
    prof = with_window(get_profile(profile), window_s)
    src = sources or default_sources(deployment, prometheus_url=prometheus_url, baseline_endpoint=baseline_endpoint,
                                     registry=registry, progress=progress)
    report = run_checklist(cl, profile, prof, src)
    if record and src.registry is not None:
        report.recorded_run_id = record_run(src.registry, report, floors(prof, src)).id
    return report


MIN_WINDOW_S = 5.0
"""Shortest metrics window ``--window`` accepts: shorter sub-windows hold too few drafts to judge."""


def with_window(profile: Profile, window_s: float | None) -> Profile:
    """``profile`` reading ``window_s`` seconds of metrics instead of its own window (None: unchanged).
    Bounded: at least MIN_WINDOW_S and at most the profile's window (a shorter sample for a quick look,
    never a longer one than the thresholds were set for); the sub-window count is kept when each
    sub-window stays >= 1 s, else reduced (never below the profile's min_windows: then refused)."""
    import math

    from specops.errors import InputError

    if window_s is None:
        return profile
    if not math.isfinite(window_s) or window_s < MIN_WINDOW_S or window_s > profile.window_s:
        raise InputError(f"--window {window_s:g}s is outside {MIN_WINDOW_S:g}s..{profile.window_s:g}s (the profile's "
                         "window)", f"give --window between {MIN_WINDOW_S:g}s and {profile.window_s:g}s, e.g. 30s")
    count = min(profile.windows, int(window_s))
    if count < profile.min_windows:
        raise InputError(f"--window {window_s:g}s leaves {count} one-second sub-windows, fewer than the profile's "
                         f"min_windows ({profile.min_windows})",
                         f"give --window of at least {max(MIN_WINDOW_S, profile.min_windows):g}s")
    return profile.model_copy(update={"window_s": float(window_s), "windows": count})


def floors(profile: Profile, sources: Sources) -> dict[str, float | None]:
    """The acceptance lines drawn on the report's plots."""
    out: dict[str, float | None] = {"P50 floor": profile.acceptance_p50_min, "P5 floor": profile.acceptance_p5_min}
    gamma = sources.deployment.get("num_speculative_tokens")
    if gamma:
        out["speedup<1 below"] = performance_floor(speedup_model(profile, sources.deployment, sources.registry)[0], int(gamma))
    return out


def record_run(reg, report: ValidationReport, floor_lines: dict | None = None):
    summary = {"profile": report.profile, "exit_code": report.exit_code, "counts": report.counts(),
               "results": [r.model_dump(mode="json") for r in report.results], "data": report.data,
               "floors": floor_lines or {}}
    return reg.record_validation_run(report.deployment, checklist=report.checklist, passed=report.passed,
                                     findings=[r.to_finding() for r in report.results], summary=summary,
                                     started_at=report.started_at, finished_at=report.finished_at)
