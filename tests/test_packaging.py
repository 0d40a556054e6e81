"""How docs/install.md says to install specops works: a wheel built from this checkout (`pip wheel .`)
carries the `specops` entry point, its metadata and the playbooks data, and once installed (alone on
the path, outside the checkout) it answers `specops recommend` from its own shipped playbooks."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import zipfile
from email.parser import Parser

from tests.conftest import REPO


def _build(out) -> zipfile.ZipFile:
    """`pip wheel . --no-deps` (offline with the dev extra's hatchling; else pip fetches it to build)."""
    args = [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q", "-w", str(out)]
    if importlib.util.find_spec("hatchling") is not None:
        args.append("--no-build-isolation")
    r = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (wheel,) = out.glob("specops-*-py3-none-any.whl")
    return zipfile.ZipFile(wheel)


def test_the_wheel_has_the_entry_point_the_metadata_and_the_playbooks(tmp_path):
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    whl = _build(tmp_path / "dist")
    names = whl.namelist()
    info = f"specops-{project['version']}.dist-info"
    meta = Parser().parsestr(whl.read(f"{info}/METADATA").decode())
    assert meta["Name"] == "specops" and meta["Version"] == project["version"]
    assert meta["Requires-Python"] == project["requires-python"]
    assert set(project["dependencies"]) <= set(meta.get_all("Requires-Dist"))
    assert "[console_scripts]\nspecops = specops.cli.main:main" in whl.read(f"{info}/entry_points.txt").decode()
    shipped = sorted(p.relative_to(REPO / "playbooks").as_posix() for p in (REPO / "playbooks").rglob("*")
                     if p.is_file() and "__pycache__" not in p.parts)
    assert shipped and all(f"specops/_playbooks/{p}" in names for p in shipped)
    assert not any(n.startswith(("tests/", "docs/", "bench/")) for n in names)

    # installed alone (no checkout on the path, run from elsewhere): the shipped playbooks answer
    site = tmp_path / "site"
    whl.extractall(site)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECOPS_") and k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(site), SPECOPS_HOME=str(tmp_path / "home"))
    code = ("import specops.playbooks as p, specops.cli.main as m, sys; print(p.playbooks_dir()); "
            "sys.argv = ['specops', 'recommend', '--model', 'llama-3.1-8b-instruct', '--gpu', 'H100', '-o', 'json']; "
            "m.main()")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == str(site / "specops" / "_playbooks")
    assert '"method": "eagle3"' in r.stdout
