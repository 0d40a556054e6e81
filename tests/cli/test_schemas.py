"""docs/schemas/ against the models and the real CLI: the published files are what the pydantic models
say now (scripts/gen_docs.py writes them; a stale file fails here and in test_docs_generated.py), and
documents the CLI prints validate against them — schema_version included, an unknown key refused."""

from __future__ import annotations

import json
import shutil

import jsonschema
import pytest
import yaml

from specops.api.schemas import SCHEMA_VERSION, published_schemas
from tests.cli.inproc import run_main
from tests.conftest import REPO

SCHEMAS = REPO / "docs" / "schemas"
TINY = REPO / "tests" / "assets" / "tiny-models"


def _schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


def _valid(name: str, doc) -> None:
    jsonschema.Draft202012Validator(_schema(name)).validate(doc)


def _json(*args: str):
    code, out, err = run_main(*args, "-o", "json")
    assert code in (0, 1), err
    return json.loads(out)


@pytest.fixture(autouse=True)
def _cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # SPECOPS_HOME: the test's own (tests/conftest.py)


def test_the_published_files_are_the_models_schemas_now():
    published = published_schemas()
    assert sorted(p.name for p in SCHEMAS.glob("*.schema.json")) == sorted(f"{n}.schema.json" for n in published)
    for name, schema in published.items():
        assert _schema(name) == schema, f"docs/schemas/{name}.schema.json is stale: run scripts/gen_docs.py"
        jsonschema.Draft202012Validator.check_schema(schema)
        if name != "deployment-spec":
            assert schema["properties"]["schema_version"] == schema["properties"]["schema_version"] | \
                {"const": SCHEMA_VERSION} and "schema_version" in schema["required"]


@pytest.mark.parametrize("args", [
    ["--model", "llama-3.1-8b-instruct", "--gpu", "H100"],
    ["--model", "llama-3.1-8b-instruct", "--gpu", "H100", "--batch-size", "256"],  # no speculation
    ["--model", "llama-3.1-8b-instruct", "--gpu", "A100-80GB", "--context-len", "256", "--batch-size", "64",
     "--allow-uncertain"],  # a per-batch schedule
    ["--model", "org/my-moe", "--params-b", "30", "--active-params-b", "3", "--gpu", "H100"],
    ["--model", "org/my-7b", "--params-b", "7", "--gpu", "H100", "--method", "eagle"],  # the launch withheld
], ids=["eagle3", "none", "schedule", "moe", "withheld"])
def test_recommend_json_validates_and_carries_schema_version(args):
    plan = _json("recommend", *args)
    assert next(iter(plan)) == "schema_version" and plan["schema_version"] == SCHEMA_VERSION
    _valid("recommend", plan)
    del plan["schema_version"]
    with pytest.raises(jsonschema.ValidationError, match="schema_version"):
        _valid("recommend", plan)


def test_deployment_specs_validate_and_a_typo_does_not():
    code, spec, err = run_main("recommend", "--model", "llama-3.1-8b-instruct", "--gpu", "H100", "-o", "deployment")
    assert code == 0, err
    _valid("deployment-spec", yaml.safe_load(spec))
    shipped = yaml.safe_load((REPO / "tests" / "k8s" / "llama70b-eagle31.yaml").read_text())
    _valid("deployment-spec", shipped)
    shipped["speculative"]["num_speculative_token"] = shipped["speculative"].pop("num_speculative_tokens")
    with pytest.raises(jsonschema.ValidationError, match="num_speculative_token"):
        _valid("deployment-spec", shipped)


def test_config_monitor_deploy_and_lineage_outputs_validate(tmp_path):
    _valid("config-show", _json("config", "show"))
    code, line, err = run_main("monitor", "--once", "-o", "json")
    assert code == 2 and "nothing to watch" in err, err  # an empty registry is not a success (issue 42)
    _valid("monitor-cycle", json.loads(line.splitlines()[0]))
    shutil.copytree(TINY / "target-v1", tmp_path / "llama")
    shutil.copytree(TINY / "draft-v1", tmp_path / "draft")
    code, spec, err = run_main("recommend", "--model", "./llama", "--gpu", "cpu", "--task", "code", "--context-len",
                               "256", "--name", "tiny", "-o", "deployment")
    assert code == 0, err
    (tmp_path / "deploy.yaml").write_text(spec)
    _valid("deploy-local", _json("deploy", "deploy.yaml", "--dry-run"))
    assert run_main("lineage", "register-target", "./llama", "--name", "t", "--version", "1")[0] == 0
    assert run_main("lineage", "register-draft", "./draft", "--target", "t@1")[0] == 0
    report = _json("lineage", "check", "--target", "t@1", "--draft", "draft", "--vllm-version", "0.32.0")
    assert report["schema_version"] == SCHEMA_VERSION
    _valid("lineage-check", report)
    _valid("lineage-prune", _json("lineage", "prune", "--raw", "7d", "--hourly", "30d", "--horizon", "365d"))
