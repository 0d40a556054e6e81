"""`recommend --sweep` (issue 41): one run answers "how does the gain change with batch / γ / context / rate?" -
one table, `points` in JSON, and a plot checked in a real headless browser."""

import json

import pytest

from tests.helpers.browser import png_pixels, screenshot

LLAMA = ("--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "A100-80GB")


def plan_json(**kw) -> dict:
    """The plan `recommend -o json` prints, made in this process (the same library call)."""
    from specops.api.recommend import build_request, recommend_with_defaults
    from specops.cli.output import to_jsonable

    return to_jsonable(recommend_with_defaults(build_request(**kw)))


def test_a_batch_sweep_is_one_table_and_json_points_match_single_runs(cli):
    r = cli("recommend", *LLAMA, "--sweep", "batch=1,8,64,256", "-o", "json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["variable"] == "batch" and [p["value"] for p in data["points"]] == [1, 8, 64, 256]
    single = plan_json(model=LLAMA[1], gpu=LLAMA[3], batch_size=8)
    at8 = data["points"][1]
    assert (at8["method"], at8["num_speculative_tokens"], at8["speedup"]) == (
        single["method"], single["num_speculative_tokens"], single["predicted"]["speedup"])
    assert at8["plan"]["vllm"]["argv"] == single["vllm"]["argv"]
    r = cli("recommend", *LLAMA, "--sweep", "batch=1,8,64,256", env={"COLUMNS": "80"})  # no TTY, 80 columns
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)  # no TTY: 80 columns
    header = next(line for line in lines if "batch" in line and "speedup" in line)
    assert all(h in header for h in ("method", "γ", "range", "TPOT ms", "fits"))
    rows = [line for line in lines if line.startswith("│")]
    assert len(rows) == 4 and f"{at8['speedup']:.2f}" in rows[1]


def test_gamma_context_and_qps_sweeps(cli):
    r = cli("recommend", *LLAMA, "--batch-size", "8", "--method", "eagle3", "--sweep", "gamma=1,3,6", "-o", "json")
    assert r.returncode == 0, r.stderr
    assert [p["num_speculative_tokens"] for p in json.loads(r.stdout)["points"]] == [1, 3, 6]
    from specops.api.sweep import run_sweep  # what the CLI calls, in this process

    base = {"model": LLAMA[1], "gpu": LLAMA[3]}
    pts = run_sweep(base, "context=1024,131072").points
    assert pts[0].error is None and pts[0].plan["vllm"]["argv"][3:5] == ["--max-model-len", str(1024 + 256)]
    assert "over meta-llama/Llama-3.1-8B-Instruct's limit" in pts[1].error  # refused, kept with its reason
    assert all(p.plan["load"]["qps"] == p.value for p in run_sweep(base, "qps=0.5,4").points)


def test_bad_sweeps_are_one_line_with_a_fix(cli, tmp_path):
    import pytest

    from specops.api.sweep import run_sweep
    from specops.errors import SpecopsError

    for sweep, extra in (("batchsize=1,2", {}), ("batch", {}), ("batch=1,x", {}), ("batch=0,8", {}),
                         ("batch=1,8", {"batch_size": 4}), ("qps=1,2", {"batch_size": 4})):
        with pytest.raises(SpecopsError) as exc:
            run_sweep({"model": LLAMA[1], "gpu": LLAMA[3], **extra}, sweep)
        assert exc.value.fix, sweep
    for args in (["--sweep", "batch"], ["--sweep", "batch=1,8", "-o", "deployment"],
                 ["--plot", str(tmp_path / "p.svg")], ["--sweep", "batch=1", "--plot", str(tmp_path / "p.png")]):
        r = cli("recommend", *LLAMA, *args)
        assert r.returncode == 2, (args, r.stderr)
        assert "To fix:" in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)


@pytest.mark.costly  # headless Chromium
def test_the_plot_draws_the_band_and_break_even_and_renders_in_chromium(cli, tmp_path):
    svg = tmp_path / "sweep.svg"
    r = cli("recommend", *LLAMA, "--sweep", "batch=1,8,64,256", "--plot", str(svg), "-o", "json")
    assert r.returncode == 0, r.stderr
    at8 = json.loads(r.stdout)["points"][1]
    text = svg.read_text()
    assert text.startswith("<svg") and 'class="band"' in text and "break-even" in text and ">256</text>" in text
    pick = f"{at8['method']} γ={at8['num_speculative_tokens']} {at8['speedup']:.2f}x"
    assert f"{pick} ({at8['speedup_low']:.2f}-{at8['speedup_high']:.2f})" in text  # the pick at batch 8, with its range
    from specops.api.sweep import Sweep, sweep_html

    doc = json.loads(r.stdout)
    assert doc.pop("schema_version") == 1  # the envelope every -o json document carries (docs/schemas)
    html = sweep_html(Sweep.model_validate(doc))  # what --plot FILE.html writes
    assert "<svg" in html and "<table>" in html and f"{at8['speedup']:.2f}x" in html
    png = screenshot(svg, tmp_path, 700, 400)
    w, h, colors = png_pixels(png)
    assert (w, h) == (700, 400)
    assert any(r < 80 and g < 120 and b > 200 for r, g, b in colors)  # the pick's blue dots (#2563eb)
    assert any(r > 220 and 90 < g < 140 and b < 60 for r, g, b in colors)  # the vetoed alternative (#f97316)
    assert any(200 < r < 235 and 215 < g < 240 and b > 245 for r, g, b in colors)  # the light-blue band
