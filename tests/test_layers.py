"""The layering of ../shared/STYLE.md, checked on the source (an import-linter-like contract):

    cli -> api -> capability packages (a DAG, the edges below) -> foundation (errors, models, settings, ...)

- every folder under specops/ is a package (has ``__init__.py``);
- a capability package imports only the capability packages listed for it in ``ALLOWED`` (lazy,
  function-level imports count too) and the foundation; the foundation imports only itself;
- the CLI imports only specops.api, errors and settings (and its own helpers); ``cli/X.py`` calls
  ``api/X.py`` of its own group and no other;
- no import cycle between modules at module level;
- the library never starts the CLI (no ``python -m specops ...`` argv outside specops/cli);
- only specops/k8s imports ``kubernetes``; only specops/engines imports ``vllm``; the library never
  imports typer; CLI modules import nothing heavy at module level, so `specops --help` stays fast.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests.helpers.source import parsed

PKG = Path(__file__).resolve().parents[1] / "specops"

FOUNDATION = {"errors", "models", "settings", "yamlfile", "jsonfile", "modelconfig", "outputs", "playbooks",
              "capabilities", "secrets", "speculation", "progress", "__init__", "__main__"}
"""Modules every layer may import: the error hierarchy, shared types, settings, YAML/JSON/model-config
and playbook loading, output files, secrets, the vLLM capability table (data, no vllm import) and the
progress protocol (what a long wait says)."""

ALLOWED: dict[str, set[str]] = {
    "registry": set(),
    "metrics": set(),
    "engines": {"registry", "metrics"},
    "k8s": {"engines", "registry"},
    "planner": {"engines"},
    "benchmark": {"engines", "metrics"},
    "retrain": {"k8s", "engines", "registry"},
    "checks": {"planner", "benchmark", "engines", "metrics", "registry"},
    "tune": {"planner", "checks", "benchmark", "engines", "metrics", "registry"},
    # drift -> k8s: the monitor's fallback on a Kubernetes deployment re-renders the spec and server-side
    # applies it (specops.k8s.reapply); no cycle, since k8s sits below and retrain already builds on it.
    "drift": {"checks", "retrain", "engines", "k8s", "metrics", "registry"},
    # heal -> k8s: `canary watch` promotes or rolls back a Kubernetes canary (specops.k8s.deploy), as drift's
    # fallback re-applies a spec; k8s imports no capability above engines and registry, so no cycle.
    "heal": {"drift", "checks", "retrain", "engines", "k8s", "metrics", "registry"},
}
"""Capability package -> the capability packages it may import. Read bottom-up: registry and metrics
stand alone; engines records deployments and reads live counters; everything that runs an engine
builds on engines; heal, the closed loop, sits on top."""

API_MAY_IMPORT = set(ALLOWED) | {"api"}
CLI_MAY_IMPORT = {"api", "cli", "errors", "settings", "outputs", "__init__"}
"""outputs: the CLI checks and writes the files its options name (--save, --html) the one way."""


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_module(name: str) -> bool:
    rel = Path(*name.split("."))
    return (PKG.parent / rel).with_suffix(".py").is_file() or (PKG.parent / rel / "__init__.py").is_file()


def _toplevel(body):
    """Statements run at import time: the module body, and the bodies of module-level if/try."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _toplevel(node.body)
            yield from _toplevel(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _toplevel(node.body)
            for h in node.handlers:
                yield from _toplevel(h.body)
            yield from _toplevel(node.orelse)
            yield from _toplevel(node.finalbody)


def _imports(path: Path, top_level_only: bool = False, module: str | None = None) -> list[str]:
    """Absolute names of what ``path`` (the module ``module``, by default the one at that path)
    imports: ``from a import b`` -> a.b when that is a module, else a."""
    tree = parsed(path)
    nodes = list(_toplevel(tree.body)) if top_level_only else list(ast.walk(tree))
    me = (module or _module_name(path)).split(".")
    base = me if path.name == "__init__.py" else me[:-1]
    out = []
    for node in nodes:
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                mod = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            subs = [f"{mod}.{a.name}" for a in node.names if _is_module(f"{mod}.{a.name}")]
            out += subs if subs and len(subs) == len(node.names) else [mod, *subs]
    return out


def _files(sub: str = "") -> list[Path]:
    return sorted((PKG / sub).rglob("*.py"))


def _layer(module: str) -> str | None:
    """specops.X.y -> X (a package or a foundation module); None outside specops."""
    parts = module.split(".")
    if parts[0] != "specops":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def _edges() -> dict[tuple[str, str], list[str]]:
    """(importing layer, imported layer) -> the files, for every specops-internal import."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for f in _files():
        src = _layer(_module_name(f))
        for name in _imports(f):
            dst = _layer(name)
            if dst and dst != src:
                edges[(src, dst)].append(f.relative_to(PKG).as_posix())
    return edges


def package_graph() -> list[str]:
    """The package edges as lines, foundation left out (printed by `python tests/test_layers.py`)."""
    return sorted(f"{a} -> {b}" for a, b in _edges() if b not in FOUNDATION and a not in FOUNDATION)


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


def test_every_folder_of_the_library_is_a_package():
    folders = [d for d in PKG.rglob("*") if d.is_dir() and d.name != "__pycache__"]
    assert [d.relative_to(PKG).as_posix() for d in folders if not (d / "__init__.py").is_file()] == []


def test_every_capability_package_is_in_the_edge_list():
    packages = {d.name for d in PKG.iterdir() if (d / "__init__.py").is_file()}
    assert packages - {"api", "cli"} == set(ALLOWED)


def test_the_allowed_edges_form_a_dag():
    seen: dict[str, int] = {}

    def visit(node: str, stack: tuple[str, ...]) -> None:
        assert node not in stack, " -> ".join((*stack, node))
        if seen.get(node):
            return
        for nxt in ALLOWED[node]:
            visit(nxt, (*stack, node))
        seen[node] = 1

    for pkg in ALLOWED:
        visit(pkg, ())


def test_capability_packages_import_only_their_allowed_packages_and_the_foundation():
    bad = [f"{a} -> {b} ({', '.join(sorted(set(files)))})" for (a, b), files in _edges().items()
           if a in ALLOWED and b not in FOUNDATION and b not in ALLOWED[a]]
    assert bad == []


def test_the_foundation_imports_only_the_foundation():
    bad = [f"{a} -> {b}" for (a, b) in _edges() if a in FOUNDATION - {"__main__"} and b not in FOUNDATION]
    assert bad == []


def test_only_the_cli_imports_the_api_and_the_api_imports_no_cli():
    bad = [f"{a} -> {b}" for (a, b) in _edges() if b == "api" and a != "cli"]
    bad += [f"api -> {b}" for (a, b) in _edges() if a == "api" and b not in API_MAY_IMPORT | FOUNDATION]
    assert bad == []


def test_the_cli_imports_only_the_api_errors_and_settings():
    bad = [f"cli -> {b} ({', '.join(sorted(set(files)))})" for (a, b), files in _edges().items()
           if a == "cli" and b not in CLI_MAY_IMPORT]
    assert bad == []


def test_each_cli_group_calls_only_its_own_api_module():
    from specops.api import GROUPS

    bad = []
    for group in GROUPS:
        for name in _imports(PKG / "cli" / f"{group}.py"):
            if name.startswith("specops.api.") and name.split(".")[2] != group:
                bad.append(f"cli/{group}.py: {name}")
    assert bad == []


def test_no_module_level_import_cycle():
    graph = {_module_name(f): [n for n in _imports(f, top_level_only=True) if n.startswith("specops") and _is_module(n)]
             for f in _files()}
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in graph.get(node, []):
            if nxt == node:
                continue
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [node, nxt]) if nxt in stack else f"{node} -> {nxt}")
            elif nxt not in state:
                visit(nxt, [*stack, node])
        state[node] = 2

    for mod in graph:
        if mod not in state:
            visit(mod, [])
    assert cycles == []


def _argv_literals(path: Path):
    for node in ast.walk(parsed(path)):
        if isinstance(node, (ast.List, ast.Tuple)):
            consts = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            yield consts


@pytest.mark.parametrize("module", ["specops", "specops.cli", "specops.cli.main", "specops.__main__"])
def test_the_library_never_starts_the_cli(module):
    bad = []
    for f in _files():
        rel = f.relative_to(PKG).as_posix()
        if rel.startswith("cli/"):
            continue
        for consts in _argv_literals(f):
            for i, c in enumerate(consts):
                if c == "-m" and i + 1 < len(consts) and consts[i + 1] == module:
                    bad.append(rel)
            if consts and consts[0] == "specops" and len(consts) > 1 and isinstance(consts[1], str):
                bad.append(f"{rel}: {consts[:3]}")
    assert bad == []


def test_the_import_parser_sees_lazy_relative_and_from_package_imports(tmp_path):
    """What the checks above stand on: a forbidden import in any spelling is seen."""
    f = tmp_path / "probe.py"
    f.write_text("import os\n\ndef f():\n    from ..planner import perfmodel\n    from specops import heal\n"
                 "    from . import measurements, nothing_here\n", encoding="utf-8")
    got = set(_imports(f, module="specops.registry.probe"))
    assert got == {"os", "specops.planner.perfmodel", "specops.heal", "specops.registry", "specops.registry.measurements"}
    assert {_layer(n) for n in got} - {None} == {"planner", "heal", "registry"}
    assert _imports(f, top_level_only=True, module="specops.registry.probe") == ["os"]


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


if __name__ == "__main__":  # the package graph, for docs/development.md and issue notes
    print("\n".join(package_graph()))
