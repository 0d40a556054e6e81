"""The local canary's sequential test: the incumbent and the candidate engine, prompt by prompt.

Both engines serve (the incumbent keeps its users; the canary engine is the deployment's spec with
the candidate draft). Each held-out prompt goes to the incumbent, then to the candidate (greedy,
``ignore_eos``: both see the same target tokens), one request at a time, so two CPU engines never
generate at once. One sample is the difference of the two requests' acceptance rates (accepted /
drafted tokens): from the response's ``metrics.speculative_decoding`` when the engine runs with
``--per-request-spec-decode-metrics``, else from the ``vllm:spec_decode_*`` counters scraped just
before and after the request (exact when nothing else reaches that engine meanwhile; live traffic on
the incumbent adds its own tokens to that request's sample). After every sample the test of
:mod:`specops.heal.sequential` may stop: "better", "worse", or, when the prompts or the budget run out,
"no-decision". The traffic is *replayed prompts*, and the verdict says so.
"""

from __future__ import annotations

import hashlib
import time

from specops.errors import MeasurementError
from specops.heal.sequential import Sequential, SequentialTest, rate_difference

TRAFFIC_LOCAL = "replayed-prompts"
METRIC = "acceptance-rate difference (accepted/drafted tokens) per replayed prompt, candidate - incumbent"


class EngineArm:
    """One engine: sends a prompt and reads that request's accepted and drafted tokens."""

    def __init__(self, deployment: str, endpoint: str, served: str | None, headers: dict) -> None:
        from specops.engines.client import VllmClient
        from specops.metrics import pick_group, scrape

        self.deployment, self.endpoint, self.headers = deployment, endpoint, headers
        self.first = scrape(endpoint, headers=headers)
        self.group = pick_group(self.first, served)
        self.served = served or self.group
        self.client = VllmClient(endpoint, headers, deadline_s=600.0)
        self.seconds = 0.0

    def request(self, prompt: str, max_tokens: int) -> tuple[float, float, str, float]:
        """(accepted, drafted, where from, seconds) of one greedy request."""
        from specops.engines.client import completion_body
        from specops.metrics import delta, scrape

        before = scrape(self.endpoint, headers=self.headers)
        t0 = time.monotonic()
        body = self.client.complete(completion_body(self.served, prompt, max_tokens, ignore_eos=True),
                                    fix=f"check the engine: specops status {self.deployment}")
        took = time.monotonic() - t0
        self.seconds += took
        spec = ((body.get("metrics") or {}).get("speculative_decoding") or {}) if isinstance(body, dict) else {}
        if isinstance(spec.get("num_draft_tokens"), (int, float)) and isinstance(
                spec.get("num_accepted_draft_tokens"), (int, float)):
            return float(spec["num_accepted_draft_tokens"]), float(spec["num_draft_tokens"]), "response", took
        m = delta(before, scrape(self.endpoint, headers=self.headers), self.group)
        if m.counter_reset:
            raise MeasurementError(f"{self.deployment}: the engine restarted during the canary test",
                                   "check the engine (specops status) and run the canary again")
        return float(m.num_accepted_tokens or 0.0), float(m.num_draft_tokens or 0.0), "counters", took

    def total(self):
        from specops.metrics import delta, scrape

        return delta(self.first, scrape(self.endpoint, headers=self.headers), self.group)


def _sha(prompt: str) -> str:
    return hashlib.sha256(prompt.encode()).hexdigest()[:12]


def paired_test(incumbent: EngineArm, candidate: EngineArm, prompts: list[str], test: SequentialTest, *, max_tokens: int,
                progress=None) -> tuple[Sequential, list[dict]]:
    """Run the test over ``prompts`` (at most ``test.budget``); returns it (stopped) and its samples."""
    seq = Sequential(test)
    samples: list[dict] = []
    for i, prompt in enumerate(prompts[: test.budget]):
        ia, idr, isrc, its = incumbent.request(prompt, max_tokens)
        ca, cdr, csrc, cts = candidate.request(prompt, max_tokens)
        d = rate_difference((ca, cdr), (ia, idr))
        samples.append({"i": i, "prompt_sha256": _sha(prompt), "incumbent": [ia, idr], "candidate": [ca, cdr],
                        "d": None if d is None else round(d, 6), "from": sorted({isrc, csrc}),
                        "seconds": [round(its, 3), round(cts, 3)]})
        if d is None:  # a side drafted nothing on this prompt: the pair says nothing
            continue
        if seq.add(d):
            break
        if progress and (i + 1) % 4 == 0:
            progress(f"canary test: {seq.verdict(with_power=False).line()}")
    seq.close()
    return seq, samples
