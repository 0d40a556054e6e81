"""The local process layer with real processes (no vLLM): process groups, identity, stop, health wait."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specops.engines import local
from specops.errors import EngineError

pytestmark = pytest.mark.costly  # real process groups started and stopped (tests/helpers/tiers.py)

# A leader that starts two grandchildren and ignores nothing: the shape of vLLM's API server +
# EngineCore + worker tree.
TREE = ("import subprocess, sys, time\n"
        "kids = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']) for _ in range(2)]\n"
        "print('children', *[k.pid for k in kids], flush=True)\n"
        "time.sleep(300)\n")

# A leader whose child ignores SIGTERM: only SIGKILL stops it.
STUBBORN = ("import subprocess, sys, time\n"
            "subprocess.Popen([sys.executable, '-c', 'import signal, time; "
            "signal.signal(signal.SIGTERM, signal.SIG_IGN); print(\"ready\", flush=True); time.sleep(300)'])\n"
            "time.sleep(300)\n")


def _spawn(code: str, tmp_path):
    proc = local.spawn([sys.executable, "-c", code], {"PATH": "/usr/bin:/bin"}, tmp_path / "log", tmp_path)
    deadline = time.monotonic() + 60
    ready = "ready" if code is STUBBORN else "children"
    while time.monotonic() < deadline and (len(local.group_members(proc.pid)) < 3 - (code is STUBBORN)
                                           or ready not in (tmp_path / "log").read_text()):
        time.sleep(0.1)
    return proc


def test_spawned_engine_runs_in_its_own_process_group_with_its_children(tmp_path):
    proc = _spawn(TREE, tmp_path)
    try:
        members = local.group_members(proc.pid)
        assert proc.pid in members and len(members) == 3
        assert local.alive(proc.pid, local.process_start_time(proc.pid))
    finally:
        local.stop_group(proc.pid, None, grace_s=5)


def test_stop_terminates_the_whole_group_and_leaves_no_orphans(tmp_path):
    proc = _spawn(TREE, tmp_path)
    start = local.process_start_time(proc.pid)
    members = local.group_members(proc.pid)
    assert local.stop_group(proc.pid, start, grace_s=10) == "stopped"
    assert local.group_members(proc.pid) == []
    assert not any(local.alive(pid, None) for pid in members)


def test_stop_escalates_to_sigkill_when_a_child_ignores_sigterm(tmp_path):
    proc = _spawn(STUBBORN, tmp_path)
    assert len(local.group_members(proc.pid)) == 2
    assert local.stop_group(proc.pid, local.process_start_time(proc.pid), grace_s=1) == "killed"
    assert local.group_members(proc.pid) == []


def test_a_pid_with_another_start_time_is_never_signalled(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        real = local.process_start_time(proc.pid)
        assert not local.alive(proc.pid, real - 1)
        assert local.stop_group(proc.pid, real - 1, grace_s=1) == "not running"
        assert proc.poll() is None  # still running: it was not ours
    finally:
        proc.kill()
        proc.wait()


def test_port_in_use_is_detected_before_start():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert local.port_in_use("127.0.0.1", port)
    assert not local.port_in_use("127.0.0.1", port)


def test_engine_that_exits_during_startup_reports_its_last_log_lines(tmp_path):
    code = "import sys; print('loading weights'); print('ValueError: bad shard', flush=True); sys.exit(3)"
    proc = local.spawn([sys.executable, "-c", code], {"PATH": "/usr/bin:/bin"}, tmp_path / "engine.log", tmp_path)
    with pytest.raises(EngineError, match=r"exit code 3.*ValueError: bad shard") as exc:
        local.wait_healthy("http://127.0.0.1:9", proc, timeout_s=30, log_path=tmp_path / "engine.log")
    assert "\n" not in exc.value.one_line() and "To fix:" in exc.value.one_line()
    assert local.group_members(proc.pid) == []


def test_engine_env_is_contained_offline_and_keeps_the_api_key_out_of_the_record(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_should_not_leak")
    env = local.engine_env(tmp_path / "dep", tmp_path / "cache", cpu=True, kv_space_gib=None, extra={"A": "1"},
                           api_key="sk-secret")
    assert env["TMPDIR"] == str(local.tmpdir_for(tmp_path / "dep"))
    assert env["VLLM_CACHE_ROOT"] == str(tmp_path / "cache" / "vllm")
    assert env["HF_HUB_OFFLINE"] == env["TRANSFORMERS_OFFLINE"] == env["VLLM_NO_USAGE_STATS"] == "1"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1" and env["A"] == "1"
    assert env["VLLM_API_KEY"] == "sk-secret" and env["HF_TOKEN"] == "hf_should_not_leak"  # inherited by reference
    shown = local.contained_overrides(env)
    assert shown["VLLM_API_KEY"] == shown["HF_TOKEN"] == local.REDACTED and "hf_should_not_leak" not in repr(shown)
    assert "sk-secret" not in repr(shown)


def test_the_suites_engine_env_hook_reaches_the_engine_and_the_spec_env_still_wins(tmp_path, monkeypatch):
    """SPECOPS_TEST_ENGINE_ENV (tests/conftest.py sets it for the suite): its pairs are added to the engine's
    environment, the spec's own env wins over them, the hook itself never reaches vLLM, and without it
    nothing is added (users' launches)."""
    monkeypatch.setenv("SPECOPS_TEST_ENGINE_ENV", "VLLM_ENABLE_V1_MULTIPROCESSING=0 OMP_NUM_THREADS=1 junk")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    env = local.engine_env(tmp_path / "dep", tmp_path / "cache", cpu=True, kv_space_gib=None,
                           extra={"OMP_NUM_THREADS": "4"}, api_key=None)
    assert env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0" and env["OMP_NUM_THREADS"] == "4"
    assert "junk" not in env and not [k for k in env if k.startswith("SPECOPS_")]
    monkeypatch.setenv("SPECOPS_TEST_ENGINE_ENV", "")
    env = local.engine_env(tmp_path / "dep", tmp_path / "cache", cpu=True, kv_space_gib=None, extra={}, api_key=None)
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in env and "OMP_NUM_THREADS" not in env


def test_a_long_deployment_folder_gets_a_short_tmpdir_link_for_zmq_socket_paths(tmp_path):
    deep = tmp_path / ("d" * 80) / "deployments" / "tiny"
    tmp = local.make_tmpdir(deep)
    try:
        assert len(str(tmp)) + len("/12345678-1234-1234-1234-123456789012") < 107
        (tmp / "probe").write_text("x")
        assert (deep / "tmp" / "probe").read_text() == "x"  # the files land in the deployment folder
    finally:
        local.remove_tmpdir_link(deep)
    assert not tmp.exists()
    assert local.tmpdir_for(Path("/srv/specops/deployments/tiny")) == Path("/srv/specops/deployments/tiny/tmp")
