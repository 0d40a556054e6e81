"""The orchestration layer: one api module per CLI group, and shortcuts that resolve lazily."""

import importlib
import subprocess
import sys

import specops.api as api
from specops.cli.main import COMMAND_MODULES


def test_every_exported_name_resolves_to_a_callable():
    for name in api.__all__:
        assert callable(getattr(api, name)), name


def test_every_cli_group_has_its_api_module_and_no_shortcut_shadows_one():
    assert tuple(COMMAND_MODULES) == api.GROUPS
    for group in api.GROUPS:
        assert importlib.import_module(f"specops.api.{group}").__doc__, group
        assert group not in api.__all__


def test_importing_the_facade_loads_no_capability_package():
    code = "import sys, specops.api; print(any(m.startswith('specops.planner') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_recommend_through_the_facade_returns_a_plan():
    plan = api.recommend_plan(api.build_request(model="meta-llama/Llama-3.1-8B-Instruct", gpu="H100"))
    assert plan.method != "" and plan.vllm.argv[:2] == ["vllm", "serve"]
    from specops.api import recommend

    assert recommend.recommend_with_defaults is api.recommend_plan
