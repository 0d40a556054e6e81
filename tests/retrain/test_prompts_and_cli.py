"""Prompt files, held-out split, and the CLI's handling of bad input."""

from __future__ import annotations

import pytest

from specops.errors import ConfigFileError, InputError
from specops.retrain.prompts import load_prompts, split_heldout, write_prompts


def test_jsonl_prompts_accept_completion_and_chat_lines(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text('{"prompt": "a"}\n\n{"messages": [{"role": "user", "content": "b"}, '
                 '{"role": "assistant", "content": "x"}]}\n"c"\n')
    assert load_prompts(f) == ["a", "b", "c"]
    assert load_prompts(f, limit=2) == ["b", "c"]


def test_a_bad_line_is_reported_with_file_and_line(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text('{"prompt": "a"}\n{"text": 3}\n')
    with pytest.raises(ConfigFileError, match=r"p.jsonl:2: "):
        load_prompts(f)
    f.write_text('{"prompt": "a"}\nnot json\n')
    with pytest.raises(ConfigFileError, match=r"p.jsonl:2: not valid JSON"):
        load_prompts(f)


def test_heldout_split_is_seeded_disjoint_and_refuses_too_few(tmp_path):
    prompts = [f"p{i}" for i in range(20)]
    train, held = split_heldout(prompts, 5, seed=3)
    assert (train, held) == split_heldout(prompts, 5, seed=3)
    assert len(held) == 5 and not set(train) & set(held) and sorted(train + held) == sorted(prompts)
    with pytest.raises(InputError, match="too few"):
        split_heldout(prompts[:5], 5)


def test_write_then_load_round_trips_unicode_and_quotes(tmp_path):
    prompts = ['say "hi"', "naïve\nnewline"]
    assert load_prompts(write_prompts(prompts, tmp_path / "x.jsonl")) == prompts


@pytest.mark.parametrize("args, needle", [
    (["--deployment", "chat"], "unknown deployment"),
    (["--deployment", "chat", "--backend", "specforg", "--data", "x"], 'Did you mean "specforge"'),
    (["--deployment", "chat", "--params", "{bad", "--data", "x"], "--params: not valid JSON"),
])
def test_cli_bad_input_is_one_line_with_a_fix_and_exit_2(cli, args, needle):
    r = cli("retrain", *args)
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr and "To fix:" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_cli_dry_run_prints_the_exact_command(cli, stale_registry, train_prompts, tmp_path):
    data = write_prompts(train_prompts, tmp_path / "p.jsonl")
    r = cli("retrain", "--deployment", "chat", "--data", str(data), "--dry-run", "--backend", "speculators",
            "--params", '{"endpoint": "http://vllm:8000"}')
    assert r.returncode == 0, r.stderr
    assert "speculators regenerate-responses --endpoint http://vllm:8000/v1/chat/completions" in r.stdout
    assert "--fc-norm --norm-output" in r.stdout
    assert stale_registry.retrain_jobs("chat") == []
