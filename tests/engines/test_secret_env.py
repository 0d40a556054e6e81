"""What docs/deploy.md says about secrets, checked on the real dry run and environment: the Hugging Face
token is inherited by the engine (redacted when shown), the caller's VLLM_API_KEY is not."""

from __future__ import annotations

import shutil

from specops.engines import local
from tests.cli.inproc import run_main
from tests.conftest import REPO


def test_hf_token_is_inherited_and_the_callers_api_key_is_not(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_from_the_caller")
    monkeypatch.setenv("VLLM_API_KEY", "sk_from_the_caller")
    env = local.engine_env(tmp_path / "dep", tmp_path / "cache", cpu=False, kv_space_gib=None, extra={},
                           api_key=None)
    assert env["HF_TOKEN"] == "hf_from_the_caller"
    assert "VLLM_API_KEY" not in env
    env = local.engine_env(tmp_path / "dep", tmp_path / "cache", cpu=False, kv_space_gib=None, extra={},
                           api_key="sk_from_the_spec")
    assert env["VLLM_API_KEY"] == "sk_from_the_spec"


def test_the_dry_run_shows_the_inherited_token_redacted(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECOPS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_TOKEN", "hf_from_the_caller")
    monkeypatch.chdir(tmp_path)
    shutil.copytree(REPO / "tests" / "assets" / "tiny-models" / "target-v1", tmp_path / "llama")
    code, spec, err = run_main("recommend", "--model", "./llama", "--gpu", "cpu", "--task", "code", "--context-len",
                               "256", "--name", "tiny", "--output", "deployment")
    assert code == 0, err
    (tmp_path / "deploy.yaml").write_text(spec)
    code, out, err = run_main("deploy", "deploy.yaml", "--dry-run")
    assert code == 0, err
    assert "HF_TOKEN=<redacted>" in out + err and "hf_from_the_caller" not in out + err
