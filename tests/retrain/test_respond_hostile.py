"""``python -m specops.retrain.respond`` against a hostile server (tests/metrics/hostile.py, a fake
OpenAI-compatible peer): a good answer is read, a dripping one is cut off at the deadline."""

from __future__ import annotations

import json
import time

import pytest

from specops.errors import MeasurementError
from specops.retrain.respond import respond
from tests.metrics.hostile import HostileServer

ANSWER = json.dumps({"choices": [{"message": {"content": "hello"}}]})


def test_respond_reads_a_good_answer():
    s = HostileServer({"/v1/chat/completions": (200, ANSWER)}, content_type="application/json")
    try:
        rows = respond(s.url, "tiny", ["hi"], 8)
    finally:
        s.close()
    assert rows[0]["conversations"][1] == {"role": "assistant", "content": "hello"}


def test_respond_cuts_off_a_dripping_server_at_the_deadline():
    s = HostileServer({"/v1/chat/completions": (200, ANSWER)}, drip_s=0.5, content_type="application/json")
    t0 = time.monotonic()
    try:
        with pytest.raises(MeasurementError, match="2s"):
            respond(s.url, "tiny", ["hi"], 8, timeout=2.0)
    finally:
        s.close()
    assert time.monotonic() - t0 < 5  # was: 0.5 s a byte for the whole answer (~25 s)
