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
             registry=None) -> ValidationReport:
    """Run one checklist against one registered deployment and record it as a validation run."""
    cl = load_checklist(checklist)
    prof = get_profile(profile)
    src = sources or default_sources(deployment, prometheus_url=prometheus_url, baseline_endpoint=baseline_endpoint,
                                     registry=registry)
    report = run_checklist(cl, profile, prof, src)
    if record and src.registry is not None:
        report.recorded_run_id = record_run(src.registry, report, floors(prof, src)).id
    return report


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
