"""vLLM 0.33's defaults as capability rows: adaptive verification (its start-up refusals), Model Runner
V2 by default and the methods that force V1, EAGLE-3 on MRV2, KV connector + EAGLE/MTP, MTP under
sustained load; and `recommend --adaptive-verification` rendering it only where the rows allow.
Real capability table (playbooks/vllm/capabilities.csv), real planner and CLI (in process)."""

from __future__ import annotations

import json

import pytest

from specops.capabilities import default_table
from specops.engines.adaptive import with_adaptive_verification
from specops.engines.argv import LaunchConfig, render_argv, speculative_config
from specops.engines.bugs import audit, known_bugs
from specops.errors import CapabilityError


def _cfg(**kw) -> LaunchConfig:
    base = dict(vllm_version="0.33.0", model="m", method="eagle3", draft_model="d", num_speculative_tokens=3,
                architecture="dense")
    return LaunchConfig(**{**base, **kw})


def _issues(cfg) -> set[str]:
    return {f.row.issue() for f in audit(cfg)[1] if f.status == "applies"}


def test_model_runner_v2_is_the_0_33_default_except_for_the_methods_that_force_v1():
    assert audit(_cfg())[0]["model_runner"] == "v2"
    assert audit(_cfg(parallel_drafting=True))[0]["model_runner"] == "v1"  # P-EAGLE forces V1
    assert audit(_cfg(method="suffix", draft_model=None))[0]["model_runner"] == "v1"
    assert audit(_cfg(vllm_version="0.32.0"))[0]["model_runner"] is None  # not known before 0.33.0
    assert "vllm#40551" in _issues(_cfg())  # EAGLE-3 on MRV2: the default path warns
    assert "vllm#40551" not in _issues(_cfg(parallel_drafting=True))


def test_adaptive_verification_is_rendered_into_the_speculative_config_on_0_33():
    on = with_adaptive_verification(_cfg())
    assert speculative_config(on)["enable_adaptive_verification"] is True
    argv = render_argv(on, entrypoint="console")
    assert json.loads(argv[argv.index("--speculative-config") + 1])["enable_adaptive_verification"] is True
    assert audit(on)[0]["adaptive_verification"] == "on"


@pytest.mark.parametrize("change, why", [
    (dict(extra_args=["--enable-lora"]), "LoRA"),
    (dict(enforce_eager=True), "FULL CUDA graphs"),
    (dict(extra_args=["--pipeline-parallel-size", "2"]), "pipeline parallelism"),
    (dict(method="ngram", draft_model=None), "model-based drafter"),
    (dict(method="suffix", draft_model=None), "model-based drafter"),
])
def test_the_start_up_refusals_are_refused_before_launch(change, why):
    with pytest.raises(CapabilityError) as exc:
        with_adaptive_verification(_cfg(**change))
    assert why in exc.value.message and "capabilities.csv" in exc.value.fix
    # the same rows refuse a launch that asks for it directly (deploy, the gate)
    with pytest.raises(CapabilityError):
        known_bugs(_cfg(adaptive_verification=True, **change))


def test_before_0_33_there_is_no_adaptive_verification():
    with pytest.raises(CapabilityError) as exc:
        with_adaptive_verification(_cfg(vllm_version="0.32.0"))
    assert "0.33.0 and later" in exc.value.message


def test_kv_connector_and_mtp_rows_warn_with_their_issues():
    kv = ["--kv-transfer-config", '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}']
    assert audit(_cfg(extra_args=kv))[0]["kv_connector"] == "any"
    assert any("LMCache#3388" in f.row.name for f in audit(_cfg(extra_args=kv))[1] if f.status == "applies")
    mtp = audit(_cfg(method="mtp", draft_model=None))[1]
    assert any("vllm#40756" in f.row.name and f.row.effect == "warn" for f in mtp if f.status == "applies")


def test_every_new_row_carries_evidence_from_the_wheel_or_the_reference():
    rows = [r for r in default_table().rows if r.first == (0, 33, 0) and ("adaptive" in r.name.lower()
            or "runner" in r.name.lower() or "#40551" in r.name or "#40756" in r.name or "KV connector" in r.name)]
    assert len(rows) >= 8
    for r in rows:
        assert r.evidence and ("vllm/" in r.evidence or "reference" in r.evidence), r.name


def _recommend(*extra):
    from tests.cli.inproc import run_main

    return run_main("recommend", "--model", "llama-3.1-8b-instruct", "--gpu", "H100", "--vllm-version", "0.33.0",
                    "-o", "json", *extra)


def test_recommend_renders_adaptive_verification_where_the_rows_allow_it():
    from tests.cli.inproc import run_main

    code, out, err = _recommend("--method", "eagle3", "--adaptive-verification")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["vllm"]["speculative_config"]["enable_adaptive_verification"] is True
    assert any("adaptive verification is on" in w and "realized gain" in w for w in plan["warnings"])
    # an n-gram plan: the rows refuse it, so it is not rendered and the plan says why
    code, out, err = _recommend("--method", "ngram", "--adaptive-verification")
    assert code == 0, err
    plan = json.loads(out)
    assert "enable_adaptive_verification" not in (plan["vllm"]["speculative_config"] or {})
    assert any("--adaptive-verification not rendered" in w for w in plan["warnings"])
    # the deployment spec keeps it, so deploy launches what recommend showed
    code, out, err = run_main("recommend", "--model", "llama-3.1-8b-instruct", "--gpu", "H100", "--vllm-version",
                              "0.33.0", "--method", "eagle3", "--adaptive-verification", "-o", "deployment")
    assert code == 0 and "adaptive_verification: true" in out, err
    # an older release: one line, exit 2, the fix says which version has it
    code, _, err = run_main("recommend", "--model", "llama-3.1-8b-instruct", "--gpu", "H100", "--vllm-version",
                            "0.32.0", "--method", "eagle3", "--adaptive-verification", "-o", "json")
    assert code == 2 and "To fix: use --vllm-version 0.33.0" in err and "Traceback" not in err, err
