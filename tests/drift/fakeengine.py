"""A real HTTP /metrics endpoint serving vLLM's own exposition text (recorded from vLLM 0.32 on CPU,
tests/metrics/data/) with the spec-decode counters advanced as the test says: what the monitor reads
from an engine not behind Prometheus, without starting one. Mock: the engine (its counters follow
the test's α instead of a model); the HTTP server, the text format, the parser, the registry are real.

What a test proves on this engine is plumbing (the CLI, wiring, leadership, status around a monitor
cycle), not detector accuracy: its windows follow the acceptance model the product inverts (i.i.d. α,
expected counts, no noise). The detectors' false-alarm, sensitivity and restart claims are checked on
recordings of the real engine instead (tests/drift/test_recorded_traces.py, test_recorded_long.py:
tests/assets/drift-traces/); the 24-hour false-alarm claim of tests/drift/test_detectors.py rests on
the product's trace generator (specops/drift/tracegen.py), which no recording is long enough to replace."""

from __future__ import annotations

import re
import time
from pathlib import Path

from tests.metrics.textserver import TextServer

RECORDED = Path(__file__).resolve().parents[1] / "metrics" / "data" / "vllm-0.32-ngram-k3-1-request.txt"


class FakeEngine:
    def __init__(self, served_name: str = "tiny", k: int = 3, started_s_ago: float = 3600.0) -> None:
        self.template = RECORDED.read_text().replace('model_name="tiny"', f'model_name="{served_name}"')
        self.k, self.start = k, time.time() - started_s_ago
        self.drafts = self.draft_tokens = self.accepted = 0.0
        self.per_pos = [0.0] * k
        self.server = TextServer(self.text())

    @property
    def url(self) -> str:
        return self.server.url

    def advance(self, drafts: float, alpha: float) -> None:
        """``drafts`` more verify steps with i.i.d. per-token acceptance α (expected counts)."""
        self.drafts += drafts
        self.draft_tokens += drafts * self.k
        for i in range(self.k):
            self.per_pos[i] += drafts * alpha ** (i + 1)
        self.accepted = float(sum(round(v) for v in self.per_pos))
        self.server.text = self.text()

    def restart(self) -> None:
        self.start = time.time()
        self.drafts = self.draft_tokens = self.accepted = 0.0
        self.per_pos = [0.0] * self.k
        self.server.text = self.text()

    def text(self) -> str:
        t = re.sub(r"^process_start_time_seconds .*$", f"process_start_time_seconds {self.start:.2f}",
                   self.template, flags=re.M)
        for name, value in (("num_drafts", self.drafts), ("num_draft_tokens", self.draft_tokens),
                            ("num_accepted_tokens", self.accepted)):
            t = re.sub(rf"^(vllm:spec_decode_{name}_total\{{[^}}]*\}}) .*$", rf"\g<1> {value:.1f}", t, flags=re.M)
        for i, v in enumerate(self.per_pos):
            t = re.sub(rf'^(vllm:spec_decode_num_accepted_tokens_per_pos_total\{{[^}}]*position="{i}"\}}) .*$',
                       rf"\g<1> {round(v)}.0", t, flags=re.M)
        return t

    def close(self) -> None:
        self.server.close()
