"""The monitor facing hostile peers: a dripping engine cannot hold a cycle or a signal hostage, it
cannot blind the rest of the fleet, and a failing Prometheus is said, not hidden behind direct scrapes.
The peers are tests/metrics/hostile.py (faked: what an engine or Prometheus answers); the CLI, its
process, signals, HTTP client, parsers and registry are real."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.checks.helpers import exposition
from tests.conftest import REPO

GOOD = exposition(100, [72, 45, 26], 400)
MODELS = json.dumps({"data": [{"id": "tiny"}]})



def _register(cli, name: str, url: str) -> None:
    r = cli("deployment", "register", name, "--endpoint", url, "--method", "ngram", "--served-name", "tiny",
            "--no-check")
    assert r.returncode == 0, r.stderr


def _report(r) -> dict:
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_sigterm_stops_monitor_once_within_seconds_while_an_engine_drips(cli, peer):
    slow = peer({"/metrics": (200, GOOD)}, drip_s=1.0)
    _register(cli, "slow", slow.url)
    proc = subprocess.Popen([sys.executable, "-m", "specops", "monitor", "--once", "-o", "json"], cwd=str(REPO),
                            env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert slow.hit.wait(60), "the monitor never scraped the engine"
        time.sleep(0.5)  # it is now inside the exchange, the engine sending one byte a second
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert took < 3, f"exited {took:.1f}s after SIGTERM"  # was ~9.5 s: the thread pool waited for the scrape
    assert proc.returncode == 130, (proc.returncode, err[-500:])
    assert "Traceback" not in err


@pytest.mark.costly  # waits out the per-engine deadline (10 s) by design
def test_one_dripping_engine_does_not_starve_the_fleet(cli, peer):
    slow = peer({"/metrics": (200, GOOD)}, drip_s=1.0)
    good = peer({"/metrics": (200, GOOD), "/v1/models": (200, MODELS)})
    _register(cli, "slow", slow.url)
    _register(cli, "good", good.url)
    t0 = time.monotonic()
    r = cli("monitor", "--once", "-o", "json", timeout=120)
    took = time.monotonic() - t0
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-500:]
    report = _report(r)
    assert report["seen"] == ["good"]
    assert "did not finish its answer within" in report["unseen"]["slow"], report["unseen"]
    assert took < 30, took


PROMETHEUS_FAILS = {
    "HTTP 400 error": ((400, json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error"})),
                       "bad_data: parse error"),
    "HTML": ((200, "<html><body>login</body></html>"), "did not answer like a Prometheus API"),
    "NaN": ((200, json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"model_name": "tiny"}, "value": [1, "NaN"]}]}})), "answered nan"),
    "down": (None, "cannot reach"),
}


@pytest.mark.parametrize("case", list(PROMETHEUS_FAILS))
def test_a_failing_prometheus_is_noted_behind_direct_scrapes_without_urllib3_noise(cli, peer, case):
    answer, why = PROMETHEUS_FAILS[case]
    prom_url = peer({"/api/v1/query": answer}, content_type="application/json").url if answer else "http://127.0.0.1:9"
    good = peer({"/metrics": (200, GOOD), "/v1/models": (200, MODELS)})
    _register(cli, "good", good.url)
    r = cli("monitor", "--once", "-o", "json", "--prometheus-url", prom_url)
    assert r.returncode == 0, r.stderr[-500:]
    report = _report(r)
    assert report["seen"] == ["good"]
    notes = " ".join(report["notes"])
    assert "Prometheus failed" in notes and why in notes, report["notes"]
    assert "Retrying" not in r.stderr and "urllib3" not in r.stderr and "Traceback" not in r.stderr, r.stderr
