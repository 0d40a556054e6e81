"""The ``local`` backend: distil a small ``draft_model`` from the target's own greedy continuations.

A real torch loop, seeded and fixed-step (never time-budgeted):

1. the target greedily continues each training prompt (``max_new_tokens`` tokens, in-process);
2. the draft (a ``LlamaForCausalLM`` sharing the target's tokenizer) is initialised from the
   incumbent draft when its config is compatible (same vocab, same tokenizer: faster), else fresh
   (2 layers, hidden 128, like tests/assets/tiny-models/draft-v1);
3. AdamW with linear warm-up and cosine decay (fp32, or bf16 autocast), cross-entropy on the
   continuation tokens only (prompt tokens are context, not targets);
4. the draft and the target's tokenizer files are saved to the output folder (bf16 safetensors).

Measured on the tiny models (docs/retrain.md): 48 prose prompts x 64 tokens and 300 steps (≈40 s on
2 cores) bring a stale draft's acceptance from ≈0.05 back to ≈0.47. Meant for small drafts that a CPU
or one GPU trains in minutes; EAGLE heads for real targets go through ``speculators`` or ``specforge``.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import Field

from specops.errors import InputError
from specops.models import Strict

FRESH_SHAPE = dict(hidden_size=128, intermediate_size=344, num_hidden_layers=2, num_attention_heads=2,
                   num_key_value_heads=2)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                   "merges.txt", "tokenizer.model", "chat_template.jinja")


class LocalParams(Strict):
    """Knobs of the local distillation (the defaults are the measured tiny-model recipe)."""


    steps: int = Field(default=300, ge=1, le=1_000_000, description="Optimizer steps (fixed, not time-budgeted).")
    batch_size: int = Field(default=16, ge=1, le=4096, description="Sequences per step.")
    lr: float = Field(default=2e-3, gt=0, le=1, description="Peak AdamW learning rate.")
    weight_decay: float = Field(default=0.0, ge=0, le=1, description="AdamW weight decay.")
    max_new_tokens: int = Field(default=64, ge=1, le=4096, description="Target continuation length per prompt.")
    max_prompt_tokens: int = Field(default=64, ge=1, le=4096, description="Prompt tokens kept (the last ones).")
    seed: int = Field(default=1234, description="Seed for initialisation and batch sampling.")
    threads: int = Field(default=2, ge=1, le=512, description="torch intra-op threads.")
    init: str = Field(default="auto", pattern="^(auto|incumbent|fresh)$",
                      description="auto: the incumbent's weights when compatible, else fresh.")
    bf16: bool = Field(default=False, description="bf16 autocast on CPU: faster for larger drafts on an idle "
                       "machine with bf16 units; slower for tiny ones (measured 7x slower at hidden 96).")


def _compatible(incumbent_dir: Path | None, target_cfg: dict) -> bool:
    if incumbent_dir is None or not (incumbent_dir / "config.json").is_file():
        return False
    from specops.modelconfig import read_model_config

    cfg = read_model_config(incumbent_dir).data
    return (cfg.get("vocab_size") == target_cfg.get("vocab_size")
            and "LlamaForCausalLM" in (cfg.get("architectures") or []))


def build_draft(target_dir: Path, incumbent_dir: Path | None, params: LocalParams):
    """(model, initialised_from or None)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from specops.modelconfig import read_model_config
    from specops.retrain.hf import load_causal_lm

    tcfg = read_model_config(target_dir).data
    use_incumbent = params.init != "fresh" and _compatible(incumbent_dir, tcfg)
    if params.init == "incumbent" and not use_incumbent:
        raise InputError(f"the incumbent draft {incumbent_dir} is not a LlamaForCausalLM with the target's vocab "
                         f"({tcfg.get('vocab_size')})", "use init: auto or fresh")
    if use_incumbent:
        model = load_causal_lm(incumbent_dir, "incumbent draft")
        model.train()
        return model, str(incumbent_dir)
    cfg = LlamaConfig(vocab_size=tcfg["vocab_size"], max_position_embeddings=tcfg.get("max_position_embeddings", 2048),
                      tie_word_embeddings=True, rms_norm_eps=tcfg.get("rms_norm_eps", 1e-5),
                      rope_theta=tcfg.get("rope_theta", 10000.0), bos_token_id=tcfg.get("bos_token_id"),
                      eos_token_id=tcfg.get("eos_token_id"), pad_token_id=tcfg.get("pad_token_id"), **FRESH_SHAPE)
    torch.manual_seed(params.seed)
    model = LlamaForCausalLM(cfg)
    model.train()
    return model, None


def make_examples(prompt_ids: list[list[int]], conts: list[list[int]]):
    """(input ids, labels) per prompt: labels are -100 on the prompt, the continuation elsewhere."""
    out = []
    for ids, cont in zip(prompt_ids, conts, strict=True):
        if cont:
            out.append((ids + cont, [-100] * len(ids) + cont))
    if not out:
        raise InputError("the target produced no continuation for any prompt",
                         "check the prompts and that the target does not emit end-of-text at once")
    return out


def _batch(examples, idx: list[int], pad_id: int):
    import torch

    n = max(len(examples[i][0]) for i in idx)
    ids = torch.full((len(idx), n), pad_id, dtype=torch.long)
    labels = torch.full((len(idx), n), -100, dtype=torch.long)
    mask = torch.zeros((len(idx), n), dtype=torch.long)
    for row, i in enumerate(idx):
        x, y = examples[i]
        ids[row, :len(x)] = torch.tensor(x)
        labels[row, :len(y)] = torch.tensor(y)
        mask[row, :len(x)] = 1
    return ids, labels, mask


def train_loop(model, examples, params: LocalParams, pad_id: int,
               on_step: Callable[[int, float], None] | None = None) -> list[list[float]]:
    """Fixed-step AdamW, warm-up + cosine; returns [[step, loss], ...] every 25 steps and at the end."""
    import torch

    gen = torch.Generator().manual_seed(params.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=params.lr, betas=(0.9, 0.95), weight_decay=params.weight_decay)
    warm = max(1, min(30, params.steps // 10))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else
        0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (s - warm) / max(1, params.steps - warm))))
    log: list[list[float]] = []
    for step in range(params.steps):
        idx = torch.randint(0, len(examples), (min(params.batch_size, len(examples)),), generator=gen).tolist()
        ids, labels, mask = _batch(examples, idx, pad_id)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=params.bf16):
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        if step % 25 == 0 or step == params.steps - 1:
            log.append([step, round(loss.item(), 4)])
        if on_step is not None:
            on_step(step, loss.item())
    model.eval()
    return log


def save_draft(model, target_dir: Path, out: Path) -> None:
    import torch

    out.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    model.to(torch.float32)
    for name in TOKENIZER_FILES:
        if (target_dir / name).is_file():
            shutil.copy2(target_dir / name, out / name)


def distill(target_dir: str | Path, prompts: list[str], out_dir: str | Path, *, incumbent_dir: str | Path | None = None,
            params: LocalParams | None = None, on_step: Callable[[int, float], None] | None = None) -> dict:
    """Run the whole local distillation; returns metrics (losses, seconds, init)."""
    from specops.retrain.hf import (
        check_model_dir,
        encode_prompts,
        greedy_continuations,
        load_causal_lm,
        load_tokenizer,
        set_threads,
    )

    params = params or LocalParams()
    if not prompts:
        raise InputError("no training prompts", "give prompts with --data FILE or record traffic (--from-traffic)")
    target_dir = check_model_dir(target_dir, "target")
    inc = check_model_dir(incumbent_dir, "incumbent draft") if incumbent_dir else None
    set_threads(params.threads)
    t0 = time.monotonic()
    tok = load_tokenizer(target_dir)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    target = load_causal_lm(target_dir, "target")
    ids = encode_prompts(tok, prompts, params.max_prompt_tokens)
    conts = greedy_continuations(target, ids, params.max_new_tokens, tok.eos_token_id)
    del target
    t_gen = time.monotonic() - t0
    model, init_from = build_draft(target_dir, inc, params)
    losses = train_loop(model, make_examples(ids, conts), params, pad, on_step)
    save_draft(model, target_dir, Path(out_dir))
    return {"generate_seconds": round(t_gen, 1), "train_seconds": round(time.monotonic() - t0 - t_gen, 1),
            "steps": params.steps, "examples": len(conts), "continuation_tokens": sum(len(c) for c in conts),
            "losses": losses, "initialised_from": init_from}


def main(argv: list[str] | None = None) -> int:
    """``python -m specops.retrain.local``: the same distillation from the command line."""
    import argparse

    from specops.retrain.prompts import load_prompts

    ap = argparse.ArgumentParser(prog="python -m specops.retrain.local", description=main.__doc__)
    ap.add_argument("--target", required=True)
    ap.add_argument("--prompts", required=True, help="JSONL file, one {\"prompt\": ...} per line")
    ap.add_argument("--out", required=True)
    ap.add_argument("--incumbent")
    ap.add_argument("--params", help="JSON file with LocalParams fields")
    args = ap.parse_args(argv)
    from specops.jsonfile import load_json, validate_json

    params = (validate_json(load_json(args.params), LocalParams, args.params) if args.params else LocalParams())
    metrics = distill(args.target, load_prompts(args.prompts), args.out, incumbent_dir=args.incumbent, params=params)
    print(json.dumps(metrics))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
