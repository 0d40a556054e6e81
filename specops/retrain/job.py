"""A retraining run as a Kubernetes Job (batch/v1) on GPU nodes.

Every pipeline step becomes one container with its exact argv (no shell): the steps before the last
run as init containers, in order, and the last one as the Job's container, so a failed step stops
the Job. The inputs a backend writes (prompts, run config) travel in a ConfigMap mounted read-only at
``<work_dir>/input``; the work folder (data, hidden states, checkpoints, the produced draft) is a
PersistentVolumeClaim the caller names. Secrets (HF_TOKEN) come by reference only. Validated against
the Kubernetes 1.33 schemas like every manifest specops renders.
"""

from __future__ import annotations

import re

from pydantic import Field

from specops.errors import InputError
from specops.models import Strict

_DNS = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class JobOptions(Strict):
    """Where and how the training Job runs."""


    namespace: str = Field(default="default", description="Namespace of the Job.")
    image: str = Field(description="Container image with the trainer installed (and torchrun).")
    pvc: str = Field(description="PersistentVolumeClaim mounted at the work folder's volume root.")
    mount_path: str = Field(default="/work", description="Where the PVC is mounted.")
    gpus: int = Field(default=1, ge=1, le=64, description="GPUs for the Job's pod.")
    gpu_resource: str = Field(default="nvidia.com/gpu", description="Extended resource name of the GPU.")
    node_selector: dict[str, str] = Field(default_factory=dict, description="nodeSelector for GPU nodes.")
    tolerations: list[dict] = Field(default_factory=list, description="Tolerations for GPU node taints.")
    hf_token_secret: str | None = Field(default=None, description="Secret with key `token` for HF_TOKEN.")
    active_deadline_seconds: int = Field(default=24 * 3600, ge=60, description="Kill the Job after this long.")
    ttl_seconds_after_finished: int = Field(default=7 * 24 * 3600, ge=0, description="Garbage-collect after.")
    memory: str = Field(default="64Gi", description="Memory request and limit.")
    shm_size: str = Field(default="16Gi", description="/dev/shm size (torch dataloaders, NCCL).")


def _name(text: str) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:63].rstrip("-")
    if not _DNS.match(name):
        raise InputError(f'"{text}" cannot be turned into a Kubernetes name', "use letters, digits and dashes")
    return name


def render_job(name: str, deployment: str, commands: list[list[str]], files: dict[str, str], work_dir: str,
               opts: JobOptions, *, backend: str) -> list[dict]:
    """[ConfigMap with ``files``, Job running ``commands`` in order]; validated."""
    from specops.k8s.render import check_gpu_resource
    from specops.k8s.validate import validate_objects

    if not commands:
        raise InputError("no steps to run", "the backend planned no commands")
    if not work_dir.startswith(opts.mount_path.rstrip("/") + "/"):
        raise InputError(f"work folder {work_dir} is not under the PVC mount {opts.mount_path}",
                         "render the plan with work_dir under the mount path")
    check_gpu_resource(opts.gpu_resource)
    job_name = _name(name)
    labels = {"app.kubernetes.io/name": "specops-retrain", "app.kubernetes.io/instance": job_name,
              "app.kubernetes.io/managed-by": "specops", "specops.io/deployment": _name(deployment),
              "specops.io/backend": backend}
    meta = {"name": job_name, "namespace": opts.namespace, "labels": labels}
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {**meta, "name": _name(f"{job_name}-input")},
          "data": dict(files)}
    env = [{"name": "HF_HUB_ENABLE_HF_TRANSFER", "value": "0"}]
    if opts.hf_token_secret:
        env.append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": opts.hf_token_secret, "key": "token"}}})
    mounts = [{"name": "work", "mountPath": opts.mount_path}, {"name": "shm", "mountPath": "/dev/shm"},
              {"name": "input", "mountPath": f"{work_dir}/input", "readOnly": True}]
    res = {"limits": {opts.gpu_resource: str(opts.gpus), "memory": opts.memory},
           "requests": {opts.gpu_resource: str(opts.gpus), "memory": opts.memory, "cpu": str(4 * opts.gpus)}}
    sec = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}

    def container(i: int, argv: list[str]) -> dict:
        return {"name": f"step-{i + 1}", "image": opts.image, "command": list(argv), "workingDir": work_dir,
                "env": env, "volumeMounts": mounts, "resources": res, "securityContext": sec}

    steps = [container(i, argv) for i, argv in enumerate(commands)]
    pod = {"restartPolicy": "Never", "containers": [steps[-1]],
           "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000,
                               "seccompProfile": {"type": "RuntimeDefault"}},
           "volumes": [{"name": "work", "persistentVolumeClaim": {"claimName": opts.pvc}},
                       {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": opts.shm_size}},
                       {"name": "input", "configMap": {"name": cm["metadata"]["name"]}}]}
    if steps[:-1]:
        pod["initContainers"] = steps[:-1]
    if opts.node_selector:
        pod["nodeSelector"] = dict(opts.node_selector)
    if opts.tolerations:
        pod["tolerations"] = list(opts.tolerations)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
           "spec": {"backoffLimit": 0, "activeDeadlineSeconds": opts.active_deadline_seconds,
                    "ttlSecondsAfterFinished": opts.ttl_seconds_after_finished,
                    "template": {"metadata": {"labels": labels}, "spec": pod}}}
    objs = [cm, job]
    validate_objects(objs)
    return objs
