"""The real deployer and measurer behind `specops tune`.

- :class:`LocalDeployer` starts one vLLM engine per configuration on this machine (the module-form
  argv from :func:`specops.engines.argv.render_argv`, a contained offline environment, the compile
  cache shared across restarts under ``$SPECOPS_HOME/cache/`` so restarts are warm), waits for
  ``/health`` and stops it (its own process group only). An engine that exits or never gets healthy
  raises :class:`EngineError` with the last lines of its log.
- :class:`RemoteDeployer` measures engines someone else runs: one endpoint per configuration, no
  redeploy; "starting" only checks that the endpoint answers.
- :class:`BenchMeasurer` runs the workload once at a concurrency through the A/B benchmark's runner
  (:mod:`specops.benchmark.runner`) and turns its run into a :class:`Sample` (client TPOT and tokens/s,
  the engine's spec-decode counter deltas).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from specops.errors import EngineError, InputError, MeasurementError
from specops.tune.types import EngineConfig, Sample


@dataclass
class EngineHandle:
    endpoint: str
    served_name: str
    pid: int | None = None
    proc: subprocess.Popen | None = None
    log: Path | None = None
    prepared: dict = field(default_factory=dict)  # workload capped to the engine's context, once
    config: EngineConfig | None = None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path | None, lines: int = 8) -> str:
    if path is None or not path.is_file():
        return ""
    text = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    return " | ".join(line.strip() for line in text[-lines:])


@dataclass
class LocalDeployer:
    """Start/stop a local vLLM engine per configuration (one at a time)."""

    model: str
    workdir: Path
    served_name: str = "tune"
    max_model_len: int = 512
    dtype: str = "bfloat16"
    vllm_version: str = "0.32.0"
    enforce_eager: bool = False
    startup_timeout_s: float = 420.0
    extra_env: dict = field(default_factory=dict)
    extra_args: list[str] = field(default_factory=list)
    _short_tmp: list[Path] = field(default_factory=list, repr=False)

    def _env(self) -> dict:
        from specops.settings import cache_dir

        tmp = self.workdir / "tmp"
        if len(str(tmp)) > 48:  # vLLM binds ZMQ IPC sockets in TMPDIR: paths over 107 bytes fail
            tmp = Path(tempfile.mkdtemp(prefix="specops-tune-"))
            self._short_tmp.append(tmp)
        tmp.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
                    "DO_NOT_TRACK": "1", "VLLM_CPU_KVCACHE_SPACE": env.get("VLLM_CPU_KVCACHE_SPACE", "1"),
                    "TMPDIR": str(tmp), "VLLM_CACHE_ROOT": str(cache_dir() / "vllm")})
        iomp = Path(sys.prefix) / "lib" / "libiomp5.so"
        if iomp.is_file():
            env["LD_PRELOAD"] = str(iomp)
        env.update(self.extra_env)
        return env

    def argv(self, config: EngineConfig, port: int) -> list[str]:
        from specops.engines.argv import LaunchConfig, render_argv

        cfg = LaunchConfig(vllm_version=self.vllm_version, model=self.model, served_model_name=self.served_name,
                           method=config.method, draft_model=config.draft,
                           num_speculative_tokens=config.gamma or None,
                           prompt_lookup_max=config.gamma if config.method == "ngram" else None,
                           host="127.0.0.1", port=port, max_model_len=self.max_model_len, dtype=self.dtype,
                           enforce_eager=self.enforce_eager, extra_args=list(self.extra_args))
        return render_argv(cfg, entrypoint="module", python=sys.executable)

    def start(self, config: EngineConfig) -> EngineHandle:
        if config.draft and not Path(config.draft).expanduser().exists() and config.draft.startswith(("/", ".")):
            raise EngineError(f"draft folder {config.draft} does not exist", "pass an existing --draft folder")
        port = _free_port()
        argv = self.argv(config, port)
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = self.workdir / f"engine-{config.key}.log"
        with open(log, "wb") as fh:
            proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, env=self._env(),
                                    start_new_session=True)
        (self.workdir / "engine.pid").write_text(f"{proc.pid}\n", encoding="utf-8")
        url = f"http://127.0.0.1:{port}"
        handle = EngineHandle(url, self.served_name, proc.pid, proc, log, config=config)
        try:
            self._wait_healthy(handle, config)
        except BaseException:  # incl. Ctrl-C while waiting: never leave the engine behind
            self.stop(handle)
            raise
        return handle

    def _wait_healthy(self, handle: EngineHandle, config: EngineConfig) -> None:
        import httpx

        proc, log, url = handle.proc, handle.log, handle.endpoint
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise EngineError(f"the engine for {config.key} exited with code {proc.returncode} during start-up: "
                                  f"{_tail(log)}", f"read {log}")
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1)
        raise EngineError(f"the engine for {config.key} was not healthy after {self.startup_timeout_s:.0f} s: "
                          f"{_tail(log)}", f"read {log}; raise the start-up timeout on a slow machine")

    def stop(self, handle: EngineHandle) -> None:
        proc = handle.proc
        try:
            if proc is not None and proc.poll() is None:
                self._stop(proc)
        finally:
            (self.workdir / "engine.pid").unlink(missing_ok=True)
            while self._short_tmp:
                shutil.rmtree(self._short_tmp.pop(), ignore_errors=True)

    @staticmethod
    def _stop(proc: subprocess.Popen) -> None:
        os.killpg(proc.pid, signal.SIGTERM)  # the group start_new_session made: only what we started
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


@dataclass
class RemoteDeployer:
    """Engines run elsewhere: one endpoint per configuration key (``none``, ``ngram-g2``, ...)."""

    endpoints: dict[str, str]
    served_name: str | None = None
    api_key_env: str | None = None

    def start(self, config: EngineConfig) -> EngineHandle:
        import httpx

        from specops.metrics import base_url

        url = self.endpoints.get(config.key)
        if url is None:
            raise EngineError(f"no endpoint given for {config.key}",
                              f"pass --endpoint-for {config.key}=URL, or leave it out of --methods/--gammas")
        url = base_url(url)
        try:
            httpx.get(url + "/v1/models", timeout=10)
        except httpx.HTTPError as exc:
            raise EngineError(f"cannot reach {url} for {config.key} ({exc.__class__.__name__})",
                              "check that the engine is running and the URL is right") from None
        return EngineHandle(url, self.served_name or "", None, config=config)

    def stop(self, handle: EngineHandle) -> None:
        return None


@dataclass
class BenchMeasurer:
    """One run of ``workload`` (built-in name or JSONL) at a concurrency, through the bench runner."""

    workload: str = "code"
    requests: int = 8
    max_tokens: int | None = 64
    seed: int = 1
    warmup: int = 1
    api_key_env: str | None = None

    def __call__(self, handle: EngineHandle, concurrency: int) -> Sample:
        return asyncio.run(self._run(handle, concurrency))

    async def _prepare(self, handle: EngineHandle, target):
        import httpx

        from specops.benchmark.runner import _model_info, _prompt_tokens, _warm, auth_headers
        from specops.benchmark.workloads import cap_to_context, load_workload

        if not handle.prepared:
            base = load_workload(self.workload, self.max_tokens, self.seed)
            async with httpx.AsyncClient() as client:
                model, max_len = await _model_info(client, target, auth_headers(target))
                counts = await _prompt_tokens(client, target.endpoint, model, [p.prompt for p in base.prompts],
                                              auth_headers(target)) if max_len else []
            workload = cap_to_context(base, max_len, counts)
            await _warm(target, model, workload, self.warmup)
            handle.prepared.update(model=model, workload=workload)
        return handle.prepared["model"], handle.prepared["workload"]

    async def _run(self, handle: EngineHandle, concurrency: int) -> Sample:
        from specops.benchmark.runner import run_once
        from specops.benchmark.types import BenchOptions, Target

        role = "baseline" if handle.config is not None and handle.config.method == "none" else "spec"
        target = Target(role=role, endpoint=handle.endpoint, served_name=handle.served_name or None,
                        pid=handle.pid, api_key_env=self.api_key_env)
        model, workload = await self._prepare(handle, target)
        opts = BenchOptions(spec=target, workload=self.workload, concurrency=[concurrency], requests=self.requests,
                            max_tokens=self.max_tokens, seed=self.seed, warmup=0)
        run = await run_once(target, model, workload, concurrency, opts, None)
        return sample_from_run(run)


def sample_from_run(run) -> Sample:
    """A bench RunResult -> Sample (client timing, engine counters)."""
    if run.ok == 0 or not run.tpot_p50_s or not run.tokens_per_s:
        raise MeasurementError(f"no request completed ({'; '.join(run.errors) or 'no output'})",
                               "check the engine's log; lower the concurrency or max_tokens")
    m = run.measurement
    spec = m is not None and m.speculation and (m.num_drafts or 0) > 0
    return Sample(
        tpot_ms=run.tpot_p50_s * 1000.0, tokens_per_s=run.tokens_per_s,
        num_drafts=(m.num_drafts or 0) if spec else 0, num_draft_tokens=(m.num_draft_tokens or 0) if spec else 0,
        num_accepted_tokens=(m.num_accepted_tokens or 0) if spec else 0,
        accepted_per_position=list(m.accepted_per_position) if spec else [],
        generation_tokens=(m.generation_tokens if m is not None and m.generation_tokens is not None
                           else float(run.output_tokens)),
        requests=max(1, run.ok), ttft_ms=run.ttft_p50_s * 1000.0 if run.ttft_p50_s else None,
        notes=list(run.notes) + ([] if run.crosscheck.agree else run.crosscheck.problems))


def parse_endpoints(values: list[str]) -> dict[str, str]:
    """``--endpoint-for CONFIG=URL`` (CONFIG: none, ngram-g2, draft_model-g3, ...)."""
    out = {}
    for v in values:
        key, sep, url = v.partition("=")
        if not sep or not key.strip() or not url.strip():
            raise InputError(f'--endpoint-for "{v}" is not CONFIG=URL', "use e.g. --endpoint-for ngram-g2=http://host:8000")
        out[key.strip()] = url.strip()
    return out
