"""Cross-check the engine's counters against what the client itself received.

The server's ``vllm:generation_tokens_total`` delta over a run must equal the sum of
``usage.completion_tokens`` the client got, which must equal the sum of per-chunk token counts. With
per-request spec metrics, the drafted/accepted sums must equal the spec counters' deltas. Counters are
server-wide: other traffic during the run shows up here as a disagreement, which is reported, not hidden.
"""

from __future__ import annotations

from specops.benchmark.client import RequestResult
from specops.benchmark.types import CrossCheck
from specops.metrics.types import Measurement


def crosscheck(m: Measurement, results: list[RequestResult]) -> CrossCheck:
    usage = sum(r.completion_tokens or 0 for r in results)
    chunks = sum(r.chunk_tokens for r in results)
    problems: list[str] = []
    server = m.generation_tokens
    if server is None:
        problems.append("the engine exports no vllm:generation_tokens_total: cannot cross-check")
    elif server != usage:
        problems.append(f"engine counted {server:g} generated tokens, the client received {usage} "
                        "(other traffic on the engine, or a counter reset)")
    if chunks != usage:
        problems.append(f"per-chunk token counts sum to {chunks}, final usage says {usage}")
    specs = [r.spec for r in results if r.spec]
    client_draft = client_acc = None
    if specs and len(specs) == len([r for r in results if r.ok]) and m.speculation:
        client_draft = sum(int(s.get("num_draft_tokens", 0)) for s in specs)
        client_acc = sum(int(s.get("num_accepted_draft_tokens", 0)) for s in specs)
        if m.num_draft_tokens != client_draft:
            problems.append(f"engine counted {m.num_draft_tokens:g} draft tokens, requests report {client_draft}")
        if m.num_accepted_tokens != client_acc:
            problems.append(f"engine counted {m.num_accepted_tokens:g} accepted tokens, requests report {client_acc}")
    if m.counter_reset:
        problems.append("a counter reset during the run (engine restarted): deltas are not comparable")
    return CrossCheck(server_generation_tokens=server, client_usage_tokens=usage, client_chunk_tokens=chunks,
                      server_draft_tokens=m.num_draft_tokens, client_draft_tokens=client_draft,
                      server_accepted_tokens=m.num_accepted_tokens, client_accepted_tokens=client_acc,
                      agree=not problems, problems=problems)
