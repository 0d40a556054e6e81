"""The GPU backends' rendered pipelines (running them needs GPUs: only the argv, config and Job are
checked here; the flags were read from the speculators 0.9.0 and specforge 0.2.0 wheels)."""

from __future__ import annotations

import json

import pytest
import yaml

from specops.errors import InputError
from specops.retrain.backends import TrainContext, get_backend
from specops.retrain.job import JobOptions, render_job


@pytest.fixture
def target(tmp_path):
    d = tmp_path / "llama-8b"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0, "max_position_embeddings": 131072, "num_hidden_layers": 32}))
    return d


def ctx(target, **kw) -> TrainContext:
    base = dict(deployment="chat", target_dir=str(target), target_ref="llama@v2", prompts=["one", "two \"quoted\""],
                data_source="traffic", work_dir="/work/retrain-chat-7", params={})
    return TrainContext(**{**base, **kw})


def test_speculators_plan_is_the_real_pipeline_with_eagle31_norms(target):
    cmds = get_backend("speculators").plan(ctx(target, params={"endpoint": "http://vllm:8000", "gpus": 8}))
    assert [c[:2] for c in cmds] == [["speculators", "regenerate-responses"], ["speculators", "prepare-data"],
                                     ["speculators", "generate-offline-data"], ["torchrun", "--standalone"]]
    regen, prep, offline, train = cmds
    assert regen[regen.index("--endpoint") + 1] == "http://vllm:8000/v1/chat/completions"
    assert json.loads(regen[regen.index("--sampling-params") + 1]) == {"temperature": 0}
    assert prep[prep.index("--data") + 1] == regen[regen.index("--outfile") + 1]
    assert "--render-endpoint" not in prep  # regenerate-responses rows already hold input_ids + loss_mask
    assert offline[offline.index("--preprocessed-data") + 1] == prep[prep.index("--output") + 1]
    assert train[train.index("-m") + 1] == "speculators.train" and "--nproc_per_node=8" in train
    assert train[train.index("--speculator-type") + 1] == "eagle3"
    assert train[train.index("--verifier-name-or-path") + 1] == str(target)
    assert "--fc-norm" in train and "--norm-output" in train and "--num-layers" in train


def test_speculators_warm_starts_from_an_eagle3_incumbent_without_shaping_flags(target, tmp_path):
    inc = tmp_path / "head-v1"
    inc.mkdir()
    (inc / "config.json").write_text(json.dumps({"speculators_model_type": "eagle3"}))
    train = get_backend("speculators").plan(ctx(target, incumbent_dir=str(inc), params={"eagle_generation": "3"}))[-1]
    assert train[train.index("--from-pretrained") + 1] == str(inc)
    assert "--num-layers" not in train and "--fc-norm" not in train  # 0.9.0 refuses shaping flags with it


def test_specforge_renders_a_valid_online_run_config_and_an_hf_export(target):
    be = get_backend("specforge")
    pipe = be.pipeline(ctx(target, params={"trainer_gpus": ["1", "2"], "capture_gpus": ["0"], "api_key_env": "KEY"}))
    respond, train, export = pipe.commands
    assert respond[1:3] == ["-m", "specops.retrain.respond"] and respond[-2:] == ["--api-key-env", "KEY"]
    assert train == ["specforge", "train", "-c", "/work/retrain-chat-7/input/run.yaml"]
    assert export[:4] == ["specforge", "export", "--to", "hf"]
    assert export[export.index("--embedding-source") + 1] == str(target)
    cfg = yaml.safe_load(pipe.files["run.yaml"])
    assert cfg["data"]["train_data_path"] == respond[respond.index("--out") + 1]
    assert cfg["deployment"]["mode"] == "disaggregated" and cfg["training"]["role"] == "auto"
    managed = cfg["deployment"]["disaggregated"]["managed_local"]
    assert set(managed["trainer_cuda_visible_devices"]).isdisjoint(managed["capture_servers"][0]["cuda_visible_devices"])
    draft_cfg = json.loads(pipe.files["draft-config.json"])
    assert draft_cfg["architectures"] == ["LlamaForCausalLMEagle3"] and draft_cfg["hidden_size"] == 4096
    assert draft_cfg["vocab_size"] == 128256 and draft_cfg["num_hidden_layers"] == 1
    assert [json.loads(line)["prompt"] for line in pipe.files["prompts.jsonl"].splitlines()] == ["one", "two \"quoted\""]


@pytest.mark.parametrize("backend", ["speculators", "specforge"])
def test_gpu_pipeline_renders_as_a_validated_job_running_every_step_in_order(target, backend):
    pipe = get_backend(backend).pipeline(ctx(target))
    opts = JobOptions(namespace="ml", image="registry.example/trainer:1", pvc="retrain-work", gpus=8,
                      hf_token_secret="hf", node_selector={"nvidia.com/gpu.product": "H100"},
                      tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
    cm, job = render_job("retrain-chat-7", "chat", pipe.commands, pipe.files, "/work/retrain-chat-7", opts,
                         backend=backend)
    pod = job["spec"]["template"]["spec"]
    steps = pod.get("initContainers", []) + pod["containers"]
    assert [c["command"] for c in steps] == pipe.commands
    assert all(c["resources"]["limits"]["nvidia.com/gpu"] == "8" for c in steps)
    assert job["spec"]["backoffLimit"] == 0 and pod["restartPolicy"] == "Never"
    assert cm["data"] == pipe.files
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}} in steps[0]["env"]
    assert "hf_" not in json.dumps(job)


def test_a_job_whose_work_folder_is_outside_the_volume_is_refused(target):
    pipe = get_backend("speculators").pipeline(ctx(target, work_dir="/tmp/x"))
    with pytest.raises(InputError, match="not under the PVC mount"):
        render_job("j", "chat", pipe.commands, pipe.files, "/tmp/x", JobOptions(image="i", pvc="p"),
                   backend="speculators")


def test_unknown_backend_names_the_choices():
    with pytest.raises(InputError, match='Did you mean "specforge"'):
        get_backend("specforg")
