"""retrain takes the engine's endpoint, served model name and the incumbent's EAGLE generation from the
deployment's record (specops/retrain/record.py), not from defaults: the speculators pipeline regenerates
answers at the deployment's own server and shapes an EAGLE-3 head as EAGLE-3 (``--fc-norm --norm-output``
only for 3.1). Real registry (SQLite); the drafts are config.json folders with each trainer's markers
(the weights are never read: dry runs plan the commands only)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specops.errors import InputError
from specops.registry import open_registry
from specops.retrain import retrain

TARGET = Path(__file__).resolve().parents[1] / "assets" / "tiny-models" / "target-v1"
MARKERS = {  # what each trainer writes into an EAGLE-3 head's config.json (specops.speculation.eagle_generation)
    "3": {"speculators_model_type": "eagle3", "speculators_version": "0.9.0", "norm_output": True,
          "norm_before_fc": True},
    "3.1": {"architectures": ["LlamaForCausalLMEagle3"], "fc_norm": True},
    None: {"speculators_model_type": "eagle3", "norm_output": True},  # speculators of unknown version
}


def _head(tmp_path: Path, generation) -> str:
    d = tmp_path / f"head-{generation}"
    d.mkdir(exist_ok=True)
    cfg = {"architectures": ["Eagle3Speculator"], "model_type": "llama", "hidden_size": 128, "vocab_size": 4096}
    (d / "config.json").write_text(json.dumps({**cfg, **MARKERS[generation]}))
    return str(d)


@pytest.fixture
def deployment(tmp_path):
    """Deployment "chat" adopted at a non-default endpoint and served name, incumbent set per test."""
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"question {i}"}) + "\n" for i in range(12)))
    reg = open_registry()
    reg.register_target(str(TARGET), name="tiny", version="v1")

    def make(generation, backend="speculators", params=None):
        draft, _ = reg.register_draft(_head(tmp_path, generation), target="tiny@v1", name=f"head-{generation}",
                                      method="eagle3")
        reg.upsert_deployment("chat", platform="external", status="adopted", target_ref="tiny@v1",
                              draft_ref=draft.ref, method="eagle3", endpoint="http://10.0.0.7:8123",
                              served_model_name="chat-prod", api_key_env="CHAT_KEY")
        out = retrain("chat", backend=backend, data=str(prompts), registry=reg, params=params, dry_run=True)
        return out.result.commands
    yield make
    reg.close()


def test_speculators_regenerates_at_the_deployments_endpoint_with_its_served_name(deployment):
    regen = deployment("3")[0]
    assert regen[regen.index("--endpoint") + 1] == "http://10.0.0.7:8123/v1/chat/completions"
    assert regen[regen.index("--model") + 1] == "chat-prod"
    assert "127.0.0.1:8000" not in json.dumps(deployment("3"))


@pytest.mark.parametrize(("generation", "shaped"), [("3", False), ("3.1", True)])
def test_the_head_is_shaped_like_the_incumbents_generation(deployment, generation, shaped):
    train = deployment(generation)[-1]
    assert ("--fc-norm" in train and "--norm-output" in train) is shaped, train


def test_an_eagle3_incumbent_of_unknown_generation_is_refused_and_the_fix_works(deployment):
    with pytest.raises(InputError, match="EAGLE-3 or EAGLE-3.1") as exc:
        deployment(None)
    assert "eagle_generation" in exc.value.fix
    train = deployment(None, params={"eagle_generation": "3"})[-1]  # the fix: say which
    assert "--fc-norm" not in train


def test_parameters_given_by_the_user_win_over_the_record(deployment):
    regen = deployment("3", params={"endpoint": "http://gpu-box:9000", "served_model_name": "other"})[0]
    assert regen[regen.index("--endpoint") + 1] == "http://gpu-box:9000/v1/chat/completions"
    assert regen[regen.index("--model") + 1] == "other"


def test_specforge_asks_the_deployments_server_with_its_name_and_key_variable(deployment):
    respond = deployment("3", backend="specforge")[0]
    assert respond[respond.index("--endpoint") + 1] == "http://10.0.0.7:8123"
    assert respond[respond.index("--model") + 1] == "chat-prod"
    assert respond[respond.index("--api-key-env") + 1] == "CHAT_KEY"
