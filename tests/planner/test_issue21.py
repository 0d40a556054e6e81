"""Issue 21: launches that start, no silent substitutions, the wider catalog. Real catalogs and planner;
nothing faked (recommend only computes)."""

from __future__ import annotations

import pytest

from specops.capabilities import released_version
from specops.errors import FitError, InputError
from specops.planner.catalog import load_catalogs
from specops.planner.recommend import recommend
from specops.planner.render import to_deployment
from specops.planner.types import RecommendRequest


def plan(**kw):
    kw.setdefault("gpu", "H100")
    return recommend(RecommendRequest(**kw))


def test_tp_must_divide_heads_and_the_fix_runs():
    with pytest.raises(InputError) as exc:
        plan(model="llama-3.1-8b-instruct", gpus=3)
    assert "use --gpus 1, 2, 4, 8" in exc.value.one_line()
    for n in (1, 2, 4, 8):
        assert plan(model="llama-3.1-8b-instruct", gpus=n).tensor_parallel_size == n


def test_awq_launches_the_catalog_checkpoint():
    p = plan(model="llama-3.1-8b-instruct", gpu="T4", quantization="awq")
    assert p.vllm.argv[2] == "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4"
    assert "--quantization" not in p.vllm.argv


def test_awq_without_a_checkpoint_predicts_withholds_the_launch_and_the_fixes_run():
    # the prediction is about the configuration (3B at AWQ's bits), the launch about artifacts (no AWQ checkpoint)
    p = plan(model="llama-3.2-3b-instruct", gpu="T4", quantization="awq")
    sixteen = plan(model="llama-3.2-3b-instruct", gpu="T4")
    assert p.memory.weights_gib < 0.4 * sixteen.memory.weights_gib and p.predicted.speedup > 0
    assert p.vllm.argv == [] and p.vllm.speculative_config is None
    (w,) = p.vllm.withheld
    assert w.artifact == "checkpoint" and "--quantization fp8" in w.fix
    with pytest.raises(InputError) as exc:
        to_deployment(p)
    assert "--quantization fp8" in exc.value.one_line()
    assert plan(model="llama-3.2-3b-instruct", gpu="T4", quantization="fp8").model == "meta-llama/Llama-3.2-3B-Instruct"
    p = plan(model="someorg/Llama-3.2-3B-Instruct-AWQ", params_b=3.21, gpu="T4", quantization="awq")
    assert p.vllm.argv[2] == "someorg/Llama-3.2-3B-Instruct-AWQ"


@pytest.mark.parametrize("text", ["0.99.0", "0.34.0", "0.8.9", "0.1.0"])
def test_only_released_versions(text):
    with pytest.raises(InputError):
        released_version(text)


def test_released_version_fix_names_real_releases():
    with pytest.raises(InputError) as exc:
        released_version("0.8.9")
    assert "0.8.5" in exc.value.one_line()
    assert released_version("0.8.5") == (0, 8, 5)


def test_old_vllm_unpinned_picks_what_it_has():
    p = plan(model="llama-3.1-8b-instruct", vllm_version="0.5.0")
    assert p.method in ("ngram", "draft_model", "none")
    assert "--speculative-config" not in p.vllm.argv


def test_a_plan_that_fits_no_request_is_refused_and_its_fixes_fit():
    kw = dict(model="meta-llama/Llama-3.3-70B-Instruct", gpus=2, context_len=65536, batch_size=16, method="eagle3")
    with pytest.raises(FitError) as exc:
        plan(**kw)
    msg = exc.value.one_line()
    assert "--gpus 4" in msg and "--method none" in msg
    assert plan(**{**kw, "gpus": 4}).memory.max_batch_that_fits >= 1
    assert plan(**{**kw, "method": "none"}).memory.max_batch_that_fits >= 1


def test_fewer_than_batch_names_the_predicted_batch():
    p = plan(model="meta-llama/Llama-3.3-70B-Instruct", gpus=2, context_len=65536, batch_size=16)
    assert any(f"batch {p.predicted.effective_batch}, not --batch-size 16" in w for w in p.warnings)


def test_ambiguous_gpu_refused_with_choices_and_nvidia_smi_names():
    cat = load_catalogs()
    with pytest.raises(InputError) as exc:
        cat.gpu("A100")
    assert "A100-40GB" in exc.value.one_line() and "A100-80GB" in exc.value.one_line()
    assert cat.gpu("NVIDIA H100 80GB HBM3").name == "H100"
    assert cat.gpu("NVIDIA A100-SXM4-80GB").name == "A100-80GB"
    assert cat.gpu("AMD Instinct MI300X").name == "MI300X"


@pytest.mark.parametrize("name", ["GB200", "GB300", "B300", "H800", "A800", "H20", "MI325X", "MI355X"])
def test_new_gpus_have_sources(name):
    g = load_catalogs().gpu(name)
    assert "http" in g.source and g.memory_gib > 0
    assert plan(model="llama-3.1-8b-instruct", gpu=name).gpu == name


def test_base_and_instruct_kept_apart():
    cat = load_catalogs()
    assert cat.model("Llama-3.1-8B").id == "meta-llama/Llama-3.1-8B"
    assert cat.model("meta-llama/Llama-3.1-8B").id == "meta-llama/Llama-3.1-8B"
    assert cat.model("Llama-3.1-8B-Instruct").id == "meta-llama/Llama-3.1-8B-Instruct"
    assert not [d for d in cat.model("Llama-3.1-8B").drafts if d.method == "eagle3"]
    assert cat.catalog_model("llama-2-7b-chat") is None  # not Vicuna


def test_deployment_output_keeps_warnings_and_loads(tmp_path, monkeypatch):
    from specops.api.recommend import deployment_yaml
    from specops.engines.spec import load_spec
    from tests.helpers.hf_cache import hf_cache

    for k, v in hf_cache(tmp_path / "hf", "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4",
                         "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B").items():
        monkeypatch.setenv(k, v)  # pinned from the Hugging Face cache (unpinned specs do not load: tests/cli)

    p = plan(model="llama-3.1-8b-instruct", gpu="T4", quantization="awq")
    text = deployment_yaml(p)
    assert text.startswith("# specops recommend: ")
    assert all(f"# warning: {' '.join(w.split())}" in text for w in p.warnings)
    f = tmp_path / "spec.yaml"
    f.write_text(text)
    assert load_spec(f).target.model == p.model


def test_config_float_version_refused_then_quoted_works(tmp_path, monkeypatch):
    from specops.errors import ConfigFileError
    from specops.settings import setting

    monkeypatch.setenv("SPECOPS_HOME", str(tmp_path))
    monkeypatch.delenv("SPECOPS_VLLM_VERSION", raising=False)
    (tmp_path / "config.yaml").write_text("vllm_version: 0.30\n")
    with pytest.raises(ConfigFileError) as exc:
        setting("vllm_version")
    assert "quote it" in exc.value.one_line()
    (tmp_path / "config.yaml").write_text('vllm_version: "0.30.0"\n')
    assert setting("vllm_version") == "0.30.0"


# --- the methods vLLM serves but the planner does not model; P-EAGLE --------------------------------------


@pytest.mark.parametrize("method", ["dspark", "step5_mtp"])
def test_unmodelled_methods_are_refused_naming_what_is_modelled(method):
    from specops.api.recommend import build_request
    from specops.speculation import METHODS, PLANNED

    assert METHODS[method].modelled is False  # served by vLLM 0.33 (method table), no prior
    with pytest.raises(InputError) as exc:
        build_request(model="llama-3.1-8b-instruct", gpu="H100", method=method)
    line = exc.value.one_line()
    assert f"--method {method} is served by vLLM but not modelled" in line and "To fix:" in line
    assert all(m in line for m in PLANNED)
    assert build_request(model="llama-3.1-8b-instruct", gpu="H100", method="eagle3").method == "eagle3"  # the fix


def test_every_served_unmodelled_method_gets_the_same_refusal():
    from specops.api.recommend import build_request
    from specops.speculation import METHODS

    for name, info in METHODS.items():
        if info.modelled or info.family == "tooling":
            continue
        with pytest.raises(InputError) as exc:
            build_request(model="llama-3.1-8b-instruct", gpu="H100", method=name)
        assert "not modelled" in exc.value.one_line(), name


def test_parallel_drafting_renders_p_eagle_and_survives_the_deployment_spec(tmp_path, monkeypatch):
    from specops.api.recommend import build_request, deployment_yaml
    from specops.engines.argv import speculative_config
    from specops.engines.spec import load_spec
    from tests.helpers.hf_cache import hf_cache

    for k, v in hf_cache(tmp_path / "hf", "meta-llama/Llama-3.1-8B-Instruct", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B").items():
        monkeypatch.setenv(k, v)  # pinned from the Hugging Face cache

    req = build_request(model="llama-3.1-8b-instruct", gpu="H100", parallel_drafting=True)
    assert req.method == "eagle3"  # P-EAGLE pins eagle3
    p = recommend(req)
    sc = p.vllm.speculative_config
    assert sc["method"] == "eagle3" and sc["parallel_drafting"] is True and sc["model"]
    assert any("not modelled" in w and "sequential EAGLE-3" in w for w in p.warnings)
    f = tmp_path / "spec.yaml"
    f.write_text(deployment_yaml(p))
    spec = load_spec(f)
    assert spec.speculative.parallel_drafting is True
    assert speculative_config(spec.launch_config())["parallel_drafting"] is True
    assert "parallel_drafting" not in (plan(model="llama-3.1-8b-instruct", method="eagle3").vllm.speculative_config or {})


def test_parallel_drafting_needs_0_16_and_eagle3():
    from specops.api.recommend import build_request
    from specops.errors import CapabilityError

    with pytest.raises(CapabilityError) as exc:
        build_request(model="llama-3.1-8b-instruct", gpu="H100", parallel_drafting=True, vllm_version="0.15.1")
    assert "0.16.0" in exc.value.one_line()
    p = recommend(build_request(model="llama-3.1-8b-instruct", gpu="H100", parallel_drafting=True, vllm_version="0.16.0"))
    assert p.vllm.speculative_config["parallel_drafting"] is True  # the fix runs
    with pytest.raises(InputError) as exc:
        build_request(model="llama-3.1-8b-instruct", gpu="H100", parallel_drafting=True, method="ngram")
    assert "--method eagle3" in exc.value.one_line()


# --- public EAGLE-3 drafts ----------------------------------------------------------------------------------


def test_public_eagle3_drafts_have_sources_and_are_used():
    cat = load_catalogs()
    for m in cat.models:
        for d in m.drafts:
            assert d.source, (m.id, d.id)
    assert plan(model="qwen3-235b-a22b", gpu="H200", gpus=8, method="eagle3").draft == \
        "RedHatAI/Qwen3-235B-A22B-speculator.eagle3"
    assert plan(model="gpt-oss-120b", gpu="H200", method="eagle3").draft == "RedHatAI/gpt-oss-120b-speculator.eagle3"
    ids = {d.id for d in cat.model("qwen3-8b").drafts}
    assert {"RedHatAI/Qwen3-8B-speculator.eagle3", "AngelSlim/Qwen3-8B_eagle3"} <= ids


def test_a_draft_newer_than_the_release_is_skipped_or_refused_with_a_fix():
    from specops.errors import CapabilityError

    for m in load_catalogs().models:  # every stated minimum is a real release
        for d in m.drafts:
            if d.min_vllm:
                released_version(d.min_vllm)
    p = plan(model="gpt-oss-120b", gpu="H200", vllm_version="0.17.1")
    assert p.method != "eagle3"
    assert any("skipped (needs vLLM >= 0.18.0)" in s.outcome for s in p.decision_path)
    with pytest.raises(CapabilityError) as exc:
        plan(model="gpt-oss-120b", gpu="H200", vllm_version="0.17.1", draft="RedHatAI/gpt-oss-120b-speculator.eagle3")
    assert "--vllm-version 0.18.0" in exc.value.one_line()
    fixed = plan(model="gpt-oss-120b", gpu="H200", vllm_version="0.18.0", method="eagle3", allow_uncertain=True,
                 draft="RedHatAI/gpt-oss-120b-speculator.eagle3")
    assert fixed.vllm.speculative_config["model"] == "RedHatAI/gpt-oss-120b-speculator.eagle3"


# --- wording, speed-related structure -------------------------------------------------------------------------


@pytest.mark.parametrize(("q", "article"), [("gptq", "a gptq"), ("nvfp4", "a nvfp4"), ("awq", "an awq"),
                                            ("int8", "an int8")])
def test_quantization_refusal_uses_the_right_article(q, article):
    (w,) = plan(model="llama-3.2-3b-instruct", gpu="H100", quantization=q).vllm.withheld
    line = w.line()
    assert f"needs {article} checkpoint" in line and f"at {article} checkpoint" in line
    assert "an gptq" not in line and "an nvfp4" not in line


def test_mistyped_gpu_and_unmodelled_method_refused_before_the_planner_loads(specops_home):
    """A real interpreter: the refusals come before specops.planner.types / perfmodel (pydantic models) load."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from specops.api.recommend import build_request\n"
        "from specops.errors import InputError\n"
        "for kw in ({'gpu': 'H1000'}, {'gpu': 'A100'}, {'gpu': 'H100', 'method': 'dspark'}):\n"
        "    try:\n"
        "        build_request(model='llama-3.1-8b-instruct', **kw)\n"
        "    except InputError as e:\n"
        "        print(e.one_line())\n"
        "print(sorted(m for m in sys.modules if m.startswith(('specops.planner.', 'pydantic'))))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert 'unknown GPU "H1000"' in lines[0] and "ambiguous" in lines[1] and "not modelled" in lines[2]
    loaded = lines[3]
    assert "specops.planner.types" not in loaded and "specops.planner.perfmodel" not in loaded
    assert "pydantic" not in loaded


def test_planner_package_names_resolve_lazily_to_the_same_objects():
    import specops.planner as pkg
    import specops.planner.recommend  # noqa: F401 - the submodule must not shadow the function
    from specops.planner import recommend as fn
    from specops.planner.recommend import recommend as real

    assert fn is real and callable(fn)
    for name in pkg.__all__:
        assert getattr(pkg, name) is not None


def test_disk_cache_recomputes_when_an_input_changes(specops_home, tmp_path, monkeypatch):
    import shutil

    from specops.planner import diskcache
    from specops.playbooks import playbooks_dir

    books = tmp_path / "playbooks"
    shutil.copytree(playbooks_dir(), books)
    monkeypatch.setenv("SPECOPS_PLAYBOOKS", str(books))
    calls = []

    def compute():
        calls.append(1)
        return {"n": len(calls)}

    assert diskcache.cached("probe", compute) == {"n": 1}
    assert diskcache.cached("probe", compute) == {"n": 1} and len(calls) == 1  # read back, not recomputed
    assert list((specops_home / "cache").glob("probe-*.cache"))
    (books / "decision-tree.yaml").write_text((books / "decision-tree.yaml").read_text() + "\n# changed\n")
    diskcache._key.cache_clear()
    assert diskcache.cached("probe", compute) == {"n": 2}  # a changed input: a new key, computed again
    assert len(list((specops_home / "cache").glob("probe-*.cache"))) == 1  # the stale result is removed
    blocked = tmp_path / "blocked-home"
    blocked.mkdir()
    (blocked / "cache").write_text("a file where the cache folder would be")  # unwritable even as root
    monkeypatch.setenv("SPECOPS_HOME", str(blocked))
    assert diskcache.cached("probe", compute) == {"n": 3}  # computed and returned, nothing stored
    diskcache._key.cache_clear()


def test_the_registry_is_loaded_only_when_it_holds_acceptance(specops_home):
    """A real SQLite registry: with deployments but no acceptance measured, recommend does not import the
    registry (sqlmodel); once a measurement with per-position acceptance is stored, it becomes a prior."""
    import os
    import subprocess
    import sys
    from datetime import datetime, timedelta

    from specops.api.recommend import _sqlite_has_acceptance, build_request, recommend_with_defaults
    from specops.registry import open_registry
    from specops.settings import database_url

    reg = open_registry()
    reg.register_target("acme/tiny-target", name="tiny-target", version="v1")
    reg.register_draft("acme/tiny-draft", name="tiny-draft", version="v1", target="tiny-target@v1",
                       method="draft_model", trained_on="test", trainer_cmd="test")
    reg.upsert_deployment("tiny", target_ref="tiny-target@v1", endpoint="http://127.0.0.1:9", platform="local",
                          status="running", method="draft_model", num_speculative_tokens=3, vllm_version="0.32.0",
                          served_model_name="tiny", draft_ref="tiny-draft@v1", argv_redacted=["vllm", "serve"])
    path = database_url()[len("sqlite:///"):]
    assert not _sqlite_has_acceptance(path)
    code = ("import sys\nfrom specops.api.recommend import build_request, recommend_with_defaults\n"
            "p = recommend_with_defaults(build_request(model='llama-3.1-8b-instruct', gpu='H100'))\n"
            "print('specops.registry' in sys.modules, 'sqlmodel' in sys.modules, p.learned_from)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False False []"
    t = datetime(2026, 11, 1, 12, 0)
    reg.record_measurement("tiny", window_start=t, window_end=t + timedelta(minutes=1), acceptance_rate=None,
                           mean_acceptance_length=2.6, per_position=[0.8, 0.5, 0.3], num_drafts=300,
                           num_draft_tokens=900, num_accepted_tokens=480, task="code", source="bench")
    reg.close()
    assert _sqlite_has_acceptance(path)
    p = recommend_with_defaults(build_request(model="llama-3.1-8b-instruct", gpu="H100"))
    assert any(n.startswith("registry: 1 measured acceptance prior(s), 300 verify steps") for n in p.learned_from)
