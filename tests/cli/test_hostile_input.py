"""Issue 26: hostile input gets one line and exit 2 (or is skipped with a note), never a traceback,
never a file outside its folder, never a secret in argv."""

from __future__ import annotations

import json

import pytest

from tests.cli.inproc import run_main

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
EAGLE = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"


def _one_line_error(err: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "To fix:" in lines[0], err
    assert "Traceback" not in err


# --- priors from the registry never break recommend -------------------------------------------

def test_an_adopted_deployment_with_an_unregistered_draft_is_skipped_as_a_prior_with_a_note():
    code, _, err = run_main("deployment", "register", "prod", "--endpoint", "http://127.0.0.1:9",
                            "--draft", EAGLE, "--method", "eagle3", "--no-check")
    assert code == 0, err
    code, out, err = run_main("recommend", "--model", LLAMA, "--gpu", "H100", "-o", "json")
    assert code == 0, err
    plan = json.loads(out)
    assert any("prod" in n and "skipped" in n for n in plan["learned_from"])
    run_main("deployment", "remove", "prod")
    code, _, err = run_main("recommend", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "-o", "json")
    assert code == 0, err


# --- secrets in argv, in every spelling ---------------------------------------------------------

SPEC = """name: prod
target: {{model: {llama}}}
draft: {{model: {eagle}}}
speculative: {{method: eagle3, num_speculative_tokens: 3}}
engine:
  extra_args: {extra}
"""

SECRET_SPELLINGS = [
    ["--api_key=sk-SECRET123"], ["--hf_token", "hf_SECRET123"], ["--API-KEY", "sk-SECRET123"],
    ["--hf-token=hf_SECRET123"], ["--api_key", "sk-SECRET123"], ["--Hf_Token=hf_SECRET123"],
]


def _spec_file(tmp_path, extra: list[str], platform: str = "local"):
    p = tmp_path / "prod.yaml"
    p.write_text(SPEC.format(llama=LLAMA, eagle=EAGLE, extra=json.dumps(extra)) + f"platform: {platform}\n")
    return p


@pytest.mark.parametrize("extra", SECRET_SPELLINGS)
@pytest.mark.parametrize("command", [("deploy", "--dry-run"), ("deploy", "--dry-run", "--platform", "kubernetes"),
                                     ("deploy", "--dry-run", "-o", "json"),
                                     ("gate", "-o", "json", "--spec")])
def test_a_secret_in_extra_args_is_refused_in_every_spelling_and_its_value_never_shown(tmp_path, extra, command):
    spec = _spec_file(tmp_path, extra)
    code, out, err = run_main(*command, str(spec))
    assert "SECRET123" not in out + err
    assert code in (1, 2), out + err
    if command[0] == "deploy":
        assert code == 2
        _one_line_error(err)
        assert "extra_args" in err


def test_redact_argv_hides_secret_values_in_every_spelling():
    from specops.secrets import redact_argv, secret_options

    argv = ["vllm", "serve", "m", "--api_key=sk-1", "--hf_token", "hf_2", "--HF-TOKEN", "hf_3", "--port", "8000",
            "--max-num-batched-tokens", "4096", "--num-speculative-tokens", "3"]
    shown = redact_argv(argv)
    assert not any(s in " ".join(shown) for s in ("sk-1", "hf_2", "hf_3"))
    assert shown[-4:] == ["--max-num-batched-tokens", "4096", "--num-speculative-tokens", "3"]
    assert secret_options(argv) == ["--api_key", "--hf_token", "--HF-TOKEN"]


def test_rendering_a_launch_config_with_a_secret_in_any_spelling_is_refused():
    from specops.engines.argv import LaunchConfig, render_args
    from specops.errors import InputError

    with pytest.raises(InputError, match="extra_args"):
        render_args(LaunchConfig(model="m", extra_args=["--api_key", "sk-1"]))
