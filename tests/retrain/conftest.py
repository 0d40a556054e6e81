"""Fixtures: small real models built once per session, and a real SQLite registry holding the
stale-draft case (deployment "chat" serves target tiny@v2 with draft tiny-draft@v1, which was trained
against tiny@v1)."""

from __future__ import annotations

import pytest

from tests.retrain import minimodels


@pytest.fixture(scope="session")
def mini_models(tmp_path_factory):
    return minimodels.build(tmp_path_factory.mktemp("mini-models"))


@pytest.fixture
def train_prompts():
    return minimodels.prose_prompts(40, offset=2000, stride=500)


@pytest.fixture
def heldout_prompts():
    return minimodels.prose_prompts(6, offset=24000, stride=1300)


def register_stale_case(reg, target_v1, draft_v1, target_v2, deployment: str = "chat"):
    reg.register_target(str(target_v1), name="tiny", version="v1")
    reg.register_target(str(target_v2), name="tiny", version="v2")
    reg.register_draft(str(draft_v1), target="tiny@v1", name="tiny-draft", version="v1", method="draft_model")
    reg.upsert_deployment(deployment, platform="local", status="running", target_ref="tiny@v2",
                          draft_ref="tiny-draft@v1", method="draft_model", num_speculative_tokens=3)


@pytest.fixture
def stale_registry(mini_models):
    from specops.registry import open_registry

    reg = open_registry()
    register_stale_case(reg, mini_models["target-a"], mini_models["draft-a"], mini_models["target-b"])
    yield reg
    reg.close()
