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
    # a measured window, so that recommend reads the registry for priors (it skips an empty one)
    from datetime import datetime, timedelta, timezone

    from specops.registry import open_registry

    now = datetime.now(timezone.utc)
    with open_registry() as reg:
        reg.record_measurement("prod", window_start=now - timedelta(minutes=5), window_end=now, acceptance_rate=0.5,
                               mean_acceptance_length=2.5, per_position=[0.7, 0.5, 0.3], num_drafts=100,
                               num_draft_tokens=300, num_accepted_tokens=150)
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


# --- arguments, outputs and bounds ----------------------------------------------------------------

def _adopt(name: str = "web") -> None:
    code, _, err = run_main("deployment", "register", name, "--endpoint", "http://127.0.0.1:9", "--method", "ngram",
                            "--no-check")
    assert code == 0, err


@pytest.mark.parametrize("args", [
    ("deploy", "x" * 5000), ("deploy", "a\udcff\udcfe.yaml"), ("lineage", "show", "x" * 6000),
    ("report", "-d", "x" * 300), ("deploy", "x" * 300), ("recommend", "--model", "\udcff", "--gpu", "H100"),
])
def test_long_and_non_utf8_arguments_exit_2_on_one_line(args):
    code, _, err = run_main(*args)
    assert code == 2, err
    _one_line_error(err)


def test_bench_save_to_a_bad_path_is_refused_before_the_benchmark_runs(tmp_path, monkeypatch):
    import specops.api.measure as measure

    ran = []
    monkeypatch.setattr(measure, "bench_deployment", lambda **kw: ran.append(kw))
    for bad in (str(tmp_path / "no-such-folder" / "r.json"), str(tmp_path), "x" * 300 + ".json"):
        code, _, err = run_main("bench", "--endpoint", "http://127.0.0.1:9", "--save", bad)
        assert code == 2 and "--save" in err, err
        _one_line_error(err)
    assert ran == []


class _Result:
    crosscheck_ok = True

    def model_dump(self, mode="json"):
        return {"speedup": 1.7}


def test_bench_results_are_printed_when_the_save_fails(tmp_path, monkeypatch):
    import shutil

    import specops.api.measure as measure

    folder = tmp_path / "out"
    folder.mkdir()

    def bench(**kw):
        shutil.rmtree(folder)  # the folder goes away while the benchmark runs
        return _Result()

    monkeypatch.setattr(measure, "bench_deployment", bench)
    code, out, err = run_main("bench", "--endpoint", "http://127.0.0.1:9", "-o", "json", "--save",
                              str(folder / "r.json"))
    assert json.loads(out) == {"schema_version": 1, "speedup": 1.7}
    assert code == 2 and "the results are printed above" in err, err


@pytest.mark.parametrize("command", ["validate", "gate"])
def test_a_bad_output_format_is_refused_before_a_run_is_recorded(tmp_path, command):
    from specops.registry import open_registry

    _adopt()
    args = (["validate", "-c", "deploy", "-d", "web"] if command == "validate"
            else ["gate", "--spec", str(_spec_file(tmp_path, []))])
    code, _, err = run_main(*args, "-o", "nan")
    assert code == 2 and 'unknown output format "nan"' in err, err
    assert open_registry().validation_runs("web") == []


def test_deploy_output_is_validated_before_anything_is_deployed(tmp_path):
    code, out, err = run_main("deploy", str(_spec_file(tmp_path, [])), "--dry-run", "-o", "yamll")
    assert code == 2 and 'unknown output format "yamll"' in err and out == "", out + err


def test_the_method_of_an_adopted_deployment_is_a_known_method():
    code, _, err = run_main("deployment", "register", "web", "--endpoint", "http://127.0.0.1:9",
                            "--method", "eagel3", "--no-check")
    assert code == 2 and 'Did you mean "eagle3"' in err, err
    code, out, err = run_main("deployment", "register", "web", "--endpoint", "http://127.0.0.1:9",
                              "--method", "EAGLE-3", "--no-check", "-o", "json")
    assert code == 0 and json.loads(out)["method"] == "eagle3", err


@pytest.mark.parametrize("args", [
    ("bench", "--endpoint", "http://127.0.0.1:9", "--rate", "1e308"),
    ("bench", "--endpoint", "http://127.0.0.1:9", "--rate", "nan"),
    ("bench", "--endpoint", "http://127.0.0.1:9", "--rate", "5", "--stress-factor", "inf"),
    ("monitor", "--once", "--baseline-hours", "1e309"),
    ("monitor", "--once", "--baseline-hours", "-1"),
    ("monitor", "--once", "--interval", "nan"),
])
def test_huge_and_non_finite_numbers_are_out_of_range(args):
    code, _, err = run_main(*args)
    assert code == 2 and "out of range" in err or "positive number" in err, err
    _one_line_error(err)


# --- usage errors and --db --------------------------------------------------------------------------

@pytest.mark.parametrize("args", [("deployment", "register", "x", "--bogus"), ("recommend", "--gpu"),
                                  ("no-such-command",), ("bench", "--requests", "many"), ("deployment", "show")])
def test_usage_errors_are_one_line_with_a_fix(args):
    code, out, err = run_main(*args)
    assert code == 2
    _one_line_error(err)
    assert "Usage:" not in err and "--help" in err


def test_every_deployment_subcommand_takes_db(tmp_path):
    db = f"sqlite:///{tmp_path / 'team.db'}"
    assert run_main("deployment", "register", "web", "--endpoint", "http://127.0.0.1:9", "--no-check",
                    "--db", db)[0] == 0
    code, out, _ = run_main("deployment", "list", "--db", db, "-o", "json")
    assert [d["name"] for d in json.loads(out)] == ["web"]
    assert run_main("deployment", "show", "web", "--db", db)[0] == 0
    assert json.loads(run_main("deployment", "list", "-o", "json")[1]) == []  # the default registry is untouched
    assert run_main("deployment", "remove", "web", "--db", db)[0] == 0
