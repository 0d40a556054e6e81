"""GPU and model catalogs (playbooks/catalogs/*.yaml) and how request names resolve against them.

- GPUs by name or alias, case-insensitive (``H100`` = SXM, ``H100-PCIE``, ``cpu``, ...).
- Models by hub id or short name; a local Hugging Face folder is read from its config.json; an
  unknown hub id needs ``--params-b`` (then a generic dense architecture is estimated).
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

from pydantic import Field

from specops.errors import CheckpointMissing, InputError, NotFoundError, unknown
from specops.models import Strict
from specops.planner.names import gpu_key, gpu_keys, refuse_gpu
from specops.planner.types import GPU, DraftRef, ModelSpec

# Bits per weight for --quantization (scales included: AWQ/GPTQ group 128 ≈ 4.25, NVFP4 = 4 + FP8 scale/16).
QUANT_BITS = {"fp8": 8.0, "int8": 8.0, "awq": 4.25, "gptq": 4.25, "nvfp4": 4.5}


class _GpuFile(Strict):
    gpus: list[GPU] = Field(description="GPU entries.")


class _ModelFile(Strict):
    models: list[ModelSpec] = Field(description="Model entries.")


ONLINE_QUANT = ("fp8",)
"""--quantization values vLLM applies on the fly to a 16-bit checkpoint; the others need a quantized checkpoint."""
QUANT_MARKERS = {"awq": ("awq",), "gptq": ("gptq",), "int8": ("int8", "w8a8", "w8a16"),
                 "nvfp4": ("nvfp4", "fp4")}
"""How a hub id specops does not know names its quantization (e.g. ...-AWQ-INT4, ...quantized.w8a8)."""


class Catalogs:
    """GPU and model catalogs; build with :func:`load_catalogs` or from lists (tests).

    Names never resolve to something else: a name several entries share (``A100``: 40 GB or 80 GB) is
    refused with the choices; an instruct model's names and its base checkpoint's names are kept apart
    (``Llama-3.1-8B`` is the base, ``Llama-3.1-8B-Instruct`` the instruct model)."""

    def __init__(self, gpus: list[GPU], models: list[ModelSpec]) -> None:
        self.gpus = gpus
        self.models = models
        self._gpu_index: dict[str, GPU] = {}
        for g in gpus:
            for key in gpu_keys([g.name, *g.aliases, *g.smi_names]):
                other = self._gpu_index.setdefault(key, g)
                if other is not g:
                    raise ValueError(f'GPU name "{key}" belongs to both {other.name} and {g.name}')
        self._models: dict[str, dict[str, ModelSpec]] = {}
        for m in models:
            self._add_model(m, [m.id, m.id.split("/")[-1], *m.names])
            if m.base_id:
                base = m.model_copy(update={
                    "id": m.base_id, "names": list(m.base_names), "base_id": None, "base_names": [], "checkpoints": [],
                    "drafts": [d for d in m.drafts if d.method == "draft_model"],  # heads are trained on the instruct model
                    "source": f"{m.source}; {m.base_id} is the base checkpoint of {m.id} (same architecture)"})
                self._add_model(base, [base.id, base.id.split("/")[-1], *base.names])

    def _add_model(self, spec: ModelSpec, keys: list[str]) -> None:
        for k in keys:
            self._models.setdefault(k.strip().lower(), {})[spec.id] = spec

    def gpu(self, name: str) -> GPU:
        key = gpu_key(name)
        hit = self._gpu_index.get(key) or self._gpu_index.get(key.replace("-", ""))
        if hit is not None:
            return hit
        refuse_gpu(name, {k: g.name for k, g in self._gpu_index.items()}, [g.name for g in self.gpus])

    def catalog_model(self, name: str) -> ModelSpec | None:
        hits = self._models.get(name.strip().lower())
        if not hits:
            return None
        if len(hits) > 1:
            raise InputError(f'model "{name}" is ambiguous: it may be {", ".join(sorted(hits))}',
                             "use --model " + " or --model ".join(sorted(hits)))
        return next(iter(hits.values()))

    def model(self, name: str, *, params_b: float | None = None, quantization: str | None = None,
              active_params_b: float | None = None) -> ModelSpec:
        """Resolve --model (catalog name, hub id, or local folder) and apply --quantization;
        ``active_params_b`` makes an unknown model a mixture of experts (see :func:`generic_model`)."""
        spec = self.catalog_model(name)
        if active_params_b is not None and params_b is not None and active_params_b > params_b:
            raise InputError(f"--active-params-b {active_params_b} is more than --params-b {params_b}",
                             "give the parameters active per token, at most the total")
        if spec is None:
            path = Path(name).expanduser()
            cached = _cached_config_dir(name) if not path.is_dir() else None
            if path.is_dir():
                spec = model_from_config_dir(path, params_b=params_b)
            elif cached is not None:  # a hub id specops does not know, downloaded here: its config.json
                spec = model_from_config_dir(cached, params_b=params_b).model_copy(update={"id": name})
            elif params_b is not None:
                spec = generic_model(name, params_b, active_params_b)
            elif active_params_b is not None:
                raise InputError(f"--active-params-b needs --params-b for {name}, which specops does not know",
                                 "pass both, e.g. --params-b 30 --active-params-b 3")
            else:
                choices = sorted(self._models)
                err = unknown("model", name, choices)
                raise NotFoundError(err.message, "use a catalog model, a local folder with config.json, or pass "
                                    "--params-b for a hub id specops does not know (e.g. --params-b 8)")
        elif params_b is not None and abs(params_b - spec.params_b) / spec.params_b > 0.25:
            raise InputError(f"--params-b {params_b} contradicts the catalog's {spec.params_b}B for {spec.id}",
                             "drop --params-b for catalog models")
        if spec.id != name and active_params_b is not None and spec.source and "estimated" not in spec.source:
            if abs(active_params_b - spec.active_b) / spec.active_b > 0.25:
                raise InputError(f"--active-params-b {active_params_b} contradicts {spec.active_b}B active for {spec.id}",
                                 "drop --active-params-b for catalog models and local folders")
        if quantization:
            spec = quantized(spec, quantization, known=self.catalog_model(name) is not None)
        return spec

    def drafts_for(self, model: ModelSpec) -> list[DraftRef]:
        return list(model.drafts)


def _cached_config_dir(name: str) -> Path | None:
    """The Hugging Face cache's snapshot of hub id ``name`` when it holds a config.json (else None)."""
    if name.count("/") != 1 or name.startswith((".", "/", "~")):
        return None
    from specops.engines.bugs import cached_snapshot

    snap = cached_snapshot(name)
    return snap if snap is not None and (snap / "config.json").is_file() else None


def quantized(spec: ModelSpec, quantization: str, *, known: bool) -> ModelSpec:
    """The model served with ``quantization``: fp8 is applied by vLLM on the fly; awq/gptq/int8/nvfp4 need a
    quantized checkpoint - the catalog's (the launch names it), a local folder whose config says so, or a hub
    id specops does not know whose name says so. Anything else is refused: the launch would serve 16-bit weights."""
    q, bits = quantization, QUANT_BITS[quantization]
    if spec.quantization and spec.quantization not in ("compressed-tensors",):
        have = {"fp8": "fp8", "awq": "awq", "gptq": "gptq", "modelopt_fp4": "nvfp4", "nvfp4": "nvfp4"}.get(spec.quantization)
        if have != q:
            raise InputError(f"{spec.id} is a {spec.quantization} checkpoint; --quantization {q} contradicts it",
                             "drop --quantization (vLLM reads the checkpoint's quantization_config)")
        return spec.model_copy(update={"quantization": q})
    if spec.quantization == "compressed-tensors":  # the folder's config has the scheme; trust its bits
        return spec.model_copy(update={"quantization": q})
    if q in ONLINE_QUANT:
        return spec.model_copy(update={"weight_bits": bits, "quantization": q})
    ckpt = next((c for c in spec.checkpoints if c.quantization == q), None)
    if ckpt is not None:
        return spec.model_copy(update={
            "id": ckpt.id, "names": [], "checkpoints": [], "weight_bits": bits, "quantization": q,
            "source": f"the {q} checkpoint of {spec.id} ({ckpt.source}); architecture: {spec.source}"})
    if not known and not Path(spec.id).expanduser().is_dir() and any(mk in spec.id.lower() for mk in QUANT_MARKERS[q]):
        return spec.model_copy(update={"weight_bits": bits, "quantization": q})
    what = "the catalog knows no" if known else "its name or config.json shows no"
    art = "an" if q[0] in "aeiou" else "a"  # "an awq", "an int8"; "a gptq", "a nvfp4"
    sizes = f"--params-b {spec.params_b:g}" + (f" --active-params-b {spec.active_b:g}" if spec.is_moe else "")
    other = ("use --quantization fp8 (vLLM quantizes 16-bit weights on the fly)" if spec.weight_bits > 8.5 else
             f"drop --quantization ({spec.id} ships {spec.weight_bits:g}-bit weights)")
    raise CheckpointMissing(f"--quantization {q} needs {art} {q} checkpoint, and {what} {q} checkpoint of {spec.id}",
                            f"point --model at {art} {q} checkpoint (a local folder with its quantization_config, or a "
                            f"hub id naming it with {sizes}), or {other}")


def at_precision(spec: ModelSpec, quantization: str) -> ModelSpec:
    """``spec`` priced at ``quantization``'s bits per weight (QUANT_BITS) without a checkpoint to launch: what
    `recommend` predicts with when :func:`quantized` finds none (the launch is withheld, the source says so)."""
    bits = QUANT_BITS[quantization]
    return spec.model_copy(update={"weight_bits": bits, "quantization": quantization, "source": (
        f"{spec.source}; priced at {quantization}'s {bits:g} bits per weight (no {quantization} checkpoint known)")})


def _read_file(path: Path, model):
    """A catalog through the careful reader (anchors, duplicate keys, non-finite numbers refused, with
    their line). The shipped catalogs are parsed once per set of inputs (``_shipped``'s disk cache)."""
    from specops.yamlfile import load_model

    return load_model(path, model)


@lru_cache(maxsize=4)
def _load(gpu_path: str, model_path: str) -> Catalogs:
    gpus = _read_file(Path(gpu_path), _GpuFile).gpus
    models = _read_file(Path(model_path), _ModelFile).models
    return Catalogs(gpus, models)


def load_catalogs(gpu_path: str | Path | None = None, model_path: str | Path | None = None) -> Catalogs:
    """The catalogs shipped in playbooks/catalogs (or given paths)."""
    from specops.playbooks import playbook_path

    if gpu_path is None and model_path is None:  # the shipped ones: parsed once per set of inputs
        return _shipped(str(playbook_path("catalogs", "gpus.yaml")), str(playbook_path("catalogs", "models.yaml")))
    return _load(str(gpu_path or playbook_path("catalogs", "gpus.yaml")),
                 str(model_path or playbook_path("catalogs", "models.yaml")))


@lru_cache(maxsize=4)
def _shipped(gpu_path: str, model_path: str) -> Catalogs:
    from specops.planner.diskcache import cached

    return cached("catalogs", lambda: _load.__wrapped__(gpu_path, model_path))


GENERIC_EXPERTS, GENERIC_EXPERTS_PER_TOKEN = 128, 8
"""Routed experts and experts per token assumed for an MoE model known only by its sizes (--active-params-b):
Qwen3-30B-A3B / Qwen3-235B-A22B's 128 top-8 (DeepSeek-V3: 256 top-8, Mixtral: 8 top-2)."""


def generic_model(model_id: str, params_b: float, active_params_b: float | None = None) -> ModelSpec:
    """A Llama-like architecture for a given size (layers/hidden fitted to the Llama family); with
    ``active_params_b`` below ``params_b`` a mixture of experts of GENERIC_EXPERTS, top-GENERIC_EXPERTS_PER_TOKEN.

    hidden ≈ 128·round(sqrt(params/(12·layers))/128); layers from the size band (MoE: from the active size;
    under 150M: 8, as T5-small v1.1's decoder - Vicuna-68M has 2).
    Good enough for bytes and FLOPs, which depend mainly on params_b (and the active share).
    """
    moe = active_params_b is not None and active_params_b < params_b
    size = active_params_b if moe else params_b
    layers = 8 if size < 0.15 else 16 if size < 2 else 28 if size < 5 else 32 if size < 10 else 40 if size < 20 \
        else 64 if size < 40 else 80 if size < 100 else 126
    hidden = max(1024, int(round(math.sqrt(size * 1e9 / (12 * layers)) / 128)) * 128)
    heads = max(8, hidden // 128)
    what = (f"--params-b {params_b} --active-params-b {active_params_b} (generic MoE: {GENERIC_EXPERTS} experts, "
            f"{GENERIC_EXPERTS_PER_TOKEN} per token, assumed)") if moe else f"--params-b {params_b} (generic dense architecture)"
    return ModelSpec(id=model_id, params_b=params_b, active_params_b=active_params_b if moe else None, layers=layers,
                     hidden=hidden, heads=heads, kv_heads=max(1, min(8, heads)), head_dim=128, vocab=128256,
                     max_context=131072, experts=GENERIC_EXPERTS if moe else None,
                     experts_per_token=GENERIC_EXPERTS_PER_TOKEN if moe else None, source=f"estimated from {what}")


def model_from_config_dir(path: Path, *, params_b: float | None = None) -> ModelSpec:
    """Read a local Hugging Face folder's config.json (and its quantization_config); every figure is
    typed and range-checked (a count of 0, a string, 1e400 are one line naming the key, exit 2)."""
    cfg_path = path / "config.json"
    if not cfg_path.is_file():
        raise InputError(f"{path} has no config.json", "point --model at a Hugging Face model folder")
    from specops.modelconfig import read_model_config

    top = read_model_config(path)
    from specops.engines.bugs import architecture_of_config

    architecture = architecture_of_config(top.data)
    cfg = top
    if "hidden_size" not in top:
        cfg = top.obj("text_config") or top
    if "hidden_size" not in cfg or "num_hidden_layers" not in cfg:
        raise InputError(f"{cfg_path} lacks hidden_size/num_hidden_layers", "use a decoder-only model folder")
    big = 1 << 24
    hidden, layers = cfg.int("hidden_size", 1, big), cfg.int("num_hidden_layers", 1, 100_000)
    heads = cfg.int("num_attention_heads", 1, 1 << 16, max(1, hidden // 128))
    kv_heads = cfg.int("num_key_value_heads", 1, heads, heads)
    head_dim = cfg.int("head_dim", 1, big, max(1, hidden // heads))
    vocab = cfg.int("vocab_size", 1, 1 << 26, 32000)
    inter = cfg.int("intermediate_size", 1, 1 << 26, 4 * hidden)
    experts = next((cfg.int(k, 0, 1 << 16) for k in ("num_local_experts", "num_experts", "n_routed_experts")
                    if cfg.raw(k)), None)
    top_k = cfg.int("num_experts_per_tok", 0, experts or 1 << 16, None)
    moe_inter = cfg.int("moe_intermediate_size", 0, 1 << 26, None) or inter
    attn = hidden * (heads * head_dim) * 2 + hidden * (kv_heads * head_dim) * 2
    if experts and top_k:
        mlp_total, mlp_active = 3 * hidden * moe_inter * experts, 3 * hidden * moe_inter * top_k
    else:
        mlp_total = mlp_active = 3 * hidden * inter
    emb = vocab * hidden * (1 if cfg.raw("tie_word_embeddings") is True else 2)
    total = layers * (attn + mlp_total) + emb
    active = layers * (attn + mlp_active) + emb
    dtype = str(cfg.raw("torch_dtype") or cfg.raw("dtype") or "bfloat16")
    dtype = dtype if dtype in ("bfloat16", "float16", "float32") else "bfloat16"
    bits = {"float32": 32, "float16": 16, "bfloat16": 16}[dtype]
    quant = cfg.obj("quantization_config")
    qname = None
    if quant is not None and quant.data:
        qm = str(quant.raw("quant_method", "")).lower()[:40]
        qname = qm or None
        bits = quant.number("bits", 1, 32, None) or quant.number("w_bit", 1, 32, None) or (8 if "fp8" in qm else 4)
    from pydantic import ValidationError

    try:
        return _config_spec(path, cfg_path, params_b or total / 1e9, (active / 1e9) if experts and top_k else None,
                            cfg, layers, hidden, heads, kv_heads, head_dim, vocab, dtype, bits, experts, top_k, qname,
                            architecture)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ()))
        from specops.errors import ConfigFileError

        raise ConfigFileError(f"its figures give an impossible model ({where}: {err.get('msg')})",
                              "correct config.json (or pass --params-b)", path=str(cfg_path)) from None


def _config_spec(path, cfg_path, params_b, active_b, cfg, layers, hidden, heads, kv_heads, head_dim, vocab, dtype,
                 bits, experts, top_k, qname, architecture) -> ModelSpec:
    return ModelSpec(
        id=str(path), params_b=params_b,
        active_params_b=active_b,
        layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim, vocab=vocab,
        max_context=cfg.int("max_position_embeddings", 1, 1 << 31, 4096), dtype=dtype, weight_bits=bits,
        experts=experts if experts and top_k else None, experts_per_token=top_k if experts and top_k else None,
        kv_lora_rank=cfg.int("kv_lora_rank", 1, 1 << 24, None),
        kv_rope_dim=cfg.int("qk_rope_head_dim", 0, 1 << 24, None),
        mtp_layers=(cfg.int("num_nextn_predict_layers", 0, 1000, None)
                    or cfg.int("mtp_num_hidden_layers", 0, 1000, None) or 0),
        quantization=qname, architecture=architecture,
        source=f"{cfg_path} (config.json)",
    )


def draft_from_name(name: str, target: ModelSpec, catalogs: Catalogs) -> DraftRef:
    """Resolve --draft: a known draft, a local folder (config.json), or a hub id guessed by name."""
    for d in target.drafts:
        if d.id.lower() == name.lower():
            return d
    path = Path(name).expanduser()
    lowered = name.lower()
    if path.is_dir():
        cfg_file = path / "config.json"
        from specops.modelconfig import read_model_config

        cfg = read_model_config(path).data if cfg_file.is_file() else {}
        text = json.dumps(cfg).lower()
        if "eagle3" in text or "eagle-3" in text:
            from specops.speculation import eagle_generation

            gen = eagle_generation(cfg, name)
            return DraftRef(id=name, method="eagle3", generation=gen.generation,
                            source=f"{cfg_file} (EAGLE generation: {gen.reason})")
        if "eagle" in text:
            return DraftRef(id=name, method="eagle", generation="1", source=str(cfg_file))
        if "medusa" in text:
            return DraftRef(id=name, method="medusa", source=str(cfg_file))
        spec = model_from_config_dir(path)
        return DraftRef(id=name, method="draft_model", params_b=spec.params_b, source=str(cfg_file))
    if "eagle3.1" in lowered or "eagle-3.1" in lowered or "eagle31" in lowered:
        return DraftRef(id=name, method="eagle3", generation="3.1", source="method guessed from the name")
    if "eagle3" in lowered or "eagle-3" in lowered:
        return DraftRef(id=name, method="eagle3", generation="3", source="method guessed from the name")
    if "eagle" in lowered:
        return DraftRef(id=name, method="eagle", generation="1", source="method guessed from the name")
    if "medusa" in lowered:
        return DraftRef(id=name, method="medusa", source="method guessed from the name")
    known = catalogs.catalog_model(name)
    return DraftRef(id=name, method="draft_model", params_b=known.params_b if known else None,
                    source="catalog" if known else "method guessed from the name")
