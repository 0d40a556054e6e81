"""`specops tune` bad input: one line with `To fix:`, exit 2, no traceback, nothing stored."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("args,needle", [
    (["--model", "/m", "--gammas", "0-3"], "--gammas"),
    (["--model", "/m", "--methods", "ngarm"], 'Did you mean "ngram"'),
    (["--model", "/m", "--concurrency", "0"], "--concurrency"),
    (["--model", "/m", "--methods", "draft_model"], "needs a draft model"),
    (["--resume", "nope"], 'no tune run "nope"'),
    (["--gammas", "2"], "exactly one of --deployment"),
    (["--model", "/m", "--endpoint-for", "ngram-g2"], "CONFIG=URL"),
    (["--model", "/m", "--output", "yaml"], "unknown output format"),
    (["--model", "/m", "--budget-minutes", "-5"], "--budget-minutes"),
])
def test_bad_tune_input_is_one_line_with_a_fix_and_exit_2(cli, specops_home, args, needle):
    res = cli("tune", *args)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "To fix:" in lines[0]
    assert "Traceback" not in res.stderr
    assert not (specops_home / "tune").exists() or not any((specops_home / "tune").iterdir())


def test_tune_has_help_text_for_every_option(cli):
    res = cli("tune", "--help")
    assert res.returncode == 0
    for flag in ("--deployment", "--spec", "--workload", "--methods", "--gammas", "--concurrency",
                 "--budget-minutes", "--name", "--resume", "--endpoint-for", "--output"):
        assert flag in res.stdout


def _stored_run(model: str = "meta-llama/Llama-3.1-8B-Instruct"):
    """A run measured through the library with the fakes (no engine can run per test here), stored in
    the test's registry; the CLI then works on it for real."""
    from specops.api.tune import TuneOptions, tune
    from tests.tune.fakes import FakeDeployer, FakeMeasurer

    opts = TuneOptions(model=model, draft="/d", methods=["ngram", "draft_model"], gammas=[1, 2, 3],
                       concurrency=[1, 4], passes=1, name="cli-cal")
    return tune(opts, deployer=FakeDeployer(), measurer=FakeMeasurer(noise=0.05))


def test_refit_writes_the_html_report_and_says_what_recommend_picks(cli, tmp_path):
    import json

    first = _stored_run()
    out = tmp_path / "tune.html"
    res = cli("tune", "--resume", first.run_id, "--refit", "--html", str(out), "-o", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["calibration"] == "cli-cal@2" and doc["html"] == str(out)
    assert [p["concurrency"] for p in doc["recommend_picks"]] == [1, 4]
    for p in doc["recommend_picks"]:  # recommend ranks with the fitted model: its pick was measured
        assert p["method"] in ("none", "ngram", "draft_model") and p["tokens_per_s_measured"] is not None
    page = out.read_text()
    assert page.count("<svg") >= 3 and "cli-cal@2" in page and "specops recommend" in page


def test_list_shows_stored_runs_and_calibrations(cli):
    import json

    first = _stored_run()
    res = cli("tune", "--list", "-o", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [r["run_id"] for r in doc["runs"]] == [first.run_id]
    assert doc["runs"][0]["points"] == len(first.outcome.results) >= 14
    assert [c["ref"] for c in doc["calibrations"]] == ["cli-cal@1"]
    table = cli("tune", "--list")
    assert table.returncode == 0 and first.run_id in table.stdout and "cli-cal@1" in table.stdout
