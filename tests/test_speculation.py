"""The one speculation vocabulary (specops/speculation.py): the method table, the acceptance math and its
one solver, the acceptance type and the EAGLE generation verdict, checked against independent values
(closed forms, hand-computed numbers, vLLM's own lists) and counted: each is defined once."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest

from specops import speculation as sp
from tests.helpers.source import parsed

PKG = Path(__file__).resolve().parents[1] / "specops"


def test_the_planners_literal_is_the_tables_modelled_methods():
    assert typing.get_args(sp.Method) == sp.PLANNED


def test_every_capability_method_row_is_in_the_table_and_vllm_033s_methods_are_too():
    from specops.capabilities import default_table

    rows = default_table().names("method")
    assert rows and set(rows) <= set(sp.METHODS)
    # vLLM 0.33's SpeculativeMethod names (shared/reference), including step5_mtp new in 0.33.0
    for m in ("ngram", "eagle", "eagle3", "mtp", "draft_model", "suffix", "dflash", "dspark", "step5_mtp"):
        assert m in sp.METHODS


def test_schedule_methods_are_the_ones_vllm_033_keeps_on_model_runner_v1():
    # shared/reference corrections: ngram, eagle, eagle3, mtp, draft_model, dflash (suffix gets none)
    assert set(sp.SCHEDULE_METHODS) == {"ngram", "eagle", "eagle3", "mtp", "draft_model", "dflash"}


def test_aliases_resolve_to_vllm_names_and_unknown_methods_are_refused_with_a_fix():
    from specops.errors import InputError

    assert sp.canonical("EAGLE-3.1") == "eagle3" and sp.canonical(" eagle3.1 ") == "eagle3"
    with pytest.raises(InputError) as e:
        sp.check_method("eagel3")
    assert 'Did you mean "eagle3"' in str(e.value) and "eagle3" in e.value.fix


def test_expected_tokens_matches_the_closed_form():
    # (1 − α^(γ+1)) / (1 − α) for α = 0.8, γ = 5: 3.68928
    assert sp.expected_tokens(0.8, 5) == pytest.approx(3.68928)
    # with decay 0.5: 1 + .8 + .8*.4 + .8*.4*.2 = 2.184
    assert sp.expected_tokens(0.8, 3, decay=0.5) == pytest.approx(2.184)


@pytest.mark.parametrize("alpha,k", [(0.3, 1), (0.74, 7), (0.9, 3), (0.05, 5)])
def test_alpha_tau_and_rate_round_trip(alpha, k):
    tau = sum(alpha ** i for i in range(k + 1))
    assert sp.alpha_from_tau(tau, k) == pytest.approx(alpha, abs=1e-9)
    rate = (tau - 1) / k
    assert sp.rate_of_alpha(alpha, k) == pytest.approx(rate)
    assert sp.alpha_from_rate(rate, k) == pytest.approx(alpha, abs=1e-9)


def test_the_vllm_issue_numbers_convert_through_tau():
    # shared/reference: K = 7, τ = 3.53 → accepted/drafted 0.361 while the i.i.d. α is about 0.745
    assert sp.Acceptance(100, 700, 253).rate == pytest.approx(0.3614, abs=1e-4)
    assert sp.alpha_from_tau(3.53, 7) == pytest.approx(0.745, abs=0.005)


def test_bisect_clamps_and_solves_a_monotone_function():
    assert sp.bisect(lambda x: x ** 3, 8.0, 0.0, 10.0) == pytest.approx(2.0)
    assert sp.bisect(lambda x: x, -1.0, 0.0, 1.0) == 0.0 and sp.bisect(lambda x: x, 5.0, 0.0, 1.0) == 1.0


def test_acceptance_without_drafts_is_undefined_not_zero():
    a = sp.Acceptance(0, 0, 0, (0.0, 0.0))
    assert (a.rate, a.tau, a.per_position, a.alpha()) == (None, None, None, None)
    b = sp.Acceptance(10, 30, 15, (8.0, 5.0, 2.0))
    assert (b.rate, b.tau, b.per_position, b.mean_k()) == (0.5, 2.5, [0.8, 0.5, 0.2], 3.0)


@pytest.mark.parametrize("config,name,generation,mismatch", [
    ({"speculators_model_type": "eagle3", "speculators_version": "0.9.0", "fc_norm": True}, "", "3.1", False),
    # speculators 0.9 sets norm_output and norm_before_fc on every EAGLE-3 run: not 3.1
    ({"speculators_model_type": "eagle3", "speculators_version": "0.9.0", "norm_output": True,
      "norm_before_fc": True}, "", "3", False),
    ({"speculators_model_type": "eagle3", "speculators_version": "0.8.1", "norm_output": True}, "", "3.1", False),
    ({"speculators_model_type": "eagle3", "norm_output": True}, "", None, False),
    ({"architectures": ["LlamaForCausalLMEagle3"], "norm_output": True}, "", "3", True),
    ({"architectures": ["LlamaForCausalLMEagle3"]}, "org/llama-eagle3.1-draft", "3.1", False),
    ({"architectures": ["LlamaForCausalLMEagle3"]}, "", "3", False),
    ({"norm_output": True}, "", None, False),
])
def test_eagle_generation_reads_the_trainers_markers(config, name, generation, mismatch):
    g = sp.eagle_generation(config, name)
    assert (g.generation, g.mismatch) == (generation, mismatch), g.reason


# --- one definition of each ----------------------------------------------------------------------------

def _defs():
    """(module, kind, name) for every function and class defined at any level in specops/."""
    out = []
    for path in PKG.rglob("*.py"):
        mod = str(path.relative_to(PKG))
        for node in ast.walk(parsed(path)):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                out.append((mod, node, node.name))
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    if isinstance(t, ast.Name):
                        out.append((mod, node, t.id))
    return out


def _bisection_loops() -> list[str]:
    """Functions that halve an interval themselves: a loop whose body assigns (lo + hi) / 2."""
    found = []
    for path in PKG.rglob("*.py"):
        tree = parsed(path)
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for loop in ast.walk(fn):
                if isinstance(loop, (ast.For, ast.While)) and "(lo + hi) / 2" in ast.unparse(loop):
                    found.append(f"{path.relative_to(PKG)}:{fn.name}")
                    break
    return sorted(set(found))


def test_one_solver():
    assert _bisection_loops() == ["speculation.py:bisect"]


NAMES = set(sp.METHODS)


def _method_lists() -> list[str]:
    """Literal tuples/lists/sets (and Literal[...] types) naming four or more methods, outside the table.
    Dicts keyed by method (per-method parameters such as decay or colours) are data, not vocabulary."""
    found = []
    for path in PKG.rglob("*.py"):
        if path.name == "speculation.py":
            continue
        for node in ast.walk(parsed(path)):
            elts = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else []
            hits = [e.value for e in elts if isinstance(e, ast.Constant) and e.value in NAMES]
            if len(hits) >= 4:
                found.append(f"{path.relative_to(PKG)}:{node.lineno}")
    return sorted(set(found))


def test_one_method_table():
    assert _method_lists() == [], "method names listed outside specops/speculation.py"
    assigned = [m for m, node, name in _defs() if name in ("METHODS", "Method")
                and isinstance(node, (ast.Assign, ast.AnnAssign))
                and isinstance(node.value, (ast.Dict, ast.DictComp, ast.Subscript))
                and "RECORDED_METHODS" not in ast.unparse(node.value)]
    assert assigned == ["speculation.py", "speculation.py"], assigned


NOT_ACCEPTANCE = {"tune/fit.py:tau_of": "tokens per decode step, drafted or not (tune's effective τ, which "
                                        "counts steps without drafts); not vLLM's per-draft τ"}


def test_one_acceptance_type():
    """Counters become acceptance in one place: no ``accepted / draft…`` division outside it."""
    found = []
    for path in PKG.rglob("*.py"):
        if path.name == "speculation.py":
            continue
        for fn in ast.walk(parsed(path)):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            where = f"{path.relative_to(PKG)}:{fn.name}"
            for node in ast.walk(fn):
                if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and where not in NOT_ACCEPTANCE:
                    num, den = ast.unparse(node.left), ast.unparse(node.right)
                    if "accepted" in num and "draft" in den:
                        found.append(f"{where}: {num} / {den}")
    assert sorted(set(found)) == [], found


def test_one_strict_base():
    bases = [(m, name) for m, node, name in _defs() if isinstance(node, ast.ClassDef)
             and any(ast.unparse(b) == "BaseModel" for b in node.bases)]
    assert bases == [("models.py", "Strict")], bases


LAYOUT_FILES = ("spec.yaml", "spec.incumbent.yaml", "engine.json", "engine.log", "engine.log.1", "prompts.jsonl")


def test_one_folder_layout():
    """No module but engines/layout.py spells a file name of the deployment folder (docstrings and
    messages may mention them; a path built from one, ``x / "spec.yaml"``, may not)."""
    found = []
    for path in PKG.rglob("*.py"):
        if path.relative_to(PKG).as_posix() == "engines/layout.py":
            continue
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
                right = node.right
                if isinstance(right, ast.Constant) and right.value in LAYOUT_FILES:
                    found.append(f"{path.relative_to(PKG)}:{node.lineno}")
    assert found == [], found


def test_one_engine_start_and_one_vllm_client():
    """Only engines/local.py spawns processes for an engine (start_engine), and only engines/client.py
    builds /v1/completions or /v1/models URLs."""
    spawns, urls = [], []
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG).as_posix()
        tree = parsed(path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("local.spawn", "spawn") and rel != "engines/local.py":
                spawns.append(f"{rel}:{node.lineno}")
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(
                    ("/v1/completions", "/v1/models", "/v1/chat/completions")) and rel != "engines/client.py":
                urls.append(f"{rel}:{node.lineno}")
    assert spawns == [] and urls == [], (spawns, urls)


def test_no_class_name_is_defined_twice():
    """Names say what they are: no two classes in specops/ share a name (the registry's MeasurementRow is
    not metrics' Measurement, tune's DrafterAcceptance not retrain's DraftAcceptance, ...)."""
    seen: dict[str, list[str]] = {}
    for mod, node, name in _defs():
        if isinstance(node, ast.ClassDef):
            seen.setdefault(name, []).append(mod)
    assert {n: m for n, m in seen.items() if len(m) > 1} == {}
