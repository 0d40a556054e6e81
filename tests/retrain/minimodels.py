"""Small real models built in a few seconds for unit tests (the committed tiny models take minutes).

Same recipe as scripts/build_tiny_models.py, shrunk: a byte-level BPE tokenizer (vocab 512) on a few
stdlib modules and license texts, a 2-layer hidden-64 target trained on code, a draft, and the target
fine-tuned on prose (the stale-draft case). Seeded and fixed-step.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

SEED = 7
SPECIAL = "<|endoftext|>"


def code_text() -> str:
    std = Path(sysconfig.get_paths()["stdlib"])
    return "\n".join((std / n).read_text(errors="replace") for n in ("textwrap.py", "shlex.py", "bisect.py"))


def prose_text() -> str:
    lic = Path("/usr/share/common-licenses")
    files = sorted(p for p in lic.glob("*") if p.is_file() and not p.is_symlink())[:3]
    std_lic = Path(sysconfig.get_paths()["stdlib"]) / "LICENSE.txt"
    texts = [p.read_text(errors="replace") for p in files] + ([std_lic.read_text()] if std_lic.is_file() else [])
    return "\n".join(texts)


def prose_prompts(n: int, offset: int = 0, stride: int = 500, chars: int = 160) -> list[str]:
    """``n`` prose snippets, one every ``stride`` characters from ``offset`` (the text is ≈33k chars)."""
    text = " ".join(prose_text().split())
    out = [text[offset + i * stride: offset + i * stride + chars] for i in range(n)]
    if len(out[-1]) < chars:
        raise ValueError(f"prose text too short for {n} prompts from {offset} every {stride}")
    return out


def _tokenizer(text: str):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=[SPECIAL], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([c for c in text.split("\n\n") if c], trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=SPECIAL, eos_token=SPECIAL, unk_token=SPECIAL,
                                   pad_token=SPECIAL, model_max_length=512)


def _model(tok, hidden: int, layers: int):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=hidden * 2, num_hidden_layers=layers,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                      tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id)
    torch.manual_seed(SEED)
    return LlamaForCausalLM(cfg)


def _train(model, ids, steps: int, lr: float, seed: int) -> None:
    import torch

    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        starts = torch.randint(0, len(ids) - 65, (16,), generator=gen).tolist()
        b = torch.stack([ids[s:s + 64] for s in starts])
        loss = model(input_ids=b, labels=b).loss  # fp32: bf16 autocast is slower on models this small
        loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval()


def build(out: Path) -> dict[str, Path]:
    """target-a (code), draft-a (code), target-b (target-a fine-tuned on prose) under ``out``."""
    import torch

    torch.set_num_threads(1)  # 2 threads on a shared 2-core machine spin-wait each other (20x slower)
    code, prose = code_text(), prose_text()
    tok = _tokenizer(code + "\n" + prose)
    enc = lambda t: torch.tensor(tok(t, add_special_tokens=False)["input_ids"])  # noqa: E731
    code_ids, prose_ids = enc(code), enc(prose)
    paths = {n: out / n for n in ("target-a", "draft-a", "target-b")}
    target = _model(tok, 96, 2)
    _train(target, code_ids, 120, 3e-3, SEED)
    _save(target, tok, paths["target-a"])
    draft = _model(tok, 48, 1)
    _train(draft, code_ids, 120, 3e-3, SEED + 1)
    _save(draft, tok, paths["draft-a"])
    _train(target, prose_ids, 80, 2e-3, SEED + 2)
    _save(target, tok, paths["target-b"])
    return paths


def _save(model, tok, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    tok.save_pretrained(folder)


def code_prompts(n: int, offset: int = 0, stride: int = 900, chars: int = 160) -> list[str]:
    """``n`` snippets of the code the target and draft were trained on."""
    text = code_text()
    return [text[offset + i * stride: offset + i * stride + chars] for i in range(n)]
