"""Issue 37: planner/moe_steps.py, the published step cost of SGLang EAGLE-3 on Qwen3-30B-A3B by tokens verified
(playbooks/data/moe_spec_steps_2026-12.csv) and the model's price of the same configurations. Shipped data, catalog
and profiles; nothing faked."""

from __future__ import annotations

import pytest

from specops.planner.catalog import load_catalogs
from specops.planner.moe_steps import load_spec_steps, model_price


def test_rows_carry_their_provenance_and_reproduce_the_published_ratio():
    rows = {r.id: r for r in load_spec_steps()}
    assert len(rows) == 16 and all(r.url.startswith("https://github.com/") and r.location for r in rows.values())
    r = rows["SpecForge339-bs4-3-1-4"]  # 447.90 tok/s at acc len 1.86 against 566.21 tok/s without speculation
    assert r.published_cost == pytest.approx(1.86 * 566.21 / 447.90)
    assert all(r.batch <= 20 for r in rows.values())  # mtbench:20 runs at most 20 sequences at once


def test_model_price_grows_with_tokens_verified():
    """Verifying more tokens reads more routed experts: the model's verification of 4 < 8 < 60 tokens at batch 1,
    each above the decode step."""
    cat = load_catalogs()
    by = {r.num_draft_tokens: model_price(r, cat) for r in load_spec_steps()
          if r.source.startswith("sgl-project/SpecForge") and r.batch == 1}
    assert by[4].base_ms < by[4].verify_ms < by[8].verify_ms < by[60].verify_ms
