"""`specops canary watch` on a real kube-apiserver and a real Prometheus: every window both arms' counters
are read through PromQL, the sequential test decides, and the canary is promoted or rolled back.

Real: etcd + kube-apiserver v1.20.2 (the canary and stable Deployments, promote/rollback through
server-side apply and delete), Debian's Prometheus (scraping every second, PromQL ``increase`` over
the windows), the specops CLI in a subprocess, the SQLite registry.
Faked: kubelet (FakeKubelet writes Deployment status; no pods run) and therefore the two arms' vLLM
engines: each arm is a small HTTP exporter (``ArmExporter`` below) serving ``vllm:spec_decode_*``
counters in the Prometheus text format, labelled by Prometheus with the arm's ``namespace`` and
``specops_deployment`` as the PodMonitor's relabelings would. Its counters are generated here, not by
specops: every 0.2 s it adds 10 drafts of 3 tokens and accepts each drafted token with the arm's
probability ``p`` (a seeded ``random.Random``), so an arm's true acceptance rate is ``p``.
"""

from __future__ import annotations

import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from specops.engines.spec import CanaryBlock
from tests.k8s.test_real_apiserver import CANARY, STABLE, cli_in, deploy, deployment, gamma_of, in_ns
from tests.prometheus import start_prometheus, wait_for_samples

pytestmark = pytest.mark.kube_apiserver

WINDOW_S = 3
"""Seconds per window: three scrapes. The arms differ by about 0.85 and the tests run at alpha 0.2 (a
wealth of 5 stops), so a decision comes after about 4 windows: the command's plumbing is what is tested
here; the test's error rates are tests/heal/test_sequential.py's and bench/aa_bench.py's."""


class ArmExporter:
    """One arm's engine, faked: vLLM's four speculative counters, advanced by a thread (module docstring)."""

    def __init__(self, p: float, seed: int) -> None:
        self.p, self.rng = p, random.Random(seed)
        self.drafts = self.drafted = self.accepted = 0
        self.lock = threading.Lock()
        self._stop = threading.Event()
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                body = exporter.text().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        self._threads = [threading.Thread(target=self.server.serve_forever, daemon=True),
                         threading.Thread(target=self._tick, daemon=True)]

    def _tick(self) -> None:
        while not self._stop.wait(0.2):
            with self.lock:
                self.drafts += 10
                self.drafted += 30
                self.accepted += sum(self.rng.random() < self.p for _ in range(30))

    def text(self) -> str:
        with self.lock:
            values = {"num_drafts": self.drafts, "num_draft_tokens": self.drafted,
                      "num_accepted_tokens": self.accepted}
        return "".join(f"# TYPE vllm:spec_decode_{k}_total counter\n"
                       f'vllm:spec_decode_{k}_total{{model_name="llama-3.3-70b"}} {v}\n' for k, v in values.items())

    def __enter__(self) -> ArmExporter:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()


def _arms(ns: str, tmp_path, stable_p: float, canary_p: float):
    """Both arms' exporters and a Prometheus scraping them with the PodMonitor's labels."""
    stable, canary = ArmExporter(stable_p, seed=1), ArmExporter(canary_p, seed=2)
    stable.__enter__()
    canary.__enter__()
    url, stop = start_prometheus([(stable.address, {"namespace": ns, "specops_deployment": STABLE}),
                                  (canary.address, {"namespace": ns, "specops_deployment": CANARY})], tmp_path)
    wait_for_samples(url, f'vllm:spec_decode_num_draft_tokens_total{{specops_deployment="{CANARY}"}}')
    wait_for_samples(url, f'vllm:spec_decode_num_draft_tokens_total{{specops_deployment="{STABLE}"}}')

    def close():
        stop()
        stable.__exit__()
        canary.__exit__()
    return url, close


def _terminated_after_one_window(argv: list[str], folder) -> str:
    """Run `specops canary watch`, SIGTERM it once its first window is reported; its stderr. The canary must
    still be there afterwards (checked by the caller's next watch, which needs it)."""
    import os
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "specops", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ), cwd=str(folder))
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "window 1/" in line:
            proc.send_signal(signal.SIGTERM)
            break
    rest = proc.communicate(timeout=60)[1]
    assert proc.returncode == 130, "".join(seen) + rest
    return "".join(seen) + rest


def _check_samples(test, stable_p: float, canary_p: float) -> None:
    """Every window's counts are the exporters' (rates near each arm's p; the difference is the counts')."""
    assert len(test.data) >= test.samples
    for s in test.data:
        (sa, sd), (ca, cd) = s["incumbent"], s["candidate"]
        assert sd > 0 and cd > 0
        assert abs(sa / sd - stable_p) < 0.15 and abs(ca / cd - canary_p) < 0.15
        assert s["d"] == pytest.approx(ca / cd - sa / sd, abs=1e-5)


def test_a_better_canary_is_promoted_on_live_windows(spec, llm_ns, fake_kubelet, real_cluster, tmp_path):
    from specops.registry import open_registry

    deploy(in_ns(spec, llm_ns), tmp_path)
    deploy(in_ns(spec, llm_ns, name=CANARY, gamma=5), tmp_path, canary_of=STABLE, replicas=1)
    url, close = _arms(llm_ns, tmp_path, stable_p=0.1, canary_p=0.95)
    try:
        proc = cli_in(tmp_path)("canary", "watch", CANARY, "-n", llm_ns, "--prometheus-url", url, "--window-s",
                                str(WINDOW_S), "--alpha", "0.2", "--budget", "12", "--timeout", "30")
    finally:
        close()
    assert proc.returncode == 0, proc.stderr
    assert f"{CANARY}: promoted (stable {STABLE}" in proc.stdout
    assert "better after" in proc.stdout
    assert deployment(real_cluster, llm_ns, CANARY) is None
    assert gamma_of(deployment(real_cluster, llm_ns, STABLE)) == 5  # the canary's configuration now
    reg = open_registry()
    [test] = reg.canary_tests(deployment=STABLE)
    assert (test.decision, test.traffic, test.alpha, test.canary) == ("better", "live-share", 0.2, CANARY)
    assert test.samples < 12 and test.mean_gain > 0.6
    _check_samples(test, 0.1, 0.95)
    promoted = [e for e in reg.events(subject=STABLE) if e.kind == "heal.promoted"]
    assert [e.data["canary_test"] for e in promoted] == [test.id]
    assert "promote" in {e.kind for e in reg.events(subject=STABLE)}


def test_a_worse_canary_is_rolled_back_with_the_spec_s_test(spec, llm_ns, fake_kubelet, real_cluster, tmp_path):
    from specops.registry import open_registry

    deploy(in_ns(spec, llm_ns), tmp_path)
    canary = in_ns(spec, llm_ns, name=CANARY, gamma=5).model_copy(
        update={"canary": CanaryBlock(share=0.5, alpha=0.2, budget=10)})
    deploy(canary, tmp_path, canary_of=STABLE)
    url, close = _arms(llm_ns, tmp_path, stable_p=0.95, canary_p=0.1)
    watch = cli_in(tmp_path)
    try:
        bad = watch("canary", "watch", CANARY, "-n", llm_ns, "--prometheus-url", url, "--window-s", "1")
        assert bad.returncode == 2 and "Traceback" not in bad.stderr
        assert "--window-s 1 is shorter than 2 s" in bad.stderr and "To fix: give --window-s 2 or more" in bad.stderr
        argv = ["canary", "watch", CANARY, "-n", llm_ns, "--prometheus-url", url, "--window-s", str(WINDOW_S)]
        stopped = _terminated_after_one_window(argv, tmp_path)
        proc = watch(*argv, "-o", "json")  # the fix followed (3 >= 2)
    finally:
        close()
    assert proc.returncode == 0, proc.stderr
    import json

    out = json.loads(proc.stdout)
    assert (out["status"], out["verdict"]["decision"], out["verdict"]["budget"]) == ("rolled-back", "worse", 10)
    assert deployment(real_cluster, llm_ns, CANARY) is None
    assert gamma_of(deployment(real_cluster, llm_ns, STABLE)) == 3  # the stable kept its configuration
    reg = open_registry()
    test, cut = reg.canary_tests(deployment=STABLE)  # newest first
    assert (cut.decision, cut.samples, len(cut.data)) == ("no-decision", 1, 1)  # the SIGTERMed run: recorded
    assert f"recorded as canary test {cut.id}: no decision" in stopped and "was left as it is" in stopped
    assert (test.id, test.decision, test.alpha) == (out["canary_test_id"], "worse", 0.2)
    _check_samples(test, 0.95, 0.1)
    assert reg.get_deployment(CANARY).status == "stopped"
    rolled = [e for e in reg.events(subject=STABLE) if e.kind == "heal.rollback"]
    assert [e.data["canary_test"] for e in rolled] == [test.id]
