"""A real registry (SQLite file in the test's SPECOPS_HOME) with a matched and a stale deployment."""

from __future__ import annotations

import pytest


@pytest.fixture
def registry():
    from specops.registry import open_registry

    reg = open_registry()
    reg.register_target("acme/tiny-target", name="tiny-target", version="v1")
    reg.register_target("acme/tiny-target-ft", name="tiny-target", version="v2")
    reg.register_draft("acme/tiny-draft", name="tiny-draft", version="v1", target="tiny-target@v1",
                       method="draft_model", trained_on="python stdlib sources", trainer_cmd="build_tiny_models.py")
    common = dict(platform="local", status="running", method="draft_model", num_speculative_tokens=3,
                  vllm_version="0.32.0", served_model_name="tiny", draft_ref="tiny-draft@v1",
                  argv_redacted=["python", "-m", "vllm.entrypoints.openai.api_server", "--speculative-config",
                                 '{"method": "draft_model", "model": "/m/draft", "num_speculative_tokens": 3}'])
    reg.upsert_deployment("tiny-matched", target_ref="tiny-target@v1", endpoint="http://127.0.0.1:9", **common)
    reg.upsert_deployment("tiny-stale", target_ref="tiny-target@v2", endpoint="http://127.0.0.1:9", **common)
    yield reg
    reg.close()
