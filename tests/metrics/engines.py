"""Start a real vLLM CPU engine for tests (until `specops deploy` exists): the module-form argv from
``specops.engines.argv.render_argv`` and the contained, offline environment of cpu-engine.md.
Callers must hold the ``engine_lock`` fixture while the engine runs."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from specops.engines.argv import LaunchConfig, render_argv
from specops.engines.local import engine_env_for_tests, note_for_tests


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def engine_env(tmp: Path) -> dict:
    env = dict(os.environ)
    short_tmp = tmp / "tmp"
    if len(str(short_tmp)) > 60:  # vLLM's ZeroMQ ipc socket paths must fit in 107 bytes
        import tempfile

        short_tmp = Path(tempfile.mkdtemp(prefix="so-eng-", dir="/tmp"))
    short_tmp.mkdir(parents=True, exist_ok=True)
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
                "VLLM_CPU_KVCACHE_SPACE": "1", "TMPDIR": str(short_tmp),
                # the session's vLLM cache (tests/conftest.py): a model class is inspected once per session
                "VLLM_CACHE_ROOT": os.environ.get("SPECOPS_TEST_VLLM_CACHE") or str(tmp / "cache")})
    iomp = Path(sys.prefix) / "lib" / "libiomp5.so"
    if iomp.is_file():
        env["LD_PRELOAD"] = str(iomp)
    env.update(engine_env_for_tests())  # tests/conftest.py's SPECOPS_TEST_ENGINE_ENV, as `specops deploy` gets it
    return env


class Engine:
    def __init__(self, proc: subprocess.Popen, url: str, log: Path, served_name: str, cfg: LaunchConfig):
        self.proc, self.url, self.log, self.served_name, self.cfg = proc, url, log, served_name, cfg

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)


def start_engine(tmp: Path, model: Path, *, served_name: str = "tiny", method: str = "none",
                 draft: Path | None = None, k: int | None = None, extra_args: list[str] | None = None,
                 timeout: float = 420, dtype: str = "bfloat16") -> Engine:
    tmp.mkdir(parents=True, exist_ok=True)
    port = free_port()
    cfg = LaunchConfig(model=str(model), served_model_name=served_name, method=method,
                       draft_model=str(draft) if draft else None, num_speculative_tokens=k, host="127.0.0.1",
                       port=port, max_model_len=512, dtype=dtype, enforce_eager=True,  # eager: starts ~3x faster on CPU
                       extra_args=extra_args or [])
    argv = render_argv(cfg, entrypoint="module", python=sys.executable)
    log = tmp / "engine.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=engine_env(tmp),
                                start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    engine = Engine(proc, url, log, served_name, cfg)
    t0 = time.monotonic()
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            note_for_tests("engine_start_failed", time.monotonic() - t0)
            raise RuntimeError(f"engine exited {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                note_for_tests("engine_start", time.monotonic() - t0)
                return engine
        except httpx.HTTPError:
            pass
        time.sleep(1)
    note_for_tests("engine_start_failed", time.monotonic() - t0)
    engine.stop()
    raise RuntimeError(f"engine not healthy after {timeout}s:\n{log.read_text()[-3000:]}")
