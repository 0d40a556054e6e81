"""The `specops tune` HTML report, rendered from real tune runs (real registry in SPECOPS_HOME) whose
deployer and measurer are the fakes of tests/tune/fakes.py (no engine can start per unit test): the
measurer's noise makes predictions differ from measurements. The page is parsed as XML to check
the plots' geometry against the report's numbers."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specops.api.tune import TuneOptions, tune
from specops.checks.svg import nice_ticks
from specops.errors import EngineError, InputError
from specops.tune.html import render_tune_html, write_tune_html
from tests.tune.fakes import FakeDeployer, FakeMeasurer

SVG = "{http://www.w3.org/2000/svg}"
AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def run(deployer=None, **kw):
    base = dict(model="/models/tiny", draft="/d", methods=["ngram", "draft_model"], gammas=[1, 2, 3],
                concurrency=[1, 4], passes=2, name="html-cal")
    return tune(TuneOptions(**base | kw), deployer=deployer or FakeDeployer(), measurer=FakeMeasurer(noise=0.1))


def parse(html: str) -> ET.Element:
    assert html.startswith("<!DOCTYPE html>")
    return ET.fromstring(html.removeprefix("<!DOCTYPE html>"))  # raises on anything not well formed


def svgs(root: ET.Element) -> list[ET.Element]:
    return list(root.iter(f"{SVG}svg"))


def dots(svg: ET.Element) -> dict[str, tuple[float, float, ET.Element]]:
    """Plot dots by tooltip: (cx, cy, group)."""
    out = {}
    for g in svg.iter(f"{SVG}g"):
        if g.get("class") == "pt":
            c = g.find(f"{SVG}circle")
            out[g.find(f"{SVG}title").text] = (float(c.get("cx")), float(c.get("cy")), g)
    return out


def dot_of(plot: dict, key: str, c: int) -> tuple[float, float, ET.Element]:
    (hit,) = [v for t, v in plot.items() if t.startswith(f"{key} @ c={c}:")]
    return hit


def test_the_page_is_well_formed_self_contained_and_has_one_svg_per_plot():
    result = run()
    html = render_tune_html(result.report, result.calibration, generated_at=AT)
    root = parse(html)
    # A (predicted vs measured) + B (one per concurrency: 1 and 4) + C (acceptance per position)
    assert len(svgs(root)) == 1 + 2 + 1
    assert "<script" not in html and "src=" not in html and "href=" not in html and "@import" not in html
    assert set(re.findall(r"https?://[^\"' ]+", html)) == {"http://www.w3.org/2000/svg"}
    text = "".join(root.itertext())
    for fact in (result.run_id, result.calibration.ref, "/models/tiny", result.calibration.engine_version,
                 "14 measured, 0 failed", f"{result.report.median_leave_out_error_pct:.1f}%",
                 "2026-01-02T03:04:05+00:00"):
        assert fact in text


def test_the_scatter_has_one_dot_per_measured_row_placed_by_its_values():
    result = run()
    rows = [r for r in result.report.rows if r.status == "ok"]
    assert any(abs(r.error_pct) > 1 for r in rows)  # the noise makes the plot worth checking
    plot_a = svgs(parse(render_tune_html(result.report, result.calibration)))[0]
    plot = dots(plot_a)
    assert len(plot) == len(rows) == 14
    placed = [(r, *dot_of(plot, r.config.key, r.concurrency)[:2]) for r in rows]
    by_measured = sorted(placed, key=lambda p: p[0].tokens_per_s.median)
    assert [p[1] for p in by_measured] == sorted(p[1] for p in placed)  # x grows with the measured median
    by_predicted = sorted(placed, key=lambda p: p[0].predicted_tokens_per_s)
    assert [p[2] for p in by_predicted] == sorted((p[2] for p in placed), reverse=True)  # SVG y grows down
    top = max(rows, key=lambda r: r.tokens_per_s.median)
    assert dot_of(plot, top.config.key, top.concurrency)[0] == max(p[1] for p in placed)
    # the y = x line splits over- from under-predicted points
    (diag,) = [ln for ln in plot_a.iter(f"{SVG}line") if ln.findtext(f"{SVG}title") == "y = x"]
    x1, y1, x2, y2 = (float(diag.get(a)) for a in ("x1", "y1", "x2", "y2"))
    for r, cx, cy in placed:
        on_line = y1 + (y2 - y1) * (cx - x1) / (x2 - x1)
        if abs(r.error_pct) > 0.5:
            assert (cy < on_line) == (r.predicted_tokens_per_s > r.tokens_per_s.median), r.config.key


def test_each_dot_carries_its_numbers_and_a_whisker_spanning_its_spread():
    result = run()
    plot = dots(svgs(parse(render_tune_html(result.report, result.calibration)))[0])
    row = max((r for r in result.report.rows if r.status == "ok"),
              key=lambda r: r.tokens_per_s.high - r.tokens_per_s.low)
    cx, cy, g = dot_of(plot, row.config.key, row.concurrency)
    tip = g.findtext(f"{SVG}title")
    f = row.tokens_per_s
    assert f"measured {f.median:.4g} [{f.low:.4g}–{f.high:.4g}]" in tip
    assert f"predicted {row.predicted_tokens_per_s:.4g}" in tip and f"error {row.error_pct:+.1f}%" in tip
    whisker = g.find(f"{SVG}line")  # horizontal: from low to high, at the dot's height
    x1, x2 = float(whisker.get("x1")), float(whisker.get("x2"))
    assert x1 < cx < x2 and float(whisker.get("y1")) == float(whisker.get("y2")) == cy


class FailOne(FakeDeployer):
    """Starts every configuration except draft_model-g3, whose error text carries markup."""

    def start(self, config):
        if config.key == "draft_model-g3":
            raise EngineError("draft <b>folder</b> & tokenizer mismatch", "rebuild the draft")
        return super().start(config)


def test_failed_rows_show_their_escaped_error_in_the_table_and_get_no_dot():
    result = run(deployer=FailOne(), draft="/drafts/<v1&v2>")
    assert result.report.failed == 2 and result.report.measured == 12
    html = render_tune_html(result.report, result.calibration)
    root = parse(html)
    assert "<b>folder</b>" not in html and "draft &lt;b&gt;folder&lt;/b&gt; &amp; tokenizer" in html
    failed = [tr for tr in root.iter("tr") if tr.get("class") == "failed"]
    assert len(failed) == 2
    for tr in failed:
        cells = ["".join(td.itertext()) for td in tr.iter("td")]
        assert cells[0] == "draft_model-g3" and cells[2].startswith("failed: engine failed to start")
        assert "draft <b>folder</b> & tokenizer mismatch" in cells[2]
    plot_a, plot_b1, _, plot_c = svgs(root)
    assert not [t for t in dots(plot_a) if t.startswith("draft_model-g3")] and len(dots(plot_a)) == 12
    assert not [t for t in dots(plot_b1) if t.startswith("draft_model-g3")]
    # the fitted line still predicts the failed γ from the acceptance measured at γ 1 and 2
    fitted = [c.findtext(f"{SVG}title") for c in plot_b1.iter(f"{SVG}circle") if c.get("class") == "pred"]
    assert any(t.startswith("draft_model-g3 @ c=1: fitted ") for t in fitted)
    assert "draft_model (<v1&v2>)" in "".join(plot_c.itertext())  # the draft's name, escaped then parsed back


def test_the_picks_section_names_each_pick_the_verdicts_and_what_recommend_picks():
    result = run()
    rep = result.report
    ngram3_c4 = next(r for r in rep.rows if r.config.key == "ngram-g3" and r.concurrency == 4)
    picks = [{"concurrency": 1, "method": "draft_model", "gamma": 2, "tokens_per_s_measured": 50.0},
             {"concurrency": 4, "method": "ngram", "gamma": 3, "tokens_per_s_measured": None}]
    root = parse(render_tune_html(rep, result.calibration, recommend_picks=picks))
    (table,) = [t for t in root.iter("table") if "fitted model's pick" in "".join(t.itertext())]
    body = {int(tr[0].text): ["".join(td.itertext()) for td in tr] for tr in table if tr.find("td") is not None}
    assert sorted(body) == [1, 4]
    for b, (_, model, best, _recommend, verdict) in body.items():
        m = next(p for p in rep.model_picks if p.concurrency == b)
        bm = next(p for p in rep.best_measured if p.concurrency == b)
        assert model.startswith(f"{m.config.key}: predicted {m.tokens_per_s:.4g} tok/s")
        assert best.startswith(f"{bm.config.key}: {bm.tokens_per_s:.4g}")
        assert verdict == next(v for v in rep.pick_within if v.startswith(f"c={b}:"))
    best1 = next(p for p in rep.best_measured if p.concurrency == 1).tokens_per_s
    assert body[1][3] == f"draft_model-g2: measured 50 tok/s ({50.0 / best1:.0%} of the best)"
    assert body[4][3].startswith(f"ngram-g3: measured {ngram3_c4.tokens_per_s.median:.4g} tok/s")  # looked up
    without = parse(render_tune_html(rep, result.calibration))
    assert "specops recommend" not in "".join(without.itertext())


def test_a_single_concurrency_and_a_method_with_one_gamma_render():
    result = run(methods=["ngram"], gammas=[2], concurrency=[1])
    root = parse(render_tune_html(result.report, result.calibration))
    plot_a, plot_b, plot_c = svgs(root)
    assert len(dots(plot_a)) == 2  # none and ngram-g2
    (measured,) = dots(plot_b)
    assert measured.startswith("ngram-g2 @ c=1:")
    fitted = [c for c in plot_b.iter(f"{SVG}circle") if c.get("class") == "pred"]
    assert len(fitted) == 1 and not list(plot_b.iter(f"{SVG}polyline"))  # a lone γ: a marker, no line
    baseline = [ln.findtext(f"{SVG}title") for ln in plot_b.iter(f"{SVG}line") if ln.get("class") == "ref"]
    none = next(r for r in result.report.rows if r.config.key == "none")
    assert baseline == [f"none (measured): {none.tokens_per_s.median:.4g}"]
    assert len(dots(plot_c)) == 2  # ngram γ=2: positions 1 and 2


def test_missing_values_render_as_dashes_and_unmeasured_points_are_predicted_only():
    result = run(methods=["ngram"], gammas=[1, 2], concurrency=[1, 4])
    rep = result.report
    rows = [r.model_copy(update={"leave_out_error_pct": None}) for r in rep.rows if r.concurrency == 1 or
            r.config.method == "none"]  # at c=4 only the baseline was kept
    rep = rep.model_copy(update={"rows": rows, "median_leave_out_error_pct": None, "pick_within": []})
    html = render_tune_html(rep, result.calibration)
    root = parse(html)
    assert "None" not in html
    table = next(t for t in root.iter("table") if "left-out error" in "".join(t.itertext()))
    assert all(tr[-1].text == "–" for tr in table if tr.find("td") is not None)
    _, _, plot_b4, _ = svgs(root)
    assert not dots(plot_b4)
    fitted = [c.findtext(f"{SVG}title") for c in plot_b4.iter(f"{SVG}circle") if c.get("class") == "pred"]
    assert [t.split(":")[0] for t in fitted] == ["ngram-g1 @ c=4", "ngram-g2 @ c=4"]


def test_when_every_speculative_configuration_failed_the_gamma_and_acceptance_plots_say_why():
    result = run(methods=["draft_model"], gammas=[1, 2], draft="/nonexistent/draft")
    assert result.report.measured == 2 and result.report.failed == 4
    root = parse(render_tune_html(result.report, result.calibration))
    plot_a, plot_b1, plot_b4, plot_c = svgs(root)
    assert len(dots(plot_a)) == 2
    assert "no speculative configuration measured at concurrency 1" in "".join(plot_b1.itertext())
    assert "no speculative configuration measured at concurrency 4" in "".join(plot_b4.itertext())
    assert "no drafter measured" in "".join(plot_c.itertext())


def test_writing_to_an_unwritable_path_is_an_input_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="--html .*which is not a folder") as exc:
        write_tune_html("<html/>", tmp_path / "file" / "tune.html")
    assert "--html" in exc.value.fix
    assert write_tune_html("<html/>", tmp_path / "out" / "tune.html").read_text() == "<html/>"


@settings(deadline=None)  # a loaded 2-core box is no reason to fail a property
@given(st.floats(0, 1e5), st.floats(1e-3, 1e5))
def test_nice_ticks_cover_the_range_evenly(lo, span):
    ticks = nice_ticks(lo, lo + span)
    assert 2 <= len(ticks) <= 6
    assert lo - 1e-6 * span <= ticks[0] and ticks[-1] <= lo + span + 1e-6 * span
    steps = {round(b - a, 6) for a, b in zip(ticks, ticks[1:], strict=False)}
    assert len(steps) == 1 and ticks[0] - lo < next(iter(steps)) + 1e-9
