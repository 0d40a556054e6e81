"""Shell completion (`specops completion SHELL [--install]`, typer's --install-completion), end to end in a real bash: the
installed script is sourced and its completion function asked, with `specops` on PATH being this
checkout's CLI."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO


def _env(tmp_path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    wrapper = bin_dir / "specops"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m specops "$@"\n')
    wrapper.chmod(0o755)
    return dict(os.environ, HOME=str(tmp_path / "home"), SHELL="/bin/bash", PATH=f"{bin_dir}:{os.environ['PATH']}",
                PYTHONPATH=str(REPO), SPECOPS_HOME=str(tmp_path / "specops"))


def test_completion_install_writes_a_script_bash_sources_and_it_completes(tmp_path):
    env = _env(tmp_path)
    (tmp_path / "home").mkdir()
    r = subprocess.run(["specops", "completion", "bash", "--install"], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    script = tmp_path / "home" / ".bash_completions" / "specops.sh"
    assert f"source '{script}'" in (tmp_path / "home" / ".bashrc").read_text()
    shown = subprocess.run(["specops", "completion", "bash"], env=env, capture_output=True, text=True)
    assert shown.returncode == 0 and shown.stdout.strip() == script.read_text().strip()
    # typer's own flag detects the shell it runs in (here: the bash that calls it) and writes the same
    script.unlink()
    # (`; true`: bash would exec a lone command in its own place, and there would be no bash to detect)
    r = subprocess.run(["bash", "-c", "specops --install-completion; true"], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and "bash completion installed" in r.stdout, r.stdout + r.stderr
    assert script.read_text().strip() == shown.stdout.strip()

    def complete(*words: str) -> list[str]:
        line = " ".join(f"'{w}'" for w in words)
        # bash calls a completion function with the command's name as $1
        ask = (f"source ~/.bashrc; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _specops_completion specops; "
               'printf "%s\\n" "${COMPREPLY[@]}"')
        out = subprocess.run(["bash", "-c", ask], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout.split()

    assert complete("specops", "lin") == ["lineage"]
    assert complete("specops", "lineage", "sh") == ["show"]
    assert complete("specops", "recommend", "--gp") == ["--gpu", "--gpus", "--gpus-available"]


def test_an_unknown_shell_is_one_line_with_the_choices(tmp_path):
    r = subprocess.run(["specops", "completion", "bsh"], env=_env(tmp_path), capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == ('error: unknown shell "bsh". Did you mean "bash"? To fix: use one of: bash, zsh, fish, '
                        "powershell, pwsh.\n")
