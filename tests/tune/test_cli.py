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
