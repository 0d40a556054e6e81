"""KServe ``LLMInferenceService`` with the speculator shape proposed in kserve PR #5687 (open, not merged).

What the PR confirms (its description and review threads): a top-level ``spec.speculator`` in the
``serving.kserve.io/v1alpha2`` types holding a speculator model (downloaded by a second
storage-initializer, ``LLMSpeculatorModelSpec``, with a URI) and ``config``, a map passed as is to
vLLM's ``--speculative-config`` (``config.method`` is required by a CEL rule). specops renders
``speculator.model.uri`` and ``speculator.config`` only; other sub-fields of the model spec were not
confirmed. The controller mounts the draft and fills in its path, so ``config`` carries no ``model``;
the draft revision cannot be expressed in an ``hf://`` URI with confidence, so it travels as an
annotation (``specops.io/draft``) and the plain Deployment remains the pinned, supported path.
"""

from __future__ import annotations

from specops.engines.spec import DeploymentSpec

API_VERSION = "serving.kserve.io/v1alpha2"


def _uri(model: str) -> str:
    return model if "://" in model else f"hf://{model}"


def llm_inference_service(spec: DeploymentSpec, *, labels: dict[str, str]) -> dict:
    from specops.engines.argv import speculative_config

    k = spec.kubernetes
    gpus = k.gpus_per_replica if k.gpus_per_replica is not None else spec.engine.tensor_parallel_size
    body: dict = {
        "model": {"uri": _uri(spec.target.model), "name": spec.served_name()},
        "replicas": k.replicas,
        "template": {"containers": [{
            "name": "main",
            "resources": {"limits": {k.gpu_resource: str(gpus)}},
        }]},
    }
    cfg = speculative_config(spec.launch_config(host="0.0.0.0"))
    if cfg is not None:
        config = {key: value for key, value in cfg.items() if key not in ("model", "revision")}
        speculator: dict = {"config": config}
        if spec.draft is not None:
            speculator["model"] = {"uri": _uri(spec.draft.model)}
        body["speculator"] = speculator
    ann = {"specops.io/note": "speculator field as proposed in kserve PR #5687"}
    if spec.draft is not None and spec.draft.revision:
        ann["specops.io/draft"] = f"{spec.draft.model}@{spec.draft.revision}"
    return {"apiVersion": API_VERSION, "kind": "LLMInferenceService",
            "metadata": {"name": spec.name, "namespace": k.namespace, "labels": dict(labels), "annotations": ann},
            "spec": body}
