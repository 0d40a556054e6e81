"""`recommend --sweep` (issue 41): one run answers "how does the gain change with batch / γ / context / rate?" -
one table, `points` in JSON, and a plot checked in a real headless browser."""

import json
import shutil
import subprocess

from tests.checks.test_outputs import _png_pixels

LLAMA = ("--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "A100-80GB")


def test_a_batch_sweep_is_one_table_and_json_points_match_single_runs(cli):
    r = cli("recommend", *LLAMA, "--sweep", "batch=1,8,64,256", "-o", "json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["variable"] == "batch" and [p["value"] for p in data["points"]] == [1, 8, 64, 256]
    single = json.loads(cli("recommend", *LLAMA, "--batch-size", "8", "-o", "json").stdout)
    at8 = data["points"][1]
    assert (at8["method"], at8["num_speculative_tokens"], at8["speedup"]) == (
        single["method"], single["num_speculative_tokens"], single["predicted"]["speedup"])
    assert at8["plan"]["vllm"]["argv"] == single["vllm"]["argv"]
    r = cli("recommend", *LLAMA, "--sweep", "batch=1,8,64,256")
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
    r = cli("recommend", *LLAMA, "--sweep", "context=1024,131072", "-o", "json")
    pts = json.loads(r.stdout)["points"]
    assert pts[0]["error"] is None and pts[0]["plan"]["vllm"]["argv"][3] == "--max-model-len"
    assert "over meta-llama/Llama-3.1-8B-Instruct's limit" in pts[1]["error"]  # refused, kept with its reason
    r = cli("recommend", *LLAMA, "--sweep", "qps=0.5,4", "-o", "json")
    assert r.returncode == 0, r.stderr
    assert all(p["plan"]["load"]["qps"] == p["value"] for p in json.loads(r.stdout)["points"])


def test_bad_sweeps_are_one_line_with_a_fix(cli, tmp_path):
    for args in (["--sweep", "batchsize=1,2"], ["--sweep", "batch"], ["--sweep", "batch=1,x"],
                 ["--sweep", "batch=1,8", "--batch-size", "4"], ["--sweep", "batch=1,8", "-o", "deployment"],
                 ["--plot", str(tmp_path / "p.svg")], ["--sweep", "batch=1", "--plot", str(tmp_path / "p.png")]):
        r = cli("recommend", *LLAMA, *args)
        assert r.returncode == 2, (args, r.stderr)
        assert "To fix:" in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)


def test_the_plot_draws_the_band_and_break_even_and_renders_in_chromium(cli, tmp_path):
    svg, html = tmp_path / "sweep.svg", tmp_path / "sweep.html"
    for out in (svg, html):
        r = cli("recommend", *LLAMA, "--sweep", "batch=1,8,64,256", "--plot", str(out))
        assert r.returncode == 0, r.stderr
    text = svg.read_text()
    assert text.startswith("<svg") and 'class="band"' in text and "break-even" in text
    assert ">256</text>" in text and "eagle3 γ=3 2.04x (1.57-2.27)" in text  # the pick at batch 8, with its range
    assert "<svg" in html.read_text() and "<table>" in html.read_text()
    browser = shutil.which("chromium")
    assert browser, "install Debian's chromium: apt-get install -y --no-install-recommends chromium"
    png = tmp_path / "shot.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--no-first-run",
                    f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={png}", "--window-size=700,400",
                    f"file://{svg}"], check=True, capture_output=True, timeout=120)
    w, h, colors = _png_pixels(png)
    assert (w, h) == (700, 400)
    assert any(r < 80 and g < 120 and b > 200 for r, g, b in colors)  # the pick's blue dots (#2563eb)
    assert any(r > 220 and 90 < g < 140 and b < 60 for r, g, b in colors)  # the vetoed alternative (#f97316)
    assert any(200 < r < 235 and 215 < g < 240 and b > 245 for r, g, b in colors)  # the light-blue band
