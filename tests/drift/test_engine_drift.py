"""Done-when of issue 9 on the real CPU engine with real Prometheus (no mocks): deploy target-v1 +
draft-v1 through `specops deploy`, record the baseline with `specops monitor --once`, then push
target-v2 (target-v1 fine-tuned on prose) into the folder the deployment serves and restart it — the
stale-draft case of vllm#36223. `specops monitor --once` flags CHANGED_MODEL and `specops runbook run
acceptance-drop` names the changed target. Two engine starts."""

from __future__ import annotations

import math
import shutil
import socket
import time
from pathlib import Path

import httpx
import pytest

from specops.registry import open_registry
from tests.prometheus import start_prometheus, wait_until_caught_up

pytestmark = [pytest.mark.engine, pytest.mark.prometheus]

PROMPTS = [
    "def fibonacci(n):\n    ",
    "import os\nimport sys\n\n\ndef main():\n",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n",
    "    for key, value in sorted(mapping.items()):\n        if key",
    "def read_config(path):\n    with open(path) as f:\n",
    "    except KeyError:\n        raise ValueError(",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _traffic(endpoint: str) -> None:
    for p in PROMPTS:
        r = httpx.post(endpoint + "/v1/completions", timeout=300,
                       json={"model": "tiny", "prompt": p, "max_tokens": 48, "temperature": 0, "ignore_eos": True})
        assert r.status_code == 200, r.text


def _ok(r):
    if r.returncode != 0:
        pytest.fail(f"exit {r.returncode}\nstdout: {r.stdout[-3000:]}\nstderr: {r.stderr[-3000:]}", pytrace=False)
    return r


def _swap(src: Path, dst: Path) -> None:
    for p in dst.iterdir():
        p.unlink() if p.is_file() else shutil.rmtree(p)
    for p in src.iterdir():
        if p.is_file():
            shutil.copy2(p, dst / p.name)


def test_a_target_swapped_under_a_running_deployment_is_flagged_and_named(cli, tmp_path, tiny_models, engine_lock):
    served = tmp_path / "serve" / "target"
    shutil.copytree(tiny_models["target-v1"], served)
    with open_registry() as reg:
        reg.register_target(str(served), name="tiny", version="1")
        reg.register_target(str(tiny_models["target-v2"]), name="tiny", version="2")
        reg.register_draft(str(tiny_models["draft-v1"]), target="tiny@1", name="tiny-draft", version="1",
                           method="draft_model")
    port = _free_port()
    spec = tmp_path / "drift.yaml"
    spec.write_text(f"name: drift\ntarget: {{model: {served}, ref: tiny@1}}\n"
                    f"draft: {{model: {tiny_models['draft-v1']}, ref: tiny-draft@1}}\n"
                    "speculative: {method: draft_model, num_speculative_tokens: 3}\n"
                    "engine: {max_model_len: 512, dtype: bfloat16, max_num_seqs: 4}\n"
                    f"serve: {{port: {port}, served_model_name: tiny}}\nlocal: {{startup_timeout_s: 900}}\n")
    endpoint = f"http://127.0.0.1:{port}"
    prom, stop_prom = start_prometheus([(f"127.0.0.1:{port}", {"specops_deployment": "drift"})], tmp_path)
    try:
        # engine start 1; vLLM's pre-launch check is tests/engines/test_vllm_check.py's (it accepts this launch)
        _ok(cli("deploy", str(spec), "--no-check", timeout=1200))
        t0 = time.time()
        for i in range(2):  # two healthy windows, then the baseline from them
            _traffic(endpoint)
            wait_until_caught_up(prom, endpoint, 'vllm:spec_decode_num_drafts_total{specops_deployment="drift"}')
            window = str(math.ceil(time.time() - t0 + 2))
            args = ["monitor", "--once", "--prometheus-url", prom, "--interval", window, "--dry-run"]
            r = _ok(cli(*args, *(["--record-baseline"] if i else []), timeout=300))
            t0 = time.time()
        assert "drift: baseline recorded" in r.stdout, r.stdout
        assert "CHANGED_MODEL" not in r.stdout

        _ok(cli("stop", "drift", timeout=300))
        _swap(tiny_models["target-v2"], served)  # the fine-tuned target pushed under the same path
        _ok(cli("deploy", str(spec), "--force", "--no-check", "--reason",
                "target pushed without retraining the draft", timeout=1200))  # engine start 2
        t0 = time.time()
        _traffic(endpoint)
        wait_until_caught_up(prom, endpoint, 'vllm:spec_decode_num_drafts_total{specops_deployment="drift"}')
        window = str(math.ceil(time.time() - t0 + 2))
        r = _ok(cli("monitor", "--once", "--prometheus-url", prom, "--interval", window, "--dry-run", timeout=300))
        print(r.stdout)
        assert "[error] CHANGED_MODEL: drift: the live target" in r.stdout
        # greedy decoding, fixed prompts: the drop is large and repeatable, so the alarm is one code (two runs
        # on 2026-12-01: per-token acceptance 0.539 -> 0.386 and 0.530 -> 0.367, CUSUM 12.0 >= 6.0 both times);
        # BELOW_FLOOR would be a different finding
        assert "[warning] ACCEPTANCE_DROP: drift: per-token acceptance fell from its baseline" in r.stdout
        assert "ACCEPTANCE_BELOW_FLOOR" not in r.stdout

        r = _ok(cli("runbook", "run", "acceptance-drop", "--deployment", "drift", "--prometheus-url", prom,
                    timeout=300))
        print(r.stdout)
        assert "FINGERPRINT_MISMATCH: drift: the target changed under the draft" in r.stdout
        assert "now holds tiny@2" in r.stdout and "tiny-draft@1 was trained against tiny@1" in r.stdout
        assert "run: specops retrain --deployment drift" in r.stdout
    finally:
        cli("stop", "drift", timeout=300)
        stop_prom()
