"""The layering rules of ../shared/STYLE.md, checked on the source (an import-linter-like contract):

- only specops/k8s imports `kubernetes`; only specops/engines imports `vllm`;
- the library never imports typer or the CLI (cli → api → capabilities → models/errors/settings);
- CLI modules import nothing heavy at module level (typer and the standard library only), so
  `specops --help` stays fast.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "specops"


def _imports(path: Path, top_level_only: bool = False):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def _files(sub: str = ""):
    return sorted((PKG / sub).rglob("*.py"))


def _offenders(module_prefix: str, allowed_dirs: tuple[str, ...]):
    out = []
    for f in _files():
        rel = f.relative_to(PKG).as_posix()
        if rel.startswith(allowed_dirs):
            continue
        for name in _imports(f):
            if name == module_prefix or name.startswith(module_prefix + "."):
                out.append(f"{rel}: {name}")
    return out


def test_only_the_k8s_package_imports_kubernetes():
    assert _offenders("kubernetes", ("k8s/",)) == []


def test_only_the_engines_package_imports_vllm():
    assert _offenders("vllm", ("engines/",)) == []


def test_the_library_never_imports_typer_or_the_cli():
    assert _offenders("typer", ("cli/",)) == []
    assert _offenders("specops.cli", ("cli/", "__main__.py")) == []


def test_cli_modules_import_only_typer_and_the_standard_library_at_module_level():
    stdlib = set(sys.stdlib_module_names)
    bad = []
    for f in _files("cli"):
        for name in _imports(f, top_level_only=True):
            root = name.split(".")[0]
            if root in stdlib or root in ("typer", "__future__"):
                continue
            if name in ("specops.cli.output", "specops.cli", "specops.errors"):
                continue
            bad.append(f"{f.name}: {name}")
    assert bad == []
