"""Loading tiny-to-medium Hugging Face causal LMs in-process (torch + transformers, CPU friendly).

Heavy imports stay inside functions: importing :mod:`specops.retrain` never loads torch.
"""

from __future__ import annotations

from pathlib import Path

from specops.errors import InputError


def set_threads(threads: int | None) -> None:
    """Pin torch to ``threads`` intra-op threads (the CPU tests use 2: the machine has 2 cores)."""
    import torch

    if threads:
        torch.set_num_threads(int(threads))


def check_model_dir(path: str | Path, role: str) -> Path:
    p = Path(path).expanduser()
    if not (p / "config.json").is_file():
        raise InputError(f"{role} folder {p} has no config.json",
                         f"pass a local Hugging Face model folder for the {role}")
    return p.resolve()


def load_causal_lm(path: str | Path, role: str = "model"):
    """A float32 model in eval mode (float32: exact and repeatable greedy decoding on CPU), loaded from
    the local folder only (``local_files_only``: nothing is fetched from the Hub, and the process
    environment is left as it was)."""
    import torch
    from transformers import AutoModelForCausalLM

    p = check_model_dir(path, role)
    try:  # offline by argument, not by setting HF_HUB_OFFLINE in the caller's environment
        model = AutoModelForCausalLM.from_pretrained(str(p), dtype=torch.float32, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot load the {role} from {p}: {str(exc).splitlines()[0]}",
                         f"check that {p} is a complete Hugging Face causal-LM folder") from exc
    model.eval()
    return model


def load_tokenizer(path: str | Path):
    from transformers import AutoTokenizer

    p = check_model_dir(path, "tokenizer")
    try:
        tok = AutoTokenizer.from_pretrained(str(p), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot load a tokenizer from {p}: {str(exc).splitlines()[0]}",
                         "the target folder must hold its tokenizer files (tokenizer.json, ...)") from exc
    return tok


def encode_prompts(tokenizer, prompts: list[str], max_prompt_tokens: int) -> list[list[int]]:
    """Token ids per prompt, cut to the last ``max_prompt_tokens`` tokens; empty prompts are refused."""
    out = []
    for i, text in enumerate(prompts):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if not ids:
            raise InputError(f"prompt {i + 1} is empty after tokenization", "drop empty prompts from the data")
        out.append(ids[-max_prompt_tokens:])
    return out


def greedy_tokens(model, context: list[int], n: int, stop_id: int | None = None) -> list[int]:
    """Up to ``n`` greedy tokens after ``context`` (a plain loop with the KV cache: on tiny models
    generate()'s per-call overhead dominates). Stops after emitting ``stop_id``, like generate()."""
    import torch

    out: list[int] = []
    x = torch.tensor([context], dtype=torch.long)
    past = None
    with torch.no_grad():
        for _ in range(n):
            res = model(input_ids=x, past_key_values=past, use_cache=True)
            past = res.past_key_values
            nxt = int(res.logits[0, -1].argmax())
            out.append(nxt)
            if stop_id is not None and nxt == stop_id:
                break
            x = torch.tensor([[nxt]], dtype=torch.long)
    return out


def greedy_continuations(model, prompt_ids: list[list[int]], max_new_tokens: int, eos_id: int | None) -> list[list[int]]:
    """The model's own greedy continuation of every prompt (one prompt at a time: no padding effects)."""
    return [greedy_tokens(model, ids, max_new_tokens, eos_id) for ids in prompt_ids]
