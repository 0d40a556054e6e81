"""Issue 39, secrets: argv is judged the way vLLM's parser reads it (argparse abbreviations, ``_`` for
``-``, ``=``), plus the spellings that only leak (one-element "--api-key sk-…", ``api_key=…``, a
Unicode dash, a leading space); URL credentials (user info and query parameters) never reach
output, validation rows, exports or imports.

The ground truth for "vLLM would read this as its API key" is the stdlib argparse with vLLM's
option names and vLLM's one preprocessing rule (``_`` to ``-`` in ``--names``), which is what
vllm/utils/argparse_utils.py's FlexibleArgumentParser is (it never sets allow_abbrev=False); the
``vllm``-marked test checks the same spellings against vLLM's own parser when it is installed."""

from __future__ import annotations

import argparse
import json
import re
import sqlite3

import pytest

from tests.cli.inproc import run_main

SECRET = "sk-SECRET123"
SPELLINGS = [
    ["--api-ke", SECRET], ["--api-k", SECRET], ["--api-ke=" + SECRET], ["--api_ke", SECRET], ["--hf-tok", SECRET],
    ["--hf_t=" + SECRET], ["--API_KEY", SECRET], ["--api-key " + SECRET], ["api_key=" + SECRET],
    ["\u2014api-key", SECRET], ["\u2010\u2010api-key=" + SECRET], [" --api-key", SECRET], ["--api-key.x", SECRET],
    ["\u200b--api-key=" + SECRET], ["--hf-token=" + SECRET], ["--api-key", "a=" + SECRET],
]

VLLM_OPTIONS = ["--api-key", "--api-server-count", "--hf-token", "--hf-overrides", "--hf-config-path", "--port",
                "--tokenizer", "--host"]


def _vllm_like_parser():
    p = argparse.ArgumentParser(exit_on_error=False)  # allow_abbrev left at its default, as vLLM does
    for opt in VLLM_OPTIONS:
        p.add_argument(opt)
    return p


def _as_vllm_preprocesses(args: list[str]) -> list[str]:
    """vLLM's rule: in an argument starting with --, "_" becomes "-" up to the first "." (and "=")."""
    out = []
    for a in args:
        if a.startswith("--"):
            key, eq, value = a.partition("=")
            head, dot, tail = key.partition(".")
            out.append(head.replace("_", "-") + dot + tail + eq + value)
        else:
            out.append(a)
    return out


def _vllm_reads_a_secret(args: list[str]) -> bool:
    try:
        ns, _ = _vllm_like_parser().parse_known_args(_as_vllm_preprocesses(args))
    except (argparse.ArgumentError, SystemExit):
        return False
    return any(SECRET in str(v) for v in (ns.api_key, ns.hf_token))


def test_every_spelling_vllms_parser_takes_as_a_secret_is_caught_and_its_value_redacted():
    from specops.secrets import redact_argv, secret_options

    read_by_vllm = [s for s in SPELLINGS if _vllm_reads_a_secret(s)]
    assert len(read_by_vllm) >= 8  # prefixes, underscores, = : the parser really takes these
    for argv in SPELLINGS:
        assert secret_options(argv), argv
        shown = redact_argv(["vllm", "serve", "m", *argv, "--port", "8000"])
        assert SECRET not in " ".join(shown), (argv, shown)
        assert shown[-2:] == ["--port", "8000"]
        assert not any(SECRET in s for s in secret_options(argv))


def test_ordinary_options_are_not_secrets():
    from specops.secrets import redact_argv, secret_options

    argv = ["--port", "8000", "--tokenizer", "t", "--host", "0.0.0.0", "--api-server-count", "2", "-1", "--",
            "--max-num-seqs=8", "--hf-overrides", '{"a": 1}', "--seed", "-5"]
    assert secret_options(argv) == [] and redact_argv(argv) == argv
    assert not _vllm_reads_a_secret(["--api", SECRET])  # ambiguous: vLLM refuses it...
    assert secret_options(["--api", SECRET])  # ...and it is still never shown


@pytest.mark.vllm
def test_the_installed_vllm_parser_reads_the_abbreviations_as_its_api_key():
    from vllm.entrypoints.launchers.cli_args import make_arg_parser  # noqa: PLC0415 - heavy, only here
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())
    assert parser.allow_abbrev
    for argv in (["--api-ke", SECRET], ["--api_ke=" + SECRET], ["--hf-tok", SECRET]):
        ns = parser.parse_args(["m", *argv])
        assert SECRET in str(ns.api_key) + str(ns.hf_token), argv


LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
EAGLE = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"


@pytest.mark.parametrize("extra", SPELLINGS[:10] + SPELLINGS[11:14], ids=lambda e: repr(e[0])[:20])
def test_deploy_dry_run_gate_and_manifests_refuse_every_spelling_without_showing_it(tmp_path, extra):
    spec = tmp_path / "prod.yaml"
    spec.write_text(f"name: prod\ntarget: {{model: {LLAMA}}}\ndraft: {{model: {EAGLE}}}\n"
                    "speculative: {method: eagle3, num_speculative_tokens: 3}\n"
                    f"engine:\n  extra_args: {json.dumps(extra)}\n")
    for args in (("deploy", str(spec), "--dry-run"), ("deploy", str(spec), "--dry-run", "--platform", "kubernetes",
                                                     "-o", "json"), ("gate", "-o", "json", "--spec", str(spec))):
        code, out, err = run_main(*args)
        assert SECRET not in out + err, (args, out + err)
        if args[0] == "deploy":
            assert code == 2 and "extra_args" in err, (args, code, err)
        else:  # the gate's verdict on a spec it cannot load: failed, the finding naming extra_args
            assert code in (1, 2) and "extra_args" in out + err, (args, code, out + err)


# --- URLs ---------------------------------------------------------------------------------------------

QUERY_URLS = ["http://127.0.0.1:9/?access_token=s3cretQ", "http://127.0.0.1:9?token=s3cretQ&x=1",
              "http://127.0.0.1:9/?apikey=s3cretQ", "http://127.0.0.1:9/#access_token=s3cretQ"]


def test_redact_url_hides_user_info_and_credential_query_values():
    from specops.secrets import redact_url, url_credentials

    assert redact_url("http://a:b@h:9/p?access_token=t&q=1") == "http://***@h:9/p?access_token=<redacted>&q=1"
    assert redact_url("https://h/x?X-Amz-Signature=z&region=eu") == "https://h/x?X-Amz-Signature=<redacted>&region=eu"
    assert redact_url("http://h:9/api?query=up") == "http://h:9/api?query=up"
    assert url_credentials("http://h?api_key=1&password=2") == ["api_key=", "password="]


@pytest.mark.parametrize("url", QUERY_URLS)
def test_a_credential_in_a_prometheus_query_string_is_never_echoed_or_stored(specops_home, url):
    code, _, err = run_main("deployment", "register", "d", "--endpoint", "http://127.0.0.1:9", "--method", "ngram",
                            "--served-name", "tiny", "--no-check")
    assert code == 0, err
    runs = [run_main("metrics", "--prometheus-url", url, "--served-name", "tiny"),
            run_main("validate", "-c", "ops", "-d", "d", "--prometheus-url", url, "-o", "json"),
            run_main("monitor", "--once", "-o", "json", "--prometheus-url", url)]
    import os

    os.environ["SPECOPS_PROMETHEUS_URL"] = url
    try:
        runs.append(run_main("doctor", "-o", "json"))
    finally:
        del os.environ["SPECOPS_PROMETHEUS_URL"]
    for code, out, err in runs:
        assert "s3cretQ" not in out + err, out + err
        assert code in (1, 2) and "internal error" not in err, (code, err)
    with sqlite3.connect(specops_home / "specops.db") as con:
        assert "s3cretQ" not in "\n".join(con.iterdump())
    assert "s3cretQ" not in run_main("lineage", "export")[1]


def _export(**sections) -> dict:
    from specops.registry.migrations import MIGRATIONS
    from specops.registry.transfer import FORMAT, FORMAT_VERSION

    return {"format": FORMAT, "format_version": FORMAT_VERSION, "schema": [m.name for m in MIGRATIONS], **sections}


DEP = {"name": "web", "platform": "local", "status": "running"}
SECRET_IMPORTS = {
    "userinfo endpoint": _export(deployments=[{**DEP, "endpoint": "http://u:s3cretQ@127.0.0.1:9"}]),
    "query endpoint": _export(deployments=[{**DEP, "endpoint": "http://127.0.0.1:9/?token=s3cretQ"}]),
    "argv": _export(deployments=[{**DEP, "argv_redacted": ["vllm", "serve", "m", "--api-ke", "s3cretQ"]}]),
    "one-element argv": _export(deployments=[{**DEP, "argv_redacted": ["vllm", "--api-key s3cretQ"]}]),
    "engine_config extra_args": _export(deployments=[{**DEP, "engine_config": {"extra_args": ["--hf_token=s3cretQ"]}}]),
    "a key": _export(deployments=[{**DEP, "labels": {"api_key": "s3cretQ"}}]),
    "a URL in a finding": _export(deployments=[DEP], validation_runs=[{
        "deployment": "web", "checklist": "ops", "passed": False, "started_at": "2026-01-01T00:00:00Z",
        "finished_at": "2026-01-01T00:00:01Z",
        "findings": [{"code": "X", "severity": "error", "message": "http://h:9/?access_token=s3cretQ down"}]}]),
}


@pytest.mark.parametrize("case", SECRET_IMPORTS, ids=list(SECRET_IMPORTS))
def test_lineage_import_refuses_credentials_and_unredacted_keys_without_echoing_them(tmp_path, specops_home, case):
    f = tmp_path / "export.json"
    f.write_text(json.dumps(SECRET_IMPORTS[case]))
    code, out, err = run_main("lineage", "import", str(f))
    assert code == 2 and ("carries a secret" in err or "contains credentials" in err), err
    assert "s3cretQ" not in out + err
    with sqlite3.connect(specops_home / "specops.db") as con:
        assert "s3cretQ" not in "\n".join(con.iterdump())


def test_lineage_export_redacts_secrets_a_row_from_an_older_specops_still_holds(specops_home):
    from specops.registry import open_registry

    with open_registry() as reg:
        reg.upsert_deployment("web", platform="local", status="running", endpoint="http://127.0.0.1:9",
                              argv_redacted=["vllm", "serve", "m", "--api-ke", "s3cretQ"],
                              labels={"note": "see http://u:s3cretQ@h/x?token=s3cretQ"})
    code, out, err = run_main("lineage", "export")
    assert code == 0, err
    assert "s3cretQ" not in out and out.count("<redacted>") >= 2
    assert re.search(r'"--api-ke",\s*"<redacted>"', out)
