"""The entry points themselves, through real processes (the rest of the suite runs the same `main`
in-process, tests/cli/inproc.py): `python -m specops` and the installed `specops` console script,
exit statuses as a shell sees them, start-up."""

import subprocess
import sys
from pathlib import Path

from specops import __version__


def test_version_prints_package_version(cli_subprocess):
    r = cli_subprocess("--version")
    assert r.returncode == 0
    assert r.stdout.strip() == f"specops {__version__}"


def test_the_installed_console_script_runs_the_same_cli():
    script = Path(sys.executable).parent / "specops"  # pip's entry point for [project.scripts]
    r = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"specops {__version__}"
    bad = subprocess.run([str(script), "no-such-command"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_help_lists_commands_and_exits_zero(cli_subprocess):
    r = cli_subprocess("--help")
    assert r.returncode == 0
    assert "Usage" in r.stdout


def test_unknown_command_is_a_usage_error_without_traceback(cli_subprocess):
    r = cli_subprocess("no-such-command")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr


def test_in_process_and_subprocess_runs_agree(cli, cli_subprocess):
    """The in-process runner gives what a real process gives (output, exit status, one-line errors)."""
    for args in (["--version"], ["no-such-command"], ["recommend", "--help"],
                 ["recommend", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100", "-o", "json"]):
        a, b = cli(*args), cli_subprocess(*args)
        assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr), args
