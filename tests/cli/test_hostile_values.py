"""Issue 39, values: windows and pids in range, names without tabs or invisible characters, http(s)
endpoints only, GPU and model catalog figures of a real machine, a /metrics position label that is
no number never becomes γ, and a validation run on a slow or dead peer pays its timeout once, not
once per metric check. The CLI in this process, real playbook copies, a real HTTP peer
(tests/metrics/hostile.py, faked: what the engine answers)."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from tests.checks.helpers import exposition
from tests.cli.inproc import run_main

REPO = Path(__file__).resolve().parents[2]
DEAD = "http://127.0.0.1:9"


def _refused(args, *words):
    code, out, err = run_main(*args)
    assert code == 2, (args, code, err)
    assert "internal error" not in err and "cannot reach" not in err, err  # refused before any network
    for w in words:
        assert w in err, (w, err)


@pytest.mark.parametrize("window", ["inf", "-inf", "nan", "1e309", "1e300", "99999999d"])
def test_a_window_that_is_not_a_finite_duration_is_refused_before_any_work(window):
    _refused(("metrics", "--endpoint", DEAD, "--window", window), "--window")
    _refused(("bench", "--endpoint", DEAD, "--window", window), "--window")


@pytest.mark.parametrize("pid", ["-1", "0", str(2**40)])
def test_an_engine_pid_that_is_no_process_id_is_refused(pid):
    _refused(("bench", "--endpoint", DEAD, "--engine-pid", pid), "--engine-pid")
    _refused(("bench", "--endpoint", DEAD, "--baseline-endpoint", DEAD, "--baseline-pid", pid), "--baseline-pid")


@pytest.mark.parametrize("bad", ["a\tb", "web\u200b", "x\u202ey", "a\nb", " lead"])
def test_names_with_tabs_or_invisible_characters_are_refused(bad):
    _refused(("lineage", "register-target", "org/model", "--name", bad), "--name")
    _refused(("lineage", "register-target", "org/model", "--version", bad), "--version")
    _refused(("deployment", "register", "web", "--endpoint", DEAD, "--served-name", bad, "--no-check"),
             "served_model_name")
    listed = json.loads(run_main("lineage", "list", "-o", "json")[1])
    assert (listed.get("targets"), listed.get("drafts")) == ([], [])  # nothing was registered


@pytest.mark.parametrize("url", ["file:///etc/passwd", "gopher://127.0.0.1:9", "127.0.0.1:9"])
def test_an_endpoint_that_is_not_http_is_refused(url):
    for args in (("bench", "--endpoint", url), ("bench", "--endpoint", DEAD, "--baseline-endpoint", url),
                 ("metrics", "--endpoint", url), ("deployment", "register", "w", "--endpoint", url, "--no-check")):
        _refused(args, "not an http(s) URL")


@pytest.mark.parametrize("catalog, field, value", [("gpus.yaml", "memory_gib:", "1e40"),
                                                   ("gpus.yaml", "bandwidth_gbs:", "1.0e+40"),
                                                   ("models.yaml", "params_b:", "1e40")])
def test_catalog_figures_no_machine_has_are_refused_with_the_file(tmp_path, monkeypatch, catalog, field, value):
    books = tmp_path / "playbooks"
    shutil.copytree(REPO / "playbooks", books)
    path = books / "catalogs" / catalog
    text = path.read_text()
    assert field in text
    path.write_text(re.sub(rf"{field}\s*[0-9.e+]+", f"{field} {value}", text, count=1))
    monkeypatch.setenv("SPECOPS_PLAYBOOKS", str(books))
    code, _, err = run_main("recommend", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100")
    assert code == 2 and catalog in err and "internal error" not in err, err


@pytest.mark.parametrize("params_b", ["1e40", "1e308"])
def test_params_b_beyond_any_model_is_refused(params_b):
    code, _, err = run_main("recommend", "--model", "acme/unknown-model", "--params-b", params_b, "--gpu", "H100")
    assert code == 2 and "params" in err and "internal error" not in err, err


GOOD = exposition(100, [72, 45, 26], 300)


@pytest.mark.parametrize("label", ['position="two"', 'position="2.0"', 'position=""'])
def test_a_position_label_that_is_no_number_never_becomes_gamma(peer, label):
    text = GOOD.replace('position="2"', label)  # the third position's series is unreadable: γ is still 3
    assert text != GOOD
    s = peer({"/metrics": (200, text), "/v1/models": (200, json.dumps({"data": [{"id": "tiny"}]}))})
    code, out, err = run_main("deployment", "register", "odd", "--endpoint", s.url, "-o", "json")
    assert code == 0, err
    assert json.loads(out)["num_speculative_tokens"] is None  # unknown, never the 2 readable positions
    code, out, err = run_main("metrics", "--endpoint", s.url, "-o", "json")
    assert code == 0, err
    m = json.loads(out)
    assert m["num_speculative_tokens"] == 3 and m["accepted_per_position"] in ([], None), m
    assert any("incomplete" in n for n in m["notes"])


def test_a_failed_metric_source_costs_one_timeout_per_run_not_one_per_check():
    """A real checklist run whose metrics source is a dead peer (faked: each call waits 0.5 s, as a
    timeout would, then fails): the source is asked once; every metric check is could-not-evaluate."""
    from specops.checks.evaluate import run_checklist
    from specops.checks.playbook import get_profile, load_checklist
    from specops.checks.sources import Sources
    from specops.errors import MeasurementError

    calls = []

    def dead_peer(window_s, count):
        calls.append(window_s)
        time.sleep(0.5)
        raise MeasurementError("http://127.0.0.1:9/metrics did not answer within 10s", "check the engine")

    dep = {"name": "web", "endpoint": DEAD, "method": "ngram", "num_speculative_tokens": 3, "status": "running"}
    report = run_checklist(load_checklist("deploy"), "gpu-default", get_profile("gpu-default"),
                           Sources(deployment=dep, windows=dead_peer))
    metric = [r for r in report.results if r.kind == "metric"]
    assert len(metric) >= 2 and all(r.status == "error" for r in metric), [(r.id, r.status) for r in metric]
    assert len(calls) == 1, calls
    assert report.exit_code == 2


def test_no_metric_source_starts_after_the_runs_deadline():
    from specops.checks.sources import Sources
    from specops.errors import MeasurementError

    src = Sources(deployment={"name": "web"}, windows=lambda w, c: [], deadline_s=0.0)
    time.sleep(0.01)
    with pytest.raises(MeasurementError, match="deadline"):
        src.metric_windows(60.0, 3)
