"""Issue 26: every loader bounded (size, depth), strict (duplicate keys, non-finite numbers, unknown
settings), every import shape-checked, every name-built path inside its folder, --db a URL or an
existing file, a newer or corrupt registry refused. All exit 2 with file and line."""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from specops.errors import ConfigFileError, InputError, RegistryError, SpecopsError
from tests.cli.inproc import run_main

REPO = Path(__file__).resolve().parents[1]
SPEC = ("name: prod\ntarget: {model: meta-llama/Llama-3.1-8B-Instruct}\n"
        "speculative: {method: ngram, num_speculative_tokens: 3, prompt_lookup_max: 4}\n")


def _loaders():
    from specops.checks.playbook import load_checklist
    from specops.drift.policy import load_policy
    from specops.drift.runbooks import load_runbook
    from specops.engines.spec import load_spec

    return {"spec": (load_spec, SPEC),
            "checklist": (load_checklist, (REPO / "playbooks/checklists/deploy.yaml").read_text()),
            "policy": (load_policy, (REPO / "playbooks/policies/default.yaml").read_text()),
            "runbook": (load_runbook, (REPO / "playbooks/runbooks/acceptance-drop.yaml").read_text())}


KINDS = ("spec", "checklist", "policy", "runbook")


@pytest.mark.parametrize("kind", KINDS)
def test_deep_nesting_is_refused_with_file_and_line_not_a_recursion_error(tmp_path, kind):
    load, text = _loaders()[kind]
    p = tmp_path / f"{kind}.yaml"
    p.write_text(text + "extra: " + "[" * 3000 + "]" * 3000 + "\n")
    with pytest.raises(ConfigFileError, match=rf"{kind}.yaml:\d+: nested more than"):
        load(str(p))


@pytest.mark.parametrize("kind", KINDS)
def test_a_key_given_twice_is_refused_with_its_line(tmp_path, kind):
    load, text = _loaders()[kind]
    first_key = next(line for line in text.splitlines() if line and not line.startswith("#")).split(":", 1)[0]
    p = tmp_path / f"{kind}.yaml"
    p.write_text(text.rstrip("\n") + f"\n{first_key}: again\n")
    with pytest.raises(ConfigFileError, match=rf'{kind}.yaml:\d+: key "{first_key}" is given twice'):
        load(str(p))


@pytest.mark.parametrize("kind", KINDS)
def test_a_100_mb_file_is_refused_at_once(tmp_path, kind):
    load, text = _loaders()[kind]
    p = tmp_path / f"{kind}.yaml"
    with p.open("w") as fh:
        fh.write(text)
        fh.write("# " + "x" * (100 << 20) + "\n")
    started = time.monotonic()
    with pytest.raises(ConfigFileError, match="MiB, more than specops reads"):
        load(str(p))
    assert time.monotonic() - started < 2


def test_inf_in_a_gpu_catalog_is_refused_with_its_line_and_recommend_exits_2(tmp_path, monkeypatch):
    books = tmp_path / "playbooks"
    shutil.copytree(REPO / "playbooks", books)
    gpus = books / "catalogs" / "gpus.yaml"
    text = gpus.read_text()
    field = "memory_gib:"
    assert field in text
    gpus.write_text(text.replace(field, field + " .inf #", 1))
    monkeypatch.setenv("SPECOPS_PLAYBOOKS", str(books))
    code, _, err = run_main("recommend", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100")
    assert code == 2, err
    assert "gpus.yaml:" in err and "non-finite" in err and "Traceback" not in err


def test_config_yaml_with_a_duplicate_or_unknown_key_is_refused_with_did_you_mean(specops_home):
    from specops.settings import setting

    cfg = specops_home / "config.yaml"
    cfg.write_text("gpu: H100\nprometheus_urll: http://x\n")
    with pytest.raises(ConfigFileError, match=r'config.yaml:2: unknown setting "prometheus_urll". Did you mean '
                                              r'"prometheus_url"'):
        setting("gpu")
    cfg.write_text("gpu: H100\ngpu: A100\n")
    with pytest.raises(ConfigFileError, match=r'config.yaml:2: key "gpu" is given twice'):
        setting("gpu")


def test_every_setting_the_code_reads_is_a_known_config_key():
    import re

    from specops.settings import KNOWN_SETTINGS

    names = set()
    for path in (REPO / "specops").rglob("*.py"):
        names |= set(re.findall(r'\bsetting\("([a-z_]+)"', path.read_text()))
    assert names <= set(KNOWN_SETTINGS), names - set(KNOWN_SETTINGS)


# --- lineage import: shapes, numbers, names ---------------------------------------------------------

def _export(**sections) -> dict:
    from specops.registry.migrations import MIGRATIONS
    from specops.registry.transfer import FORMAT, FORMAT_VERSION

    return {"format": FORMAT, "format_version": FORMAT_VERSION, "schema": [m.name for m in MIGRATIONS], **sections}


DEP = {"name": "web", "platform": "local", "status": "running"}
BAD_IMPORTS = {
    "targets is a string": _export(targets="nope"),
    "a deployment is a list": _export(deployments=[[1, 2]]),
    "a 10^30 integer": _export(deployments=[{**DEP, "port": 10**30}]),
    "a name with ..": _export(deployments=[{**DEP, "name": "../../etc"}]),
    "an absolute name": _export(deployments=[{**DEP, "name": "/tmp/x"}]),
    "a control character": _export(deployments=[{**DEP, "name": "a\x1bb"}]),
    "a 200-character name": _export(deployments=[{**DEP, "name": "a" * 200}]),
    "an unknown section": _export(deploymentz=[]),
}


@pytest.mark.parametrize("doc", BAD_IMPORTS.values(), ids=BAD_IMPORTS.keys())
def test_lineage_import_refuses_wrong_shapes_huge_numbers_and_bad_names_and_writes_nothing(tmp_path, doc):
    f = tmp_path / "export.json"
    f.write_text(json.dumps(doc))
    code, _, err = run_main("lineage", "import", str(f))
    assert code == 2, err
    assert err.startswith("error: ") and "Traceback" not in err and len(err.strip().splitlines()) == 1
    code, out, _ = run_main("deployment", "list", "-o", "json")
    assert json.loads(out) == []


def test_lineage_import_of_deeply_nested_json_exits_2(tmp_path):
    f = tmp_path / "export.json"
    f.write_text("[" * 100_000 + "]" * 100_000)
    code, _, err = run_main("lineage", "import", str(f))
    assert code == 2 and "nested too deeply" in err, err


# --- names used as paths -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["../..", "/etc/passwd", "a/b", "..", "a\nb", "x" * 300, ""])
def test_a_deployment_folder_is_never_built_outside_the_deployments_folder(name):
    from specops.settings import deployment_dir

    with pytest.raises(InputError):
        deployment_dir(name)


def test_the_default_report_file_of_a_hostile_name_is_refused_before_it_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main("report", "-d", "../../escaped")
    assert code == 2, err
    assert not (tmp_path.parent.parent / "escaped-report.html").exists()


@pytest.mark.parametrize("name", ["a b", "Prod", "a_b", "a.b", "a-", "x" * 64])
def test_deployment_register_and_canary_of_follow_the_one_name_rule(tmp_path, name):
    code, _, err = run_main("deployment", "register", name, "--endpoint", "http://127.0.0.1:9", "--no-check")
    assert code == 2 and "DNS-1123" in err, err
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC + "platform: kubernetes\n")
    code, out, err = run_main("deploy", str(spec), "--dry-run", "--canary-of", name)
    assert code == 2 and "--canary-of" in err and "validated" not in out, out + err


# --- the registry: --db, newer schema, corruption -------------------------------------------------------

@pytest.mark.parametrize("db", ["::::", "no-such-dir/reg.db", "x" * 300])
def test_db_must_be_a_url_or_an_existing_file(tmp_path, monkeypatch, db):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main("lineage", "list", "--db", db)
    assert code == 2 and "neither a database URL nor an existing registry file" in err, err
    assert [p.name for p in tmp_path.iterdir()] == ["specops-home"]
    assert list((tmp_path / "specops-home").iterdir()) == []


def test_a_registry_from_a_newer_schema_is_refused_with_both_versions(specops_home):
    from specops.registry import open_registry

    reg = open_registry()
    reg.upsert_deployment("web", platform="local", status="running")
    db = specops_home / "specops.db"
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO specops_migrations (name, applied_at) VALUES ('0099_from_the_future', 'now')")
    with pytest.raises(RegistryError, match="newer specops .*0099_from_the_future.*knows up to"):
        open_registry()
    code, _, err = run_main("deployment", "list")
    assert code == 2 and "0099_from_the_future" in err


def test_a_write_to_a_registry_with_corrupt_inner_pages_is_refused_and_names_the_fix(specops_home):
    from tests.helpers.registry_damage import corrupt_inner_pages

    corrupt_inner_pages(specops_home)
    code, _, err = run_main("deployment", "register", "web", "--endpoint", "http://127.0.0.1:9", "--no-check")
    assert code == 2, err
    assert "corrupt" in err and "To fix:" in err and "Traceback" not in err


def test_the_name_rule_is_one_rule():
    from specops.engines.spec import DNS1123_LABEL
    from specops.models import DEPLOYMENT_NAME, check_deployment_name

    assert DNS1123_LABEL is DEPLOYMENT_NAME
    assert check_deployment_name("chat-prod-2") == "chat-prod-2"
    with pytest.raises(SpecopsError):
        check_deployment_name("a_b")
