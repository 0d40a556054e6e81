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


def test_the_deploy_check_fails_naming_the_needle_when_only_the_long_prompt_is_corrupted(registry):
    """deploy.lossless through the real checklist and evaluator (specops.checks.evaluate). What is faked:
    the two engines' answers (the bugs that corrupt long prompts need a GPU and TurboQuant KV): the
    speculative side answers every prompt like the baseline except the needle, where one token differs
    - the way vllm#40831 corrupts long contexts while short greedy prompts still match."""
    from specops.checks.evaluate import run_checklist
    from specops.checks.playbook import get_profile, load_checklist
    from specops.checks.sources import Sources, deployment_facts

    registry.upsert_deployment("tiny-matched", platform="local", status="running", engine_config={"max_model_len": 512})
    seen: dict[str, list[str]] = {}

    def complete(endpoint, model, prompts, max_tokens, headers):
        seen[endpoint] = prompts
        out = []
        for p in prompts:
            ids = [f"token_id:{(len(p) * 7 + i) % 97}" for i in range(max_tokens)]
            if endpoint != "http://base:1" and p.startswith("Remember this: the vault code"):
                ids[5] = "token_id:4096"  # the corrupted continuation
            out.append({"text": "".join(ids), "tokens": ids})
        return out

    cl = load_checklist("deploy")
    cl = cl.model_copy(update={"checks": [c for c in cl.checks if c.id == "deploy.lossless"]})
    src = Sources(deployment=deployment_facts(registry.get_deployment("tiny-matched")), registry=registry,
                  baseline_endpoint="http://base:1", complete=complete)
    r = run_checklist(cl, "cpu-tiny", get_profile("cpu-tiny"), src).results[0]
    assert r.status == "fail", r.message
    assert [d["probe"] for d in r.evidence["differences"]] == ["needle-long"]
    assert "(needle-long)" in r.message and "position 5" in r.message
    assert seen["http://base:1"] == seen["http://127.0.0.1:9"]  # the same prompts on both sides
    needle = seen["http://base:1"][-1]  # sized from the recorded max_model_len 512 (no tokenizer: 1 char/token)
    assert needle == needle_prompt(512, get_profile("cpu-tiny").equality_max_tokens, None) and len(needle) > 300
    assert {"json-object", "tool-call", "needle-long"} <= set(r.evidence["probes"])
