"""The library leaves the process environment as it found it (issue 35, item 2a).

specops/retrain/hf.py used to set HF_HUB_OFFLINE=1 and TRANSFORMERS_OFFLINE=1 in ``os.environ`` when
it loaded a model: every later Hub call in the process (and every child it started) went offline.
It now passes ``local_files_only=True`` to the loaders instead. Nothing is faked here: the committed
tiny draft model is loaded with the real transformers, and the CLI module is imported in a real
fresh interpreter.

The autouse ``specops_home`` fixture (tests/conftest.py) restores the environment after each test,
which hid the leak from the rest of the suite; these tests compare inside the test, before it runs.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.source import parsed

REPO = Path(__file__).resolve().parents[2]
DRAFT = REPO / "tests" / "assets" / "tiny-models" / "draft-v1"
HUB_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def test_loading_a_model_in_process_leaves_os_environ_unchanged(monkeypatch):
    """transformers' model classes are imported first: that import sets TORCHINDUCTOR_CACHE_DIR
    (torch/_inductor/runtime/cache_dir_utils.py, once per process: torch's doing, not specops's); what is
    compared is what specops's loading does."""
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: F401

    from specops.retrain.hf import greedy_tokens, load_causal_lm, load_tokenizer

    for var in HUB_VARS:  # as in a user's shell: not set (a set value would hide a setdefault)
        monkeypatch.delenv(var, raising=False)
    before = dict(os.environ)
    tok = load_tokenizer(DRAFT)
    model = load_causal_lm(DRAFT, role="draft")
    ids = tok("def main():", add_special_tokens=False)["input_ids"]
    assert len(greedy_tokens(model, ids, 4)) == 4  # the model really loaded and runs
    assert dict(os.environ) == before
    assert not any(var in os.environ for var in HUB_VARS)


def test_importing_the_cli_leaves_os_environ_unchanged():
    """typer reads TYPER_USE_RICH once, at import: specops.cli.main sets it for that import only. A fresh
    interpreter (the module is already imported in this one) compares the environment around the import
    and shows which help typer chose."""
    code = ("import os, json; before = dict(os.environ); import specops.cli.main, typer.core; "
            "after = dict(os.environ); print(json.dumps([sorted(set(before.items()) ^ set(after.items())), "
            "typer.core.HAS_RICH]))")
    env = {k: v for k, v in os.environ.items() if k != "TYPER_USE_RICH"}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert out.strip() == "[[], false]"  # nothing changed, and typer still got plain help
    out = subprocess.run([sys.executable, "-c", code], env={**env, "TYPER_USE_RICH": "1"}, cwd=REPO,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.strip() == "[[], true]"  # a user's own setting is read and kept


def test_the_scoped_setting_in_recommend_is_put_back(monkeypatch):
    from specops.cli.recommend import _no_pydantic_plugins

    monkeypatch.delenv("PYDANTIC_DISABLE_PLUGINS", raising=False)
    with _no_pydantic_plugins():
        assert os.environ["PYDANTIC_DISABLE_PLUGINS"] == "__all__"
    assert "PYDANTIC_DISABLE_PLUGINS" not in os.environ
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "mine")
    with _no_pydantic_plugins():
        pass
    assert os.environ["PYDANTIC_DISABLE_PLUGINS"] == "mine"


def _environ_writes(tree: ast.AST) -> list[int]:
    """Lines that write the process environment: ``os.environ[...] = / del``, ``os.environ.<mutator>(...)``,
    ``os.putenv`` / ``os.unsetenv``."""
    def is_environ(node) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name)
                and node.value.id == "os")

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            if any(isinstance(t, ast.Subscript) and is_environ(t.value) for t in targets) or \
                    any(is_environ(t) for t in targets):
                lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            if is_environ(f.value) and f.attr in ("setdefault", "update", "pop", "popitem", "clear", "__setitem__"):
                lines.append(node.lineno)
            if isinstance(f.value, ast.Name) and f.value.id == "os" and f.attr in ("putenv", "unsetenv"):
                lines.append(node.lineno)
    return sorted(lines)


# the only writes left, each undone before the function returns (tested above)
SCOPED = {"specops/cli/main.py": 2, "specops/cli/recommend.py": 2}


def test_no_other_library_code_writes_the_environment():
    found = {}
    for path in sorted((REPO / "specops").rglob("*.py")):
        lines = _environ_writes(parsed(path))
        if lines:
            found[str(path.relative_to(REPO))] = len(lines)
    assert found == SCOPED, "a new write to os.environ in specops/: pass settings to the call instead"
