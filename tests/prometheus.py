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
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = httpx.get(url + "/api/v1/query", params={"query": query}, timeout=5).json()
        if r.get("data", {}).get("result"):
            return
        time.sleep(0.5)
    raise RuntimeError(f"no samples for {query} after {timeout}s")
