"""A Hugging Face model folder's ``config.json``, read once the same way by every command
(recommend, deploy, lineage register-target/draft, retrain): bounded and finite
(:mod:`specops.jsonfile`), an object, and every figure specops uses typed and in range wherever it
appears (the top level or ``text_config``). ``num_attention_heads: "abc"`` or ``0`` or
``max_position_embeddings: 1e400`` is one line naming the file and the key, exit 2.
"""

from __future__ import annotations

from pathlib import Path

from specops.errors import ConfigFileError
from specops.jsonfile import JsonObject, load_json_object

FIX = "re-save the model with save_pretrained, or correct that key in config.json"

_BIG = 1 << 26
INT_KEYS: dict[str, tuple[int, int]] = {
    "hidden_size": (1, _BIG), "num_hidden_layers": (1, 100_000), "num_attention_heads": (1, 1 << 16),
    "num_key_value_heads": (1, 1 << 16), "head_dim": (1, _BIG), "vocab_size": (1, _BIG),
    "intermediate_size": (1, _BIG), "moe_intermediate_size": (0, _BIG), "num_local_experts": (0, 1 << 16),
    "num_experts": (0, 1 << 16), "n_routed_experts": (0, 1 << 16), "num_experts_per_tok": (0, 1 << 16),
    "max_position_embeddings": (1, 1 << 31), "kv_lora_rank": (1, _BIG), "qk_rope_head_dim": (0, _BIG),
    "num_nextn_predict_layers": (0, 1000), "mtp_num_hidden_layers": (0, 1000), "target_hidden_size": (1, _BIG),
    "draft_vocab_size": (1, _BIG), "sliding_window": (1, 1 << 31),
}
"""Figures the planner and the registry read, with the range a real model has."""

STR_KEYS = ("model_type", "torch_dtype", "dtype")


def check_model_config(cfg: JsonObject) -> JsonObject:
    """Refuse a wrong type or an out-of-range figure among :data:`INT_KEYS` (top level and text_config)."""
    for scope in (cfg, cfg.obj("text_config")):
        if scope is None:
            continue
        for key, (lo, hi) in INT_KEYS.items():
            scope.int(key, lo, hi, None)
        for key in STR_KEYS:
            scope.str(key, None, max_len=200)
        archs = scope.list("architectures")
        if archs is not None and not all(isinstance(a, str) and len(a) <= 200 for a in archs):
            raise ConfigFileError(f'"{scope.prefix}architectures" must be a list of class names', FIX,
                                  path=cfg.source)
        quant = scope.obj("quantization_config")
        if quant is not None:
            quant.str("quant_method", None, max_len=100)
            quant.number("bits", 1, 64, None)
            quant.number("w_bit", 1, 64, None)
    return cfg


def read_model_config(folder: str | Path, *, fix: str = FIX) -> JsonObject:
    """``folder/config.json`` as a checked :class:`~specops.jsonfile.JsonObject`."""
    path = Path(folder) / "config.json"
    cfg = load_json_object(path, fix=fix)
    cfg.fix = fix
    return check_model_config(cfg)
