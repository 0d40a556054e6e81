"""Issue 21: launches that start, no silent substitutions, the wider catalog. Real catalogs and planner;
nothing faked (recommend only computes)."""

from __future__ import annotations

import pytest

from specops.capabilities import released_version
from specops.errors import FitError, InputError
from specops.planner.catalog import load_catalogs
from specops.planner.recommend import recommend
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


def test_awq_without_a_checkpoint_is_refused_and_the_fixes_run():
    with pytest.raises(InputError) as exc:
        plan(model="llama-3.2-3b-instruct", gpu="T4", quantization="awq")
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


def test_deployment_output_keeps_warnings_and_loads(tmp_path):
    from specops.api.recommend import deployment_yaml
    from specops.engines.spec import load_spec

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
