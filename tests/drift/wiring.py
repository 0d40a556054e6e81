"""Shared setup for the wiring tests: a real SQLite registry in SPECOPS_HOME with registered targets
(v1, and v2 = other weights), a draft trained against v1, and a local deployment whose served target
folder starts as a copy of v1 and can be swapped to v2 under it."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.registry.conftest import build_model


def swap_folder(src: Path, dst: Path) -> None:
    """Replace the contents of ``dst`` with ``src``'s (the target pushed again under the same path)."""
    for p in dst.iterdir():
        p.unlink()
    for p in src.iterdir():
        shutil.copy2(p, dst / p.name)


def make_fleet(reg, tmp: Path, engine_url: str, name: str = "chat", labels: dict | None = None) -> dict:
    v1 = build_model(tmp / "models" / "target-v1", seed=1)
    v2 = build_model(tmp / "models" / "target-v2", seed=2)
    draft = build_model(tmp / "models" / "draft-v1", seed=3, layers=1)
    served = tmp / "serve" / "target"
    shutil.copytree(v1, served)
    if not reg.list_targets():
        reg.register_target(str(served), name="tiny", version="1")
        reg.register_target(str(v2), name="tiny", version="2")
        reg.register_draft(str(draft), target="tiny@1", name="tiny-draft", version="1", method="draft_model")
    t1, d = reg.get_target("tiny@1"), reg.get_draft("tiny-draft@1")
    reg.upsert_deployment(name, platform="local", status="running", target_ref="tiny@1", draft_ref=d.ref,
                          method="draft_model", num_speculative_tokens=3, endpoint=engine_url,
                          served_model_name="tiny", target_fingerprint=t1.fingerprint,
                          argv_redacted=["python", "-m", "vllm.entrypoints.openai.api_server", "--model", str(served),
                                         "--served-model-name", "tiny"], labels=labels)
    return {"v1": v1, "v2": v2, "draft": draft, "served": served, "t1": t1, "d": d}
