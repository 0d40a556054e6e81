"""`specops config show` tells where each setting came from, and what it says is what the commands
use: checked against `specops recommend` in the same environment (real config.yaml, real CLI)."""

from __future__ import annotations

import json

from specops.settings import KNOWN_SETTINGS, SETTING_INFO
from tests.cli.inproc import run_main


def _show(monkeypatch, home, env=None, config=None) -> dict:
    monkeypatch.setenv("SPECOPS_HOME", str(home))
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    if config is not None:
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.yaml").write_text(config)
    code, out, err = run_main("config", "show", "-o", "json")
    assert code == 0, err
    return json.loads(out)


def _by_name(doc):
    return {row["name"]: row for row in doc["settings"]}


def test_every_known_setting_is_explained():
    assert set(SETTING_INFO) == set(KNOWN_SETTINGS)


def test_env_beats_config_yaml_beats_default_and_recommend_agrees(tmp_path, monkeypatch):
    home = tmp_path / "home"
    doc = _show(monkeypatch, home, env={"SPECOPS_VLLM_VERSION": "0.31.0"},
                config='vllm_version: "0.32.0"\npolicy: strict\ngpu: "H100"\nprometheus_token: s3cret\n')
    rows = _by_name(doc)
    assert (rows["vllm_version"]["value"], rows["vllm_version"]["source"]) == ("0.31.0", "SPECOPS_VLLM_VERSION")
    assert (rows["policy"]["value"], rows["policy"]["source"]) == ("strict", "config.yaml")
    assert (rows["interval"]["value"], rows["interval"]["source"]) == ("60", "default")
    assert (rows["prometheus_url"]["value"], rows["prometheus_url"]["source"]) == (None, "unset")
    assert rows["db"] == rows["db"] | {"value": f"sqlite:///{home}/specops.db", "source": "default"}
    assert doc["home"] == str(home) and doc["home_source"] == "SPECOPS_HOME" and doc["config_file_exists"]
    # what the commands use: the env's vLLM version and config.yaml's GPU
    code, out, err = run_main("recommend", "--model", "llama-3.1-8b-instruct", "-o", "json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["vllm"]["version"] == "0.31.0" and plan["gpu"] == rows["gpu"]["value"] == "H100"
    # a flag wins over both, as the flag column says
    assert rows["vllm_version"]["flag"] == "--vllm-version"
    code, out, _ = run_main("recommend", "--model", "llama-3.1-8b-instruct", "--vllm-version", "0.32.0", "-o", "json")
    assert json.loads(out)["vllm"]["version"] == "0.32.0"


def test_a_secret_is_redacted_in_the_table_and_json(tmp_path, monkeypatch):
    doc = _show(monkeypatch, tmp_path / "home", config="prometheus_token: s3cret-value\n")
    assert _by_name(doc)["prometheus_token"]["value"] == "<redacted>"
    code, out, err = run_main("config", "show")
    assert code == 0 and "s3cret-value" not in out + err and "<redacted>" in out
    assert "prometheus_token" in out and "config.yaml" in out


def test_a_typo_in_config_yaml_is_one_line_with_the_fix(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("prometheus_ulr: http://p:9090\n")
    monkeypatch.setenv("SPECOPS_HOME", str(home))
    code, out, err = run_main("config", "show")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and 'unknown setting "prometheus_ulr"' in err and "prometheus_url" in err
    assert "To fix:" in err
