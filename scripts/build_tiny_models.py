#!/usr/bin/env python
"""Build the tiny real models that the tests and `make demo` run on a CPU vLLM engine.

Seeded and fixed-step (never time-budgeted), so two runs on the same inputs give the same losses.
Outputs under --out (tests/assets/tiny-models by default):

- ``target-v1``: LlamaForCausalLM, 4 layers, hidden 192, tied embeddings (≈2.6M params), trained on
  Python stdlib source;
- ``draft-v1``: 2 layers, hidden 128 (≈0.9M params), trained on the same code: a working draft for
  target-v1 (draft_model speculation, acceptance ≈0.4–0.6 at γ=3);
- ``target-v2``: target-v1 fine-tuned on prose (license texts): the stale-draft case, where
  draft-v1's acceptance collapses;
- ``BUILD.json``: seed, steps, library versions, data file list hash and losses.

Every model folder holds the same byte-level BPE tokenizer (vocab 4096), saved with
PreTrainedTokenizerFast, and bf16 safetensors weights. Run with 2 torch threads:

    .venv/bin/python scripts/build_tiny_models.py --out tests/assets/tiny-models
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import sys
import sysconfig
import time
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # deterministic tokenizer training
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SEED = 20240611
VOCAB = 4096
SEQ = 64
BATCH = 8
SPECIAL = "<|endoftext|>"

TARGET = dict(hidden_size=192, intermediate_size=512, num_hidden_layers=4, num_attention_heads=3,
              num_key_value_heads=3)
DRAFT = dict(hidden_size=128, intermediate_size=344, num_hidden_layers=2, num_attention_heads=2,
             num_key_value_heads=2)


def code_files() -> list[Path]:
    """Top-level stdlib modules of the running Python, sorted: the same on every CPython 3.11."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    return sorted(p for p in stdlib.glob("*.py") if p.is_file())


def prose_files() -> list[Path]:
    """License texts: Debian's common licenses plus CPython's own LICENSE, sorted."""
    files = sorted(p for p in Path("/usr/share/common-licenses").glob("*")
                   if p.is_file() and not p.is_symlink())
    lic = Path(sysconfig.get_paths()["stdlib"]) / "LICENSE.txt"
    if lic.is_file():
        files.append(lic)
    if not files:
        sys.exit("no prose found: /usr/share/common-licenses is empty and LICENSE.txt is missing")
    return files


def read_all(files: list[Path]) -> str:
    return f"\n{SPECIAL}\n".join(p.read_text(encoding="utf-8", errors="replace") for p in files)


def files_hash(files: list[Path]) -> str:
    h = hashlib.sha256()
    for p in files:
        h.update(p.name.encode())
        h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def build_tokenizer(code: str, prose: str):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=[SPECIAL], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    chunks = [c for c in (code + "\n" + prose).split("\n\n") if c]
    tok.train_from_iterator(chunks, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=SPECIAL, eos_token=SPECIAL,
                                   unk_token=SPECIAL, pad_token=SPECIAL, model_max_length=512)


def encode(tokenizer, text: str):
    import torch

    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return torch.tensor(ids, dtype=torch.long)


def split(ids):
    cut = int(len(ids) * 0.95)
    return ids[:cut], ids[cut:]


def make_model(shape: dict, tokenizer):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=VOCAB, max_position_embeddings=512, tie_word_embeddings=True,
                      rms_norm_eps=1e-5, rope_theta=10000.0,
                      bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                      pad_token_id=tokenizer.pad_token_id, **shape)
    torch.manual_seed(SEED)
    return LlamaForCausalLM(cfg)


def batch(ids, gen, size=BATCH):
    import torch

    starts = torch.randint(0, len(ids) - SEQ - 1, (size,), generator=gen)
    return torch.stack([ids[s:s + SEQ + 1] for s in starts.tolist()])


def val_loss(model, val_batches) -> float:
    import torch

    model.eval()
    with torch.no_grad():
        losses = [model(input_ids=b[:, :-1], labels=b[:, :-1]).loss.item() for b in val_batches]
    model.train()
    return round(sum(losses) / len(losses), 4)


def train(model, train_ids, val_ids, steps: int, lr: float, label: str, seed: int) -> dict:
    """Fixed-step AdamW + cosine schedule with linear warm-up, float32; returns losses.

    float32, not bf16 autocast: on CPUs without AVX512-BF16 (e.g. AVX2-only EPYC) bf16 matmuls run
    about 14x slower than float32, and float32 is reproducible everywhere."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    vgen = torch.Generator().manual_seed(seed + 1)
    val_batches = [batch(val_ids, vgen) for _ in range(6)]
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    warm = max(1, min(50, steps // 10))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else
        0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (s - warm) / max(1, steps - warm))))
    model.train()
    t0, log = time.monotonic(), []
    for step in range(steps):
        b = batch(train_ids, gen)
        loss = model(input_ids=b[:, :-1], labels=b[:, :-1]).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        if step % 20 == 0 or step == steps - 1:
            log.append([step, round(loss.item(), 4)])
            print(f"[{label}] step {step}/{steps} loss {loss.item():.3f} "
                  f"({time.monotonic() - t0:.0f}s)", flush=True)
    result = {"steps": steps, "lr": lr, "train_loss": log, "val_loss": val_loss(model, val_batches),
              "seconds": round(time.monotonic() - t0, 1)}
    print(f"[{label}] val loss {result['val_loss']} in {result['seconds']}s", flush=True)
    return result


def save(model, tokenizer, folder: Path) -> None:
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    model.to(torch.float32)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1]
                    / "tests" / "assets" / "tiny-models")
    ap.add_argument("--target-steps", type=int, default=200)
    ap.add_argument("--draft-steps", type=int, default=200)
    ap.add_argument("--finetune-steps", type=int, default=60)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)

    import tokenizers
    import torch
    import transformers

    torch.set_num_threads(args.threads)
    torch.manual_seed(SEED)
    t_all = time.monotonic()
    code_list, prose_list = code_files(), prose_files()
    code, prose = read_all(code_list), read_all(prose_list)
    tokenizer = build_tokenizer(code, prose)
    code_train, code_val = split(encode(tokenizer, code))
    prose_train, prose_val = split(encode(tokenizer, prose))
    print(f"tokens: code {len(code_train) + len(code_val)}, prose "
          f"{len(prose_train) + len(prose_val)}", flush=True)

    out: Path = args.out
    report: dict = {
        "seed": SEED, "vocab": VOCAB, "seq": SEQ, "batch": BATCH, "threads": args.threads,
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__, "tokenizers": tokenizers.__version__},
        "data": {"code_files": len(code_list), "code_sha256": files_hash(code_list),
                 "code_tokens": int(len(code_train) + len(code_val)),
                 "prose_files": [p.name for p in prose_list], "prose_sha256": files_hash(prose_list),
                 "prose_tokens": int(len(prose_train) + len(prose_val))},
        "models": {},
    }

    target = make_model(TARGET, tokenizer)
    report["models"]["target-v1"] = train(target, code_train, code_val, args.target_steps, 3e-3,
                                          "target-v1", SEED)
    save(target, tokenizer, out / "target-v1")

    draft = make_model(DRAFT, tokenizer)
    report["models"]["draft-v1"] = train(draft, code_train, code_val, args.draft_steps, 3e-3,
                                         "draft-v1", SEED + 10)
    save(draft, tokenizer, out / "draft-v1")

    report["models"]["target-v2"] = train(target, prose_train, prose_val, args.finetune_steps,
                                          1e-3, "target-v2", SEED + 20)
    report["models"]["target-v2"]["from"] = "target-v1"
    save(target, tokenizer, out / "target-v2")

    n_target = sum(p.numel() for p in target.parameters())
    for name, n in (("target-v1", n_target), ("draft-v1", sum(p.numel() for p in draft.parameters())),
                    ("target-v2", n_target)):
        report["models"][name]["params"] = n
    report["total_seconds"] = round(time.monotonic() - t_all, 1)
    (out / "BUILD.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"done in {report['total_seconds']}s -> {out}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
