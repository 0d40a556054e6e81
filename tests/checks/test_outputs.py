"""JUnit XML, the HTML report (and its screenshot in headless chromium), and recorded validation runs."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from specops.checks.evaluate import run_checklist
from specops.checks.junit import junit_xml
from specops.checks.playbook import get_profile, load_checklist
from specops.checks.report import render_html, report_from_registry
from specops.checks.run import floors, record_run
from specops.checks.sources import Sources, deployment_facts
from tests.checks.helpers import matched_windows, stale_windows
from tests.helpers.browser import png_pixels, screenshot

BENCH = {"workload": "code", "crosscheck_ok": True,
         "comparisons": [{"concurrency": c, "tpot_speedup": b / s, "spec_tpot_p50_s": s, "baseline_tpot_p50_s": b}
                         for c, s, b in ((1, 0.008, 0.011), (4, 0.014, 0.015), (16, 0.030, 0.024))]}


def _run(reg, name, windows, baseline=None):
    prof = get_profile("cpu-tiny")
    reg.record_event("bench", name, "bench code", data=BENCH)
    src = Sources(deployment=deployment_facts(reg.get_deployment(name)), windows=lambda w, n: windows(n),
                  registry=reg, baseline_endpoint=baseline,
                  complete=lambda e, m, ps, k, h: [{"text": p, "tokens": None} for p in ps])
    rep = run_checklist(load_checklist("deploy"), "cpu-tiny", prof, src)
    record_run(reg, rep, floors(prof, src))
    return rep


def test_junit_has_one_testcase_per_check_with_failures_and_errors(registry):
    rep = _run(registry, "tiny-stale", stale_windows)
    root = ET.fromstring(junit_xml([rep]))
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == len(rep.results)
    failed = {c.get("name") for c in cases if c.find("failure") is not None}
    errored = {c.get("name") for c in cases if c.find("error") is not None}
    assert {"deploy.acceptance-p50", "deploy.lineage"} <= failed
    assert errored == {"deploy.lossless"}  # no baseline endpoint
    assert int(suite.get("failures")) == len(failed) and int(suite.get("errors")) == 1
    assert {c.get("name") for c in cases if c.find("skipped") is not None} == {"deploy.long-outputs",
                                                                               "deploy.tpot-speedup"}


def test_validation_run_is_recorded_with_its_plot_series(registry):
    rep = _run(registry, "tiny-matched", matched_windows, baseline="http://base:1")
    runs = registry.validation_runs("tiny-matched")
    assert len(runs) == 1 and runs[0].checklist == "deploy" and runs[0].passed == (rep.exit_code == 0)
    assert {f["code"] for f in runs[0].findings} == {r.id for r in rep.results}
    assert runs[0].summary["data"]["per_position"] and runs[0].summary["floors"]["P50 floor"] == 0.40


def _report_html(registry) -> str:
    _run(registry, "tiny-matched", matched_windows, baseline="http://base:1")
    return render_html(**report_from_registry(registry, "tiny-matched"))


def test_html_report_is_self_contained_with_three_plots_and_the_results(registry):
    html = _report_html(registry)
    assert html.count("<svg") == 3 and "<script" not in html and "http://" not in html.split("<body>")[0]
    assert "<link" not in html and "src=" not in html
    for title in ("Acceptance per draft position", "Acceptance over time", "TPOT with vs without speculation"):
        assert title in html
    assert "deploy.acceptance-p50" in html and "polyline" in html and html.count("<rect") > 10




@pytest.mark.slow
def test_html_report_renders_its_plots_in_headless_chromium(registry, tmp_path):
    page = tmp_path / "report.html"
    page.write_text(_report_html(registry))
    png = screenshot(page, tmp_path, 1200, 1600)
    w, h, colors = png_pixels(png)
    assert (w, h) == (1200, 1600)
    # the plots' blue/orange/green series and red floor lines, not a blank page
    assert len(colors) > 20
    assert any(r < 80 and g < 120 and b > 200 for r, g, b in colors)  # blue bars (#2563eb)
