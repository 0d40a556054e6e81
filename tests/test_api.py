"""The facade resolves every exported name to a real callable, lazily."""

import subprocess
import sys

import specops.api as api


def test_every_exported_name_resolves_to_a_callable():
    for name in api.__all__:
        assert callable(getattr(api, name)), name


def test_importing_the_facade_loads_no_capability_package():
    code = "import sys, specops.api; print(any(m.startswith('specops.planner') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_recommend_through_the_facade_returns_a_plan():
    plan = api.recommend(api.build_request(model="meta-llama/Llama-3.1-8B-Instruct", gpu="H100"))
    assert plan.method != "" and plan.vllm.argv[:2] == ["vllm", "serve"]
