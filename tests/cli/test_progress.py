"""Long waits say so on stderr, with the time left (specops.progress -> specops.cli.output.progress): the
live /metrics sample of validate, and validate --window to shorten it (bounded). The sampled engine is
a loopback HTTP peer serving vLLM exposition text (the only fake); the sleeps are recorded, not slept."""

from __future__ import annotations

import pytest

from specops.checks.playbook import get_profile
from specops.checks.run import with_window
from specops.checks.sources import endpoint_windows
from specops.errors import InputError
from tests.checks.helpers import exposition


def test_a_live_metrics_sample_reports_each_window_with_the_time_left(peer):
    engine = peer({"/metrics": (200, exposition(100, [72, 45, 26], 400))})
    said, slept = [], []
    windows = endpoint_windows(engine.url, None, sleep=slept.append, progress=said.append)
    assert len(windows(60.0, 4)) == 4 and slept == [15.0] * 4
    waits = [m for m in said if m.startswith("waiting for")]
    assert len(waits) == 4 and "(window 1 of 4)" in waits[0]
    assert [m.rsplit(", ", 1)[1] for m in waits] == ["60s left)", "45s left)", "30s left)", "15s left)"]
    assert said[-1].startswith("sampled ") and "60s" in said[-1]


def test_a_sample_of_a_few_seconds_says_nothing(peer):
    engine = peer({"/metrics": (200, exposition(100, [72, 45, 26], 400))})
    said = []
    endpoint_windows(engine.url, None, sleep=lambda s: None, progress=said.append)(2.0, 2)
    assert said == []


def test_window_shortens_the_profiles_sample_and_keeps_enough_sub_windows():
    prof = get_profile("gpu-default")  # 900 s in 15 windows, min 5
    short = with_window(prof, 60)
    assert short.window_s == 60 and short.windows == 15 and short.min_windows == prof.min_windows
    assert with_window(prof, 6).windows == 6 and with_window(prof, None) is prof


@pytest.mark.parametrize(("window", "match"), [(2, "outside 5s..900s"), (901, "outside 5s..900s"),
                                               (float("nan"), "outside"), (float("inf"), "outside")])
def test_window_is_bounded_by_a_floor_and_the_profiles_own_window(window, match):
    with pytest.raises(InputError, match=match):
        with_window(get_profile("gpu-default"), window)


def test_validate_window_flag_refuses_a_bad_value_on_one_line_before_anything_runs(cli):
    for value, words in (("abc", "is not a duration"), ("1s", "outside 5s..")):
        r = cli("validate", "-c", "deploy", "-d", "nope", "--window", value)
        assert r.returncode == 2 and words in r.stderr and "To fix:" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr


def test_plain_progress_prints_a_wait_when_it_starts_then_at_most_every_few_seconds(capsys, monkeypatch):
    from specops.cli import output

    clock = [100.0]
    monkeypatch.setattr("time.monotonic", lambda: clock[0])
    monkeypatch.setitem(output._last, "waiting", False)
    output.progress("starting vLLM")
    for t in (0, 3, 6, 11):
        clock[0] = 100.0 + t
        output.progress(f"waiting for x ({t}s of 20s, {20 - t}s left)")
    err = capsys.readouterr().err.splitlines()
    assert err == ["  … starting vLLM", "  … waiting for x (0s of 20s, 20s left)",
                   "  … waiting for x (11s of 20s, 9s left)"]


def test_validate_with_a_short_window_shows_its_wait_on_stderr_without_a_terminal(cli, peer):
    """The issue's case: `validate --checklist deploy` sampling /metrics printed nothing. Here a 5 s sample
    (--window) of an adopted engine whose counters do not move: progress lines, then could-not-evaluate."""
    from specops.registry import open_registry

    engine = peer({"/metrics": (200, exposition(100, [72, 45, 26], 400)), "/health": (200, "")})
    with open_registry() as reg:
        reg.upsert_deployment("ext", platform="external", status="adopted", method="ngram", num_speculative_tokens=3,
                              endpoint=engine.url, served_model_name="tiny")
    r = cli("validate", "-c", "deploy", "-d", "ext", "--profile", "cpu-tiny", "--window", "5s", "-o", "json")
    waits = [ln for ln in r.stderr.splitlines() if "waiting for" in ln]
    assert waits and "/metrics samples" in waits[0] and "5s left)" in waits[0], r.stderr
    assert "sampled " in r.stderr
    assert r.returncode == 2, r.stdout[-400:]  # counters that never move: too few samples, never a pass


def test_bench_without_a_terminal_prints_plain_request_progress_with_the_time_left(capsys, monkeypatch):
    from specops.cli import output
    from specops.cli.measure import _progress

    monkeypatch.setitem(output._last, "waiting", False)
    with _progress() as bar:  # capsys: stderr is not a terminal, so no rich bar
        bar("total", 4)
        bar("advance", 1)
    err = capsys.readouterr().err
    assert "waiting for bench requests (1 of 4)" in err and "s left)" in err, err
