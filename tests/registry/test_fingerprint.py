"""Fingerprints and facts read from real Hugging Face-shaped folders the tests build."""

from __future__ import annotations

import json

import pytest

from specops.errors import ConfigFileError, InputError
from specops.registry.fingerprint import (
    BLOCK,
    SAMPLES,
    inspect_artifact,
    looks_like_hub_id,
    weights_fingerprint,
)


def test_facts_come_from_config_tokenizer_and_weights(models):
    folder = models("target", hidden=32, layers=3, config_extra={"quantization_config": {"quant_method": "fp8"}})
    f = inspect_artifact(str(folder))
    assert (f["architecture"], f["hidden_size"], f["num_layers"], f["quantization"]) == \
        ("LlamaForCausalLM", 32, 3, "fp8")
    assert f["vocab_size"] == f["tokenizer_vocab_size"] > 10
    assert f["tokenizer_hash"].startswith("t1:") and f["weights_fingerprint"].startswith("w1:")
    assert f["weights_bytes"] == (folder / "model.safetensors").stat().st_size
    assert inspect_artifact(str(folder)) == f  # stable


def test_changing_any_shard_changes_the_weights_fingerprint(models):
    folder = models("target", shards=3)
    before = weights_fingerprint(folder)[0]
    shard = sorted(folder.glob("*.safetensors"))[1]
    data = bytearray(shard.read_bytes())
    data[-5] ^= 0xFF  # one byte of one tensor in the middle shard
    shard.write_bytes(bytes(data))
    assert weights_fingerprint(folder)[0] != before


def test_large_shards_are_sampled_but_header_size_and_sampled_blocks_are_seen(tmp_path):
    folder = tmp_path / "big"
    folder.mkdir()
    shard = folder / "model.safetensors"
    shard.write_bytes(bytes(range(256)) * (40 * BLOCK // 256))  # 2.5 MiB > whole-hash limit
    base = weights_fingerprint(folder)[0]
    size = shard.stat().st_size
    first_interior = BLOCK + (size - 2 * BLOCK) // (SAMPLES + 1)
    for offset in (10, size - 10, first_interior + 5):  # header, tail, an interior sample
        data = bytearray(shard.read_bytes())
        data[offset] ^= 1
        shard.write_bytes(bytes(data))
        assert weights_fingerprint(folder)[0] != base
        data[offset] ^= 1
        shard.write_bytes(bytes(data))
    assert weights_fingerprint(folder)[0] == base
    with open(shard, "ab") as fh:
        fh.write(b"\0")
    assert weights_fingerprint(folder)[0] != base
    assert weights_fingerprint(folder, full=True)[0] != weights_fingerprint(folder)[0]


def test_a_different_tokenizer_changes_the_tokenizer_hash(models):
    a = inspect_artifact(str(models("a")))
    b = inspect_artifact(str(models("b", extra_words=("zzz",))))
    assert a["tokenizer_hash"] != b["tokenizer_hash"] and b["tokenizer_vocab_size"] == a["tokenizer_vocab_size"] + 1


def test_speculators_and_eagle_3_1_markers_are_recorded(models):
    cfg = {"speculators_model_type": "eagle3", "fc_norm": True, "norm_output": False,
           "speculators_config": {"proposal_methods": [{"proposal_type": "eagle3"}],
                                  "verifier": {"name_or_path": "meta-llama/Llama-3.1-8B"}}}
    f = inspect_artifact(str(models("spec", arch="Eagle3Speculator", config_extra=cfg)))
    assert f["facts"]["verifier"] == "meta-llama/Llama-3.1-8B"
    assert f["facts"]["proposal_methods"] == ["eagle3"]
    eagle = f["facts"]["eagle"]
    assert (eagle["fc_norm"], eagle["norm_output"], eagle["trainer"]) == (True, False, "speculators")
    assert eagle["eagle_generation"] == "3.1"


def test_a_hub_cache_snapshot_records_its_commit(models):
    commit = "a" * 40
    f = inspect_artifact(str(models(f"models--org--m/snapshots/{commit}")))
    assert f["hub_commit"] == commit


@pytest.mark.parametrize("text,hub", [("org/model", True), ("org/model@main", True), ("./org/model", False),
                                      ("/abs/path", False), ("model", False)])
def test_hub_ids_are_told_apart_from_paths(text, hub):
    assert looks_like_hub_id(text) is hub


def test_unreadable_config_json_is_reported_with_file_and_line(models):
    folder = models("bad")
    (folder / "config.json").write_bytes(b'{\n "a": 1,\n "b": }')
    with pytest.raises(ConfigFileError, match=r"config.json:3: not valid JSON"):
        inspect_artifact(str(folder))
    (folder / "config.json").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigFileError, match="not UTF-8"):
        inspect_artifact(str(folder))
    (folder / "config.json").write_text(json.dumps([1, 2]))
    with pytest.raises(ConfigFileError, match="not a JSON object"):
        inspect_artifact(str(folder))


def test_a_file_instead_of_a_folder_is_an_input_error(models):
    folder = models("m")
    with pytest.raises(InputError, match="is not a folder"):
        inspect_artifact(str(folder / "config.json"))
