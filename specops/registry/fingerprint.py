"""Facts and fingerprints read from real model artifacts (a local Hugging Face folder).

Read: ``config.json`` (architecture, hidden size, layers, vocab size, quantization, dtype, the
speculators ``speculators_config`` block, EAGLE-3.1 markers ``fc_norm`` / ``norm_output``), the
tokenizer files, the weight shards, and the hub commit when the folder is a hub cache snapshot
(``.../snapshots/<40-hex commit>/``).

Weights fingerprint (cheap on 100 GB checkpoints, documented in docs/lineage.md): for every weight
file (``*.safetensors``, ``*.bin``, ``*.pt``, ``*.pth``, ``*.gguf``, ``*.ckpt``), sorted by relative
path, hash its relative path, its size and SHA-256 of blocks of 64 KiB: the first block (for
safetensors this is the header: every tensor's name, dtype, shape and offsets), the last block, and
16 blocks at evenly spaced offsets in between. Files up to 1 MiB are hashed whole. That reads at most
~1.1 MiB per shard, whatever its size. Any change of size, tensor layout, dtype (re-quantization) or
of the sampled bytes changes it; a fine-tune changes essentially every block. An edit confined to
unsampled bytes is not seen: ``weights_fingerprint(path, full=True)`` hashes everything.

The artifact ``fingerprint`` combines the weights fingerprint, the config.json hash and the tokenizer
hash: it is what "the draft was trained against this target" is checked against.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from specops.errors import InputError
from specops.speculation import DRAFT_CONFIG_TYPES
from specops.speculation import eagle_generation as eagle_markers

BLOCK = 64 * 1024
SAMPLES = 16
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tiktoken.model", "vocab.json", "merges.txt", "vocab.txt",
                   "added_tokens.json", "special_tokens_map.json")
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+(@[\w./-]+)?$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_digest(path: Path, size: int, full: bool) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        if full or size <= (SAMPLES + 2) * BLOCK:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
            return h.hexdigest()
        span = size - 2 * BLOCK
        offsets = [0] + [BLOCK + (span * i) // (SAMPLES + 1) for i in range(1, SAMPLES + 1)] + [size - BLOCK]
        for off in offsets:
            f.seek(off)
            h.update(off.to_bytes(8, "little"))
            h.update(hashlib.sha256(f.read(BLOCK)).digest())
    return h.hexdigest()


def weight_files(folder: Path) -> list[Path]:
    return sorted((p for p in folder.rglob("*") if p.is_file() and p.suffix in WEIGHT_SUFFIXES
                   and ".cache" not in p.relative_to(folder).parts),
                  key=lambda p: p.relative_to(folder).as_posix())


def weights_fingerprint(folder: Path, *, full: bool = False) -> tuple[str | None, int, int]:
    """(fingerprint, total bytes, number of files); fingerprint None when there are no weight files."""
    files = weight_files(folder)
    if not files:
        return None, 0, 0
    h = hashlib.sha256()
    total = 0
    for p in files:
        size = p.stat().st_size
        total += size
        h.update(p.relative_to(folder).as_posix().encode() + b"\0")
        h.update(str(size).encode() + b"\0")
        h.update(_file_digest(p, size, full).encode() + b"\n")
    return "w1:" + h.hexdigest(), total, len(files)


def tokenizer_facts(folder: Path) -> tuple[str | None, int | None]:
    """(hash of the vocab-defining tokenizer files, distinct ids in tokenizer.json)."""
    h = hashlib.sha256()
    found = False
    for name in TOKENIZER_FILES:
        p = folder / name
        if p.is_file():
            found = True
            h.update(name.encode() + b"\0" + p.read_bytes() + b"\0")
    size = None
    tj = folder / "tokenizer.json"
    if tj.is_file():
        from specops.jsonfile import TOKENIZER_MAX_BYTES, load_json

        data = load_json(tj, fix="re-save the tokenizer with save_pretrained", max_bytes=TOKENIZER_MAX_BYTES)
        size = tokenizer_vocab_size(data)
    return ("t1:" + h.hexdigest()) if found else None, size


def tokenizer_vocab_size(data) -> int | None:
    """Distinct token ids in a parsed tokenizer.json (its model vocab and added tokens); None when it
    is not shaped like one."""
    if not isinstance(data, dict):
        return None
    model = data.get("model") if isinstance(data.get("model"), dict) else {}
    vocab = model.get("vocab") or {}
    if isinstance(vocab, dict):
        ids = {v for v in vocab.values() if isinstance(v, int)}
    elif isinstance(vocab, list):
        ids = set(range(len(vocab)))
    else:
        return None
    added = data.get("added_tokens") if isinstance(data.get("added_tokens"), list) else []
    ids |= {t.get("id") for t in added if isinstance(t, dict) and isinstance(t.get("id"), int)}
    return len(ids)


def read_config(folder: Path) -> tuple[dict, bytes]:
    """config.json as a dict (and its bytes). Missing/unreadable/invalid -> InputError (exit 2)."""
    if not folder.exists():
        raise InputError(f"model folder {folder} does not exist",
                         "give the path of a local Hugging Face model folder (the one holding config.json)")
    if not folder.is_dir():
        raise InputError(f"{folder} is not a folder", "give the model folder, not a file inside it")
    cfg = folder / "config.json"
    if not cfg.is_file():
        raise InputError(f"no config.json in {folder}",
                         "point at a Hugging Face model folder (save it with save_pretrained)")
    from specops.modelconfig import read_model_config

    data = read_model_config(folder).data
    try:
        raw = cfg.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {cfg}: {exc.strerror}", f"make {cfg} readable (chmod a+r)") from exc
    return data, raw


def _int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def config_facts(cfg: dict) -> dict:
    """The columns of ArtifactFacts derived from config.json, plus the `facts` extras."""
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    arch = cfg.get("architectures") or text.get("architectures") or []
    get = lambda k: cfg.get(k, text.get(k))  # noqa: E731 - tiny accessor
    quant = cfg.get("quantization_config") or text.get("quantization_config")
    spec = cfg.get("speculators_config") if isinstance(cfg.get("speculators_config"), dict) else None
    extras: dict = {}
    if spec is not None:
        verifier = spec.get("verifier") if isinstance(spec.get("verifier"), dict) else {}
        extras["speculators_model_type"] = cfg.get("speculators_model_type")
        extras["verifier"] = verifier.get("name_or_path")
        extras["proposal_methods"] = [p.get("proposal_type") for p in spec.get("proposal_methods") or []
                                      if isinstance(p, dict)]
    kinds = " ".join(str(x) for x in (*(arch if isinstance(arch, list) else []), cfg.get("model_type"),
                                      cfg.get("speculators_model_type"))).lower()
    if "eagle" in kinds:  # the trainer's markers, recorded as read (specops.speculation.eagle_generation)
        extras["eagle"] = eagle_markers(cfg).record()
    return {
        "architecture": str(arch[0]) if isinstance(arch, list) and arch else None,
        "model_type": cfg.get("model_type") or text.get("model_type"),
        "hidden_size": _int(get("hidden_size")),
        "target_hidden_size": _int(get("target_hidden_size")),
        "num_layers": _int(get("num_hidden_layers")),
        "vocab_size": _int(get("vocab_size")),
        "draft_vocab_size": _int(get("draft_vocab_size")),
        "quantization": (quant.get("quant_method") if isinstance(quant, dict) else None),
        "dtype": str(get("torch_dtype") or get("dtype") or "") or None,
        "facts": extras,
    }


def infer_method(cfg_facts: dict) -> str | None:
    """The speculative method a draft folder is for, from its config (None when it cannot tell)."""
    extras = cfg_facts.get("facts") or {}
    kinds = [str(x).lower() for x in [extras.get("speculators_model_type"), *(extras.get("proposal_methods") or [])]
             if x]
    arch = (cfg_facts.get("architecture") or "").lower()
    model_type = (cfg_facts.get("model_type") or "").lower()
    for word, method in DRAFT_CONFIG_TYPES.items():
        if any(word in k for k in kinds) or word in arch or word in model_type:
            return method
    if "eagle" in arch or "eagle" in model_type or any("eagle" in k for k in kinds):
        return "eagle"
    if arch.endswith("forcausallm"):
        return "draft_model"
    return None


def eagle_generation(method: str, cfg_facts: dict) -> str | None:
    """"3", "3.1" or None (cannot tell) for an eagle3 draft, from the markers config_facts recorded."""
    if method != "eagle3":
        return None
    return ((cfg_facts.get("facts") or {}).get("eagle") or {}).get("eagle_generation", "3")


def looks_like_hub_id(text: str) -> bool:
    """'org/name' or 'org/name@rev' that is not a local path (no leading ./ ../ / ~, parent absent)."""
    if text.startswith(("/", ".", "~")) or not HUB_ID.match(text):
        return False
    return not Path(text.split("@")[0]).exists() and not Path(text.split("/")[0]).is_dir()


def inspect_artifact(path_or_id: str, *, full_weights_hash: bool = False) -> dict:
    """All ArtifactFacts fields for a local folder or a hub id (recorded as given)."""
    if looks_like_hub_id(path_or_id):
        hub_id, _, rev = path_or_id.partition("@")
        return {"source": hub_id, "source_kind": "hub", "hub_revision": rev or None,
                "hub_commit": rev if COMMIT.match(rev or "") else None,
                "fingerprint": f"hub:{hub_id}@{rev}" if rev else None, "facts": {"unpinned": not rev}}
    folder = Path(path_or_id).expanduser().resolve()
    cfg, raw = read_config(folder)
    facts = config_facts(cfg)
    tok_hash, tok_size = tokenizer_facts(folder)
    wfp, wbytes, nfiles = weights_fingerprint(folder, full=full_weights_hash)
    facts["facts"]["weight_files"] = nfiles
    commit = folder.name if COMMIT.match(folder.name) and folder.parent.name == "snapshots" else None
    combined = "f1:" + _sha(f"{wfp}\n{_sha(raw)}\n{tok_hash}".encode())
    return {"source": str(folder), "source_kind": "local", "hub_revision": None, "hub_commit": commit,
            "tokenizer_hash": tok_hash, "tokenizer_vocab_size": tok_size, "weights_fingerprint": wfp,
            "weights_bytes": wbytes, "fingerprint": combined, **facts}
