"""The real deployer and measurer behind `specops tune`.

- :class:`LocalDeployer` redeploys one local deployment per configuration through ``specops deploy``
  (registry, lineage gate, contained environment, shared compile cache, /health wait) and stops it
  with ``specops stop`` (its own process group only). An engine that exits or never gets healthy
  raises :class:`EngineError` with the last lines of its log.
- :class:`RemoteDeployer` measures engines someone else runs: one endpoint per configuration, no
  redeploy; "starting" only checks that the endpoint answers.
- :class:`BenchMeasurer` runs the workload once at a concurrency through the A/B benchmark's runner
  (:mod:`specops.benchmark.runner`) and turns its run into a :class:`Sample` (client TPOT and tokens/s,
  the engine's spec-decode counter deltas).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from specops.errors import EngineError, InputError, MeasurementError
from specops.tune.types import DRAFT_METHODS, EngineConfig, Sample

if TYPE_CHECKING:
    from specops.engines.spec import DeploymentSpec


@dataclass
class EngineHandle:
    endpoint: str
    served_name: str
    pid: int | None = None
    log: Path | None = None
    prepared: dict = field(default_factory=dict)  # workload capped to the engine's context, once
    config: EngineConfig | None = None


@dataclass
class LocalDeployer:
    """Redeploy one local deployment per configuration through ``specops deploy``
    (:func:`specops.engines.deploy.deploy_local`) and stop it with ``specops stop``.

    Each start is a real deploy of ``base`` with the configuration's speculative block: the target and
    draft are registered and lineage-checked, the deployment row records every status change, the
    compile cache under ``$SPECOPS_HOME/cache/`` is shared across restarts, and a start that fails
    (missing draft, lineage refused, engine exits or never gets healthy) raises a SpecopsError. vLLM's
    own argument parser checks the first launch only (the later ones differ in the speculative block).
    """

    base: DeploymentSpec
    check_first: bool = True
    registry: object | None = None
    _checked: bool = field(default=False, repr=False)

    @property
    def name(self) -> str:
        return self.base.name

    def spec_for(self, config: EngineConfig, port: int | None = None) -> DeploymentSpec:
        from specops.engines.local import free_port
        from specops.engines.spec import ModelRef, SpeculativeBlock

        spec = self.base.model_copy(deep=True)
        spec.draft = ModelRef(model=config.draft) if config.draft and config.method in DRAFT_METHODS else None
        # n-gram keeps vLLM's default match window, as `specops recommend` deploys it: γ is how many
        # tokens follow a match, not the match length (tying them made acceptance depend on γ).
        spec.speculative = SpeculativeBlock(method=config.method, num_speculative_tokens=config.gamma or None,
                                            synthetic_acceptance_rates=config.synthetic_rates())
        spec.serve.port = port or free_port()
        return spec

    def start(self, config: EngineConfig) -> EngineHandle:
        from specops.engines.deploy import deploy_local

        spec = self.spec_for(config)
        result = deploy_local(spec, check=self.check_first and not self._checked, registry=self._registry())
        self._checked = True
        return EngineHandle(result.endpoint, spec.served_name(), result.pid,
                            Path(result.log) if result.log else None, config=config)

    def stop(self, handle: EngineHandle) -> None:
        from specops.engines.manage import stop

        stop(self.name, grace_s=30.0, registry=self._registry())

    def _registry(self):
        if self.registry is None:
            from specops.registry import open_registry

            self.registry = open_registry()
        return self.registry


def base_spec(*, name: str, model: str, served_name: str, max_model_len: int, dtype: str | None,
              vllm_version: str, enforce_eager: bool, max_num_seqs: int | None = None,
              cpus: list[int] | None = None) -> DeploymentSpec:
    """The deployment every tune configuration is a variant of."""
    from specops.engines.spec import DeploymentSpec, EngineBlock, LocalBlock, ModelRef, ServeBlock

    return DeploymentSpec(name=name, target=ModelRef(model=model),
                          engine=EngineBlock(vllm_version=vllm_version, max_model_len=max_model_len, dtype=dtype,
                                             enforce_eager=enforce_eager, max_num_seqs=max_num_seqs),
                          serve=ServeBlock(served_model_name=served_name), local=LocalBlock(cpus=cpus))


@dataclass
class RemoteDeployer:
    """Engines run elsewhere: one endpoint per configuration key (``none``, ``ngram-g2``, ...)."""

    endpoints: dict[str, str]
    served_name: str | None = None
    api_key_env: str | None = None

    def start(self, config: EngineConfig) -> EngineHandle:
        from specops.engines.client import VllmClient
        from specops.metrics import base_url

        url = self.endpoints.get(config.key)
        if url is None:
            raise EngineError(f"no endpoint given for {config.key}",
                              f"pass --endpoint-for {config.key}=URL, or leave it out of --methods/--gammas")
        url = base_url(url)
        try:
            VllmClient(url).models(deadline_s=10.0)
        except MeasurementError as exc:
            raise EngineError(f"cannot reach {url} for {config.key} ({exc.message})",
                              "check that the engine is running and the URL is right") from None
        return EngineHandle(url, self.served_name or "", None, config=config)

    def stop(self, handle: EngineHandle) -> None:
        return None


@dataclass
class BenchMeasurer:
    """One run of ``workload`` (built-in name or JSONL) at a concurrency, through the bench runner."""

    workload: str = "code"
    requests: int = 8
    max_tokens: int | None = 64
    seed: int = 1
    warmup: int = 1
    api_key_env: str | None = None
    stream: bool = False  # one response per request: the client and API server take least CPU

    def __call__(self, handle: EngineHandle, concurrency: int) -> Sample:
        return asyncio.run(self._run(handle, concurrency))

    async def _prepare(self, handle: EngineHandle, target):
        import httpx

        from specops.benchmark.runner import prepare_target, warm
        from specops.benchmark.workloads import load_workload

        if not handle.prepared:
            base = load_workload(self.workload, self.max_tokens, self.seed)
            async with httpx.AsyncClient() as client:
                model, workload = await prepare_target(client, target, base)
            await warm(target, model, workload, self.warmup)
            handle.prepared.update(model=model, workload=workload)
        return handle.prepared["model"], handle.prepared["workload"]

    async def _run(self, handle: EngineHandle, concurrency: int) -> Sample:
        from specops.benchmark.runner import run_once
        from specops.benchmark.types import BenchOptions, BenchTarget

        role = "baseline" if handle.config is not None and handle.config.method == "none" else "spec"
        target = BenchTarget(role=role, endpoint=handle.endpoint, served_name=handle.served_name or None,
                        pid=handle.pid, api_key_env=self.api_key_env)
        model, workload = await self._prepare(handle, target)
        opts = BenchOptions(spec=target, workload=self.workload, concurrency=[concurrency], requests=self.requests,
                            max_tokens=self.max_tokens, seed=self.seed, warmup=0, stream=self.stream)
        run = await run_once(target, model, workload, concurrency, opts, None)
        return sample_from_run(run)


def sample_from_run(run) -> Sample:
    """A bench RunResult -> Sample (client timing, engine counters)."""
    if run.ok == 0 or not (run.e2e_per_token_p50_s or run.tpot_p50_s) or not run.tokens_per_s:
        raise MeasurementError(f"no request completed ({'; '.join(run.errors) or 'no output'})",
                               "check the engine's log; lower the concurrency or max_tokens")
    m = run.measurement
    spec = m is not None and m.speculation and (m.num_drafts or 0) > 0
    # End-to-end time per output token, not the streamed TPOT: on a CPU-starved box the stream can arrive
    # in one burst at the end (streamed TPOT ~0.03 ms with a TTFT of the whole request), while end-to-end
    # latency and tokens/s stay right. Short prompts keep the prefill share small; it is the same for
    # every configuration of a grid.
    tpot_s = run.e2e_per_token_p50_s or run.tpot_p50_s
    return Sample(
        tpot_ms=tpot_s * 1000.0, tokens_per_s=run.tokens_per_s,
        num_drafts=(m.num_drafts or 0) if spec else 0, num_draft_tokens=(m.num_draft_tokens or 0) if spec else 0,
        num_accepted_tokens=(m.num_accepted_tokens or 0) if spec else 0,
        accepted_per_position=list(m.accepted_per_position) if spec else [],
        generation_tokens=(m.generation_tokens if m is not None and m.generation_tokens is not None
                           else float(run.output_tokens)),
        requests=max(1, run.ok), ttft_ms=run.ttft_p50_s * 1000.0 if run.ttft_p50_s else None,
        notes=list(run.notes) + ([] if run.crosscheck.agree else run.crosscheck.problems))


def parse_endpoints(values: list[str]) -> dict[str, str]:
    """``--endpoint-for CONFIG=URL`` (CONFIG: none, ngram-g2, draft_model-g3, ...)."""
    out = {}
    for v in values:
        key, sep, url = v.partition("=")
        if not sep or not key.strip() or not url.strip():
            raise InputError(f'--endpoint-for "{v}" is not CONFIG=URL', "use e.g. --endpoint-for ngram-g2=http://host:8000")
        out[key.strip()] = url.strip()
    return out
