"""Start Debian's real `prometheus` binary for tests (loopback, free port, scrape_interval 1s).

``start_prometheus(targets, tmp_path) -> (url, stop)``; ``targets`` are ``host:port`` strings (each
scraped at /metrics) or ``(host:port, {"label": "value"})`` pairs whose labels are attached to every
series of that target (e.g. ``specops_deployment``). Installs the Debian package when missing (the
test machine is root; ≈10 s).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import yaml

from tests.helpers.wait import wait_until


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ensure_prometheus() -> str:
    path = shutil.which("prometheus")
    if path:
        return path
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update"], check=True, capture_output=True, env=env, timeout=300)
    subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "prometheus"], check=True,
                   capture_output=True, env=env, timeout=600)
    path = shutil.which("prometheus")
    if not path:
        raise RuntimeError("prometheus is still not on PATH after apt-get install")
    return path


def start_prometheus(targets, tmp_path: Path, timeout: float = 60):
    binary = ensure_prometheus()
    port = _free_port()
    base = Path(tmp_path) / f"prometheus-{port}"
    (base / "data").mkdir(parents=True)
    static = []
    for t in targets:
        addr, labels = (t, {}) if isinstance(t, str) else t
        static.append({"targets": [addr], **({"labels": labels} if labels else {})})
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
              "scrape_configs": [{"job_name": "vllm", "scrape_interval": "1s", "scrape_timeout": "1s",
                                  "static_configs": static}]}
    (base / "prometheus.yml").write_text(yaml.safe_dump(config))
    log = open(base / "prometheus.log", "wb")
    proc = subprocess.Popen([binary, f"--config.file={base / 'prometheus.yml'}",
                             f"--storage.tsdb.path={base / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
                             "--web.enable-lifecycle"], stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"

    def stop() -> None:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        log.close()

    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            stop()
            raise RuntimeError(f"prometheus exited: {(base / 'prometheus.log').read_text()[-2000:]}")
        try:
            if httpx.get(url + "/-/ready", timeout=1).status_code == 200:
                return url, stop
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    stop()
    raise RuntimeError("prometheus did not become ready")


def wait_for_samples(url: str, query: str, timeout: float = 30) -> None:
    """Block until ``query`` returns at least one series."""
    def found():
        r = httpx.get(url + "/api/v1/query", params={"query": query}, timeout=5).json()
        return r.get("data", {}).get("result")

    wait_until(found, timeout, f"samples for {query} in Prometheus at {url}", interval=0.5)


def stored_samples(url: str, selector: str, lookback: str = "5m") -> list[tuple[float, float]]:
    """The raw samples (unix time, value) Prometheus has stored for ``selector`` in the last ``lookback``,
    over every matching series."""
    r = httpx.get(url + "/api/v1/query", params={"query": f"{selector}[{lookback}]"}, timeout=5).json()
    return [(float(t), float(v)) for series in r.get("data", {}).get("result", []) for t, v in series["values"]]


def wait_for_scrape(url: str, selector: str, since: float, value: float | None = None, timeout: float = 30) -> float:
    """Block until Prometheus has stored a sample of ``selector`` scraped after unix time ``since``
    (with ``value``, when given); return that sample's time. This is what a fixed sleep after
    changing an exporter's text hopes for."""
    def scraped():
        return next((t for t, v in stored_samples(url, selector) if t > since and (value is None or v == value)), None)

    what = f"a scrape of {selector}{'' if value is None else f' = {value:g}'} after {since:.3f}"
    return wait_until(scraped, timeout, what)


def exporter_value(endpoint: str, name: str) -> float:
    """The sum over series of counter ``name`` in ``endpoint``/metrics right now (text format)."""
    text = httpx.get(endpoint.rstrip("/") + "/metrics", timeout=30).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name) and line[len(name):len(name) + 1] in ("{", " "))


def wait_until_caught_up(url: str, endpoint: str, selector: str = "vllm:spec_decode_num_drafts_total",
                         timeout: float = 30) -> float:
    """Block until Prometheus has stored the value ``endpoint`` exports now (the traffic sent so far
    is in Prometheus); return it. ``selector`` picks the one series scraped from ``endpoint``."""
    name = selector.split("{", 1)[0]
    value = exporter_value(endpoint, name)
    wait_for_scrape(url, selector, 0.0, value, timeout)
    return value
