"""`status` on deployments specops did not start: adopted or registered engines are probed at their
endpoint (health, live acceptance) or say why not. Real registry (SQLite), real HTTP; the engine is
tests/drift/fakeengine.py (vLLM's recorded exposition text, counters advanced by the test)."""

from __future__ import annotations

from specops.engines.manage import status
from specops.registry import open_registry
from tests.drift.fakeengine import FakeEngine


def test_an_adopted_engine_is_probed_at_its_endpoint():
    engine = FakeEngine()
    reg = open_registry()
    try:
        reg.upsert_deployment("ext", platform="local", status="adopted", method="ngram", num_speculative_tokens=3,
                              endpoint=engine.url, served_model_name="tiny")
        engine.advance(200, 0.7)
        (st,) = status("ext", registry=reg)
        assert st.health == "ok" and st.process == "-"
        assert st.acceptance_rate is not None and 0 < st.acceptance_rate < 1
    finally:
        reg.close()
        engine.close()


def test_without_an_endpoint_status_says_why_and_the_fix_works():
    engine = FakeEngine()
    reg = open_registry()
    try:
        reg.upsert_deployment("ext", platform="local", status="adopted", method="ngram", num_speculative_tokens=3)
        (st,) = status("ext", registry=reg)
        assert st.health == "-" and "To fix:" in st.note and "--endpoint" in st.note
        reg.upsert_deployment("ext", platform="local", status="adopted", endpoint=engine.url)
        (st,) = status("ext", registry=reg)
        assert st.health == "ok"
    finally:
        reg.close()
        engine.close()


def test_an_unreachable_adopted_engine_is_unreachable_with_the_reason():
    reg = open_registry()
    try:
        reg.upsert_deployment("ghost", platform="local", status="adopted", method="ngram", endpoint="http://127.0.0.1:9")
        (st,) = status("ghost", registry=reg)
        assert st.health == "unreachable" and "127.0.0.1:9" in st.note
    finally:
        reg.close()
