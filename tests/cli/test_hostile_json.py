"""Issue 39, JSON readers: every JSON file or text a command loads (model config.json and
tokenizer.json, tune run.json, --data lines, retrain/heal --params, lineage import, bench workloads)
is read bounded (size, depth), finite and typed; a wrong one is one line naming the file and the key,
exit 2, never an internal error. All real: real folders, the real CLI in this process, a real SQLite
registry."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cli.inproc import run_main

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "tests" / "assets" / "tiny-models" / "target-v1"
DEEP = "[" * 10_000 + "]" * 10_000


def _one_line(code: int, err: str, *words: str) -> None:
    assert code == 2, (code, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "To fix:" in lines[0], err
    assert "internal error" not in err and "Traceback" not in err, err
    for w in words:
        assert w in err, (w, err)


def _model(tmp_path: Path, config: str | None = None, tokenizer: str | None = None) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(TINY, folder)
    if config is not None:
        (folder / "config.json").write_text(config)
    if tokenizer is not None:
        (folder / "tokenizer.json").write_text(tokenizer)
    return folder


def _with(**changes) -> str:
    cfg = json.loads((TINY / "config.json").read_text())
    cfg.update(changes)
    return json.dumps(cfg)


BAD_CONFIGS = {
    "a list": ("[1, 2]", "not a JSON object"),
    "10,000 deep": (DEEP, "nested too deeply"),
    "heads abc": (_with(num_attention_heads="abc"), '"num_attention_heads"'),
    "heads 0": (_with(num_attention_heads=0), '"num_attention_heads"'),
    "context 1e400": (_with(max_position_embeddings=1).replace('"max_position_embeddings": 1',
                                                                '"max_position_embeddings": 1e400'), "too large"),
    "NaN": (_with(rms_norm_eps=1).replace('"rms_norm_eps": 1', '"rms_norm_eps": NaN'), "non-finite"),
    "text_config a string": (json.dumps({"text_config": "x", "architectures": ["A"]}), '"text_config"'),
    "quantization bits a list": (_with(quantization_config={"quant_method": "awq", "bits": [4]}),
                                 '"quantization_config.bits"'),
    "architectures a number": (_with(architectures=7), '"architectures"'),
    "vocab 10^30": (_with(vocab_size=10**30), '"vocab_size"'),
}


@pytest.mark.parametrize("case", BAD_CONFIGS, ids=list(BAD_CONFIGS))
def test_a_wrong_config_json_is_one_line_naming_the_file_and_key_in_every_command(tmp_path, case):
    text, word = BAD_CONFIGS[case]
    folder = _model(tmp_path, config=text)
    spec = tmp_path / "s.yaml"
    spec.write_text(f"name: prod\ntarget: {{model: {folder}}}\nspeculative: {{method: ngram, "
                    "num_speculative_tokens: 3, prompt_lookup_max: 4}\n")
    for args in (("recommend", "--model", str(folder), "--gpu", "H100", "--context-len", "512"),
                 ("lineage", "register-target", str(folder)),
                 ("deploy", str(spec), "--dry-run")):
        code, out, err = run_main(*args)
        _one_line(code, err, "config.json", word)
    listed = json.loads(run_main("lineage", "list", "-o", "json")[1])
    assert (listed.get("targets"), listed.get("drafts")) == ([], [])  # nothing was registered


def test_a_deep_or_broken_tokenizer_json_is_refused_when_a_target_is_registered(tmp_path):
    for text, word in ((DEEP, "nested too deeply"), ('{"model": {"vocab": {"a": 1e999}}}', "too large")):
        folder = _model(tmp_path / word.replace(" ", "-"), tokenizer=text)
        code, _, err = run_main("lineage", "register-target", str(folder))
        _one_line(code, err, "tokenizer.json", word)


def test_the_good_tiny_model_still_reads(tmp_path):
    code, out, err = run_main("recommend", "--model", str(TINY), "--gpu", "H100", "--context-len", "256",
                              "--output-len", "128", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["model"] == str(TINY)


RUN_JSON = {
    "created 1e20": '{"created": 1e20, "options": {}}',
    "created 1e400": '{"created": 1e400, "options": {}}',
    "a list": "[]",
    "options a string": '{"created": 1, "options": "x"}',
    "deep": DEEP,
}


@pytest.mark.parametrize("case", RUN_JSON, ids=list(RUN_JSON))
def test_a_wrong_legacy_tune_run_json_is_one_line_for_list_and_resume(specops_home, case):
    folder = specops_home / "tune" / "old-run"
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(RUN_JSON[case])
    for args in (("tune", "--list"), ("tune", "--resume", "old-run")):
        code, _, err = run_main(*args)
        _one_line(code, err, "run.json")


def _local_deployment() -> None:
    """A local deployment serving the committed tiny target with its draft (heal and retrain read both)."""
    from specops.registry import open_registry

    models = TINY.parent
    with open_registry() as reg:
        reg.register_target(str(models / "target-v1"), name="tiny", version="v1")
        reg.register_draft(str(models / "draft-v1"), target="tiny@v1", name="tiny-draft", version="v1",
                           method="draft_model")
        reg.upsert_deployment("web", platform="local", status="running", target_ref="tiny@v1",
                              draft_ref="tiny-draft@v1", method="draft_model", num_speculative_tokens=3)


@pytest.mark.parametrize("params", ['{"steps": "abc"}', '{"nope": 1}', DEEP[:4000], '{"lr": 1e400}', "[1]",
                                    '{"steps": NaN}'])
@pytest.mark.parametrize("command", ["retrain", "heal"])
def test_a_wrong_params_is_one_line_naming_params(tmp_path, params, command):

    _local_deployment()
    data = tmp_path / "p.jsonl"
    data.write_text('{"prompt": "hello"}\n' * 30)  # heal holds out 24 by default (issue 45)
    args = ["retrain", "-d", "web"] if command == "retrain" else ["heal", "-d", "web"]
    code, _, err = run_main(*args, "--data", str(data), "--params", params, "--dry-run")
    _one_line(code, err, "--params")


@pytest.mark.parametrize("line", [DEEP, '{"prompt": 1e400}', '{"prompt": NaN}', '"x' + "\\u" * 3])
def test_a_wrong_data_line_is_one_line_naming_file_and_line(tmp_path, line):
    _local_deployment()
    data = tmp_path / "p.jsonl"
    data.write_text('{"prompt": "hello"}\n' + line + "\n")
    code, _, err = run_main("retrain", "-d", "web", "--data", str(data), "--dry-run")
    _one_line(code, err, "p.jsonl:2")


@pytest.mark.parametrize("line", [DEEP, '{"prompt": "a", "max_tokens": 1e400}'])
def test_a_wrong_bench_workload_line_is_one_line(tmp_path, line):
    w = tmp_path / "w.jsonl"
    w.write_text(line + "\n")
    code, _, err = run_main("bench", "--endpoint", "http://127.0.0.1:9", "--workload", str(w))
    _one_line(code, err, "w.jsonl:1")


def _export(**sections) -> dict:
    from specops.registry.migrations import MIGRATIONS
    from specops.registry.transfer import FORMAT, FORMAT_VERSION

    return {"format": FORMAT, "format_version": FORMAT_VERSION, "schema": [m.name for m in MIGRATIONS], **sections}


DEP = {"name": "web", "platform": "local", "status": "running"}
TARGET = {"name": "t", "version": "1", "source": "org/t", "source_kind": "hub"}
BAD_IMPORTS = {
    "created_at yesterday": (_export(deployments=[{**DEP, "created_at": "yesterday"}]), "created_at"),
    "created_at a number": (_export(targets=[{**TARGET, "created_at": 12}]), "created_at"),
    "updated_at a list": (_export(deployments=[{**DEP, "updated_at": [1]}]), "updated_at"),
    "an unknown method": (_export(deployments=[{**DEP, "method": "eagle9"}]), "eagle9"),
    "a file:// endpoint": (_export(deployments=[{**DEP, "endpoint": "file:///etc/passwd"}]), "endpoint"),
    "a name with a tab": (_export(deployments=[{**DEP, "name": "a\tb"}]), "name"),
    "a zero-width space": (_export(deployments=[{**DEP, "name": "web\u200b"}]), "name"),
    "1e400": ('{"format": "specops-registry", "deployments": [{"port": 1e400}]}', "too large"),
}


@pytest.mark.parametrize("case", BAD_IMPORTS, ids=list(BAD_IMPORTS))
def test_lineage_import_refuses_wrong_dates_methods_endpoints_and_names_and_writes_nothing(tmp_path, case):
    doc, word = BAD_IMPORTS[case]
    f = tmp_path / "export.json"
    f.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    code, _, err = run_main("lineage", "import", str(f))
    _one_line(code, err, word)
    assert json.loads(run_main("deployment", "list", "-o", "json")[1]) == []


# --- hypothesis: no JSON text crashes a reader -------------------------------------------------------

def test_no_json_text_crashes_any_json_reader(tmp_path, specops_home):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from specops.errors import SpecopsError

    leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
    values = st.recursive(leaves, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(
        st.sampled_from(["hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size", "created",
                         "options", "text_config", "quantization_config", "bits", "prompt", "max_tokens", "model",
                         "vocab", "added_tokens", "architectures", "x"]), kids, max_size=5), max_leaves=15)
    texts = st.one_of(values.map(json.dumps), st.text(max_size=200),
                      st.sampled_from([DEEP, "1e400", "[1e400]", "NaN", '{"a": -Infinity}', "{" * 70 + "}" * 70,
                                       "9" * 5000, '{"hidden_size": 1' + "0" * 5000 + "}",
                                       '{"created": 1e20, "options": {}}', '{"model": {"vocab": [1e999]}}',
                                       '{"format": "specops-registry", "format_version": 1, "deployments": '
                                       '[{"name": "w", "platform": "local", "status": "running", '
                                       '"created_at": "yesterday"}]}']))
    folder = _model(tmp_path)
    from specops.registry import open_registry

    registry = open_registry()

    def readers(text: str):
        from specops.api.retrain import parse_params
        from specops.benchmark.workloads import load_jsonl
        from specops.jsonfile import load_json
        from specops.planner.catalog import model_from_config_dir
        from specops.registry.fingerprint import inspect_artifact
        from specops.registry.transfer import load_export
        from specops.retrain.prompts import load_prompts
        from specops.tune.store import import_legacy_run

        (folder / "config.json").write_text(text, errors="surrogatepass")
        yield lambda: model_from_config_dir(folder)
        yield lambda: inspect_artifact(str(folder))
        yield lambda: parse_params(text)
        yield lambda: load_json(folder / "config.json")
        (tmp_path / "d.jsonl").write_text(text.replace("\n", " ") + "\n", errors="surrogatepass")
        yield lambda: load_prompts(tmp_path / "d.jsonl")
        yield lambda: load_jsonl(tmp_path / "d.jsonl")
        (folder / "config.json").write_text((TINY / "config.json").read_text())
        (folder / "tokenizer.json").write_text(text, errors="surrogatepass")
        yield lambda: inspect_artifact(str(folder))
        run = specops_home / "tune" / "r1"
        run.mkdir(parents=True, exist_ok=True)
        (run / "run.json").write_text(text, errors="surrogatepass")
        yield lambda: import_legacy_run(run, registry)
        (tmp_path / "export.json").write_text(text, errors="surrogatepass")
        yield lambda: registry.import_data(load_export(tmp_path / "export.json"), source="export.json")

    @settings(max_examples=60, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(texts)
    def run(text):
        for read in readers(text):
            try:
                read()
            except SpecopsError as exc:
                assert exc.exit_code == 2 and "\n" not in exc.one_line()

    run()
