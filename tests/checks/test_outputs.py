"""JUnit XML, the HTML report (and its screenshot in headless chromium), and recorded validation runs."""

from __future__ import annotations

import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib

import pytest

from specops.checks.evaluate import run_checklist
from specops.checks.junit import junit_xml
from specops.checks.playbook import get_profile, load_checklist
from specops.checks.report import render_html, report_from_registry
from specops.checks.run import floors, record_run
from specops.checks.sources import Sources, deployment_facts
from tests.checks.helpers import matched_windows, stale_windows

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


def _png_pixels(path) -> tuple[int, int, set]:
    """Decode an 8-bit RGB/RGBA PNG (no PIL): width, height and the distinct pixel values of a sample."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w, h, bpp = 8, b"", 0, 0, 3
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", chunk[:10])
            bpp = {2: 3, 6: 4}[ctype]
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    seen, i = set(), 0
    for _row in range(h):
        ftype, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            if ftype == 1:
                line[x] = (line[x] + a) & 255
            elif ftype == 2:
                line[x] = (line[x] + b) & 255
            elif ftype == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        prev = line
        seen.update(bytes(line[x:x + 3]) for x in range(0, stride, bpp * 7))
    return w, h, seen


@pytest.mark.slow
def test_html_report_renders_its_plots_in_headless_chromium(registry, tmp_path):
    browser = shutil.which("chromium")
    assert browser, "install Debian's chromium: apt-get install -y --no-install-recommends chromium"
    page = tmp_path / "report.html"
    page.write_text(_report_html(registry))
    png = tmp_path / "shot.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--no-first-run",
                    f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={png}", "--window-size=1200,1600",
                    f"file://{page}"], check=True, capture_output=True, timeout=120)
    w, h, colors = _png_pixels(png)
    assert (w, h) == (1200, 1600)
    # the plots' blue/orange/green series and red floor lines, not a blank page
    assert len(colors) > 20
    assert any(r < 80 and g < 120 and b > 200 for r, g, b in colors)  # blue bars (#2563eb)
