"""The lossless check's probes: a needle near the context limit (counted with the tiny target's real
tokenizer) and JSON / tool-call prompts; a difference names the probe. Nothing faked."""

from __future__ import annotations

from specops.checks.evaluate import compare_outputs
from specops.checks.probes import lossless_prompts, needle_prompt
from tests.conftest import TINY_MODELS


def _count():
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(TINY_MODELS / "target-v1" / "tokenizer.json"))
    return lambda s: len(tok.encode(s).ids)


def test_the_needle_fills_the_context_up_to_the_limit_with_the_fact_first_and_the_question_last():
    count = _count()
    prompt = needle_prompt(512, 32, count)
    used = count(prompt)
    assert 512 - 32 - 8 - 40 <= used <= 512 - 32 - 8  # near the limit, never over it
    assert prompt.startswith("Remember this: the vault code is 4817")
    assert prompt.endswith("Answer: The vault code is")
    blind = needle_prompt(512, 32, None)  # no counter: one character per token, still fits
    assert count(blind) <= 512 - 32


def test_the_probes_include_structured_prompts_and_the_needle_only_when_the_length_is_known():
    names = [n for n, _ in lossless_prompts(["a", "b"], 512, 32, _count())]
    assert names == ["short-0", "short-1", "json-object", "tool-call", "needle-long"]
    assert "needle-long" not in [n for n, _ in lossless_prompts(["a"], None, 32)]


def test_a_difference_names_the_probe_it_was_found_in():
    same = {"text": "x", "tokens": ["token_id:1", "token_id:2"]}
    other = {"text": "y", "tokens": ["token_id:1", "token_id:3"]}
    out = compare_outputs([same, same, other], [same, same, same], ["short-0", "tool-call", "needle-long"])
    assert not out.ok and out.evidence["differences"] == [{"prompt": 2, "first_difference_at": 1,
                                                           "probe": "needle-long"}]
    assert "(needle-long)" in out.message
