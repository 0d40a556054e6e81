"""Exact in-process acceptance of a draft against a target, and the canary decision.

Greedy speculative decoding is lossless: the output is the target's own greedy continuation. So
acceptance is computed exactly, without an engine: take the target's greedy continuation ``c`` of a
prompt once; at each verify step the draft proposes γ tokens greedily from the accepted prefix; the
accepted count is the length of the common prefix of the proposal and ``c`` at that point; the
target then contributes one token (the correction or bonus token) and the next step starts there.
That is what vLLM's rejection sampler does at temperature 0 (``num_accepted_tokens`` /
``num_draft_tokens`` and the per-position counters), minus numerical noise between batched and
incremental kernels.

On a 2-core machine the incumbent and the candidate are measured one after the other on the same
prompts (two CPU engines at once would measure each other).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from specops.errors import InputError
from specops.retrain.types import Comparison, Decision, DraftAcceptance


def prompts_sha256(prompts: list[str]) -> str:
    return hashlib.sha256(json.dumps(prompts, ensure_ascii=False).encode()).hexdigest()


def simulate(draft, prompt_ids: list[list[int]], continuations: list[list[int]],
             gamma: int) -> tuple[int, int, int, list[int]]:
    """(verify steps, drafted tokens, accepted tokens, accepted count per position)."""
    from specops.retrain.hf import greedy_tokens

    steps = drafted = accepted = 0
    per_pos = [0] * gamma
    for ids, cont in zip(prompt_ids, continuations, strict=True):
        pos = 0
        while pos < len(cont):
            k = min(gamma, len(cont) - pos)
            proposal = greedy_tokens(draft, ids + cont[:pos], k)
            n = 0
            while n < k and proposal[n] == cont[pos + n]:
                per_pos[n] += 1
                n += 1
            steps += 1
            drafted += k
            accepted += n
            pos += n + 1  # the target's own token (correction or bonus) follows the accepted ones
    return steps, drafted, accepted, per_pos


def measure_loaded(target, draft, tokenizer, prompts: list[str], *, gamma: int = 3, max_new_tokens: int = 64,
                   max_prompt_tokens: int = 64, continuations: list[list[int]] | None = None) -> DraftAcceptance:
    """Acceptance of already loaded models (float32, eval mode)."""
    from specops.retrain.hf import encode_prompts, greedy_continuations

    if not prompts:
        raise InputError("no prompts to measure acceptance on", "give at least one held-out prompt")
    if gamma < 1:
        raise InputError(f"gamma {gamma} < 1", "use num_speculative_tokens >= 1")
    ids = encode_prompts(tokenizer, prompts, max_prompt_tokens)
    conts = continuations or greedy_continuations(target, ids, max_new_tokens, tokenizer.eos_token_id)
    steps, drafted, acc, per_pos = simulate(draft, ids, conts, gamma)
    from specops.speculation import Acceptance

    counts = Acceptance(steps, drafted, acc, tuple(per_pos))
    return DraftAcceptance(acceptance_rate=counts.rate or 0.0, mean_acceptance_length=counts.tau or 1.0,
                      per_position=[round(c, 6) for c in counts.per_position or [0.0] * len(per_pos)], num_drafts=steps,
                      num_draft_tokens=drafted, num_accepted_tokens=acc, num_prompts=len(prompts), gamma=gamma,
                      max_new_tokens=max_new_tokens)


def measure_acceptance(target_dir: str | Path, draft_dir: str | Path, prompts: list[str], *, gamma: int = 3,
                       max_new_tokens: int = 64, threads: int | None = 2) -> DraftAcceptance:
    """Load both models from their folders and measure (the target folder's tokenizer is used)."""
    from specops.retrain.hf import load_causal_lm, load_tokenizer, set_threads

    set_threads(threads)
    tok = load_tokenizer(target_dir)
    return measure_loaded(load_causal_lm(target_dir, "target"), load_causal_lm(draft_dir, "draft"), tok, prompts,
                          gamma=gamma, max_new_tokens=max_new_tokens)


def compare_drafts(target_dir: str | Path, incumbent_dir: str | Path | None, candidate_dir: str | Path,
                   prompts: list[str], *, gamma: int = 3, max_new_tokens: int = 64, min_gain: float = 0.0,
                   floor: float = 0.0, threads: int | None = 2) -> Comparison:
    """Measure incumbent and candidate sequentially on the same prompts against the same target.

    The target's greedy continuations are computed once and shared, so both drafts face exactly the
    same verification."""
    from specops.retrain.hf import (
        encode_prompts,
        greedy_continuations,
        load_causal_lm,
        load_tokenizer,
        set_threads,
    )

    set_threads(threads)
    tok = load_tokenizer(target_dir)
    target = load_causal_lm(target_dir, "target")
    conts = greedy_continuations(target, encode_prompts(tok, prompts, 64), max_new_tokens, tok.eos_token_id)
    kw = dict(gamma=gamma, max_new_tokens=max_new_tokens, continuations=conts)
    inc = (measure_loaded(target, load_causal_lm(incumbent_dir, "incumbent draft"), tok, prompts, **kw)
           if incumbent_dir else None)
    cand = measure_loaded(target, load_causal_lm(candidate_dir, "candidate draft"), tok, prompts, **kw)
    return Comparison(target=str(target_dir), incumbent=str(incumbent_dir) if incumbent_dir else None,
                      candidate=str(candidate_dir), prompts_sha256=prompts_sha256(prompts),
                      incumbent_acceptance=inc, candidate_acceptance=cand, min_gain=min_gain, floor=floor)


def decide(comparison: Comparison) -> Decision:
    """promote when the candidate reaches the floor and its acceptance is at least the incumbent's plus
    ``min_gain``; otherwise rollback (keep the incumbent)."""
    cand = comparison.candidate_acceptance.acceptance_rate
    inc = comparison.incumbent_acceptance.acceptance_rate if comparison.incumbent_acceptance else None
    nums = dict(candidate_rate=round(cand, 4), incumbent_rate=None if inc is None else round(inc, 4))
    if cand < comparison.floor:
        return Decision(action="rollback", reason=f"candidate acceptance {cand:.3f} is below the floor "
                        f"{comparison.floor:.3f}", **nums)
    if inc is None:
        return Decision(action="promote", reason=f"no incumbent; candidate acceptance {cand:.3f} reaches the floor "
                        f"{comparison.floor:.3f}", **nums)
    gain = cand - inc
    if gain < comparison.min_gain:
        return Decision(action="rollback", reason=f"candidate acceptance {cand:.3f} does not beat the incumbent's "
                        f"{inc:.3f} by {comparison.min_gain:+.3f} (gain {gain:+.3f})", **nums)
    return Decision(action="promote", reason=f"candidate acceptance {cand:.3f} vs incumbent {inc:.3f} "
                    f"(gain {gain:+.3f} >= {comparison.min_gain:+.3f}) on {comparison.candidate_acceptance.num_prompts} "
                    "held-out prompts", **nums)
