"""Issue 37: SGLang's tree notation in published rows (steps / topk / num_draft_tokens) parsed as SGLang means it:
``--speculative-num-steps`` is the tree's depth (the draft forwards per step) and ``--speculative-num-draft-tokens``
counts the root, so a chain of 3 steps is num_draft 4 and a tree verifies num_draft tokens per request
(evidence.predict_row verifies tree_tokens + 1). Pure parsing of the shipped rows' text; nothing faked."""

from __future__ import annotations

import pytest

from specops.planner.priors import _structure, load_published


@pytest.mark.parametrize(("text", "want"), [
    ("steps 3, topk 3, num_draft 8 (tree)", ("tree", 3, 7)),                     # SpecForge #339, batch 4 row
    ("num-steps 8, eagle-topk 8, num-draft-tokens 64 (tree)", ("tree", 8, 63)),  # SGLang PR #4716
    ("best of sweep: steps 3, topk 3, num_draft 4", ("tree", 3, 3)),            # SpecForge #339, batch 1 row
    ("steps 3, topk 1, num_draft 4 (chain)", ("chain", 3, None)),
    ("tree, depth 6, 60 draft tokens", ("tree", 6, 60)),                         # EAGLE notation: no root counted
])
def test_sglang_tree_depth_and_draft_tokens(text, want):
    assert _structure(text, "eagle3") == want


def test_specforge_339_rows_verify_what_sglang_ran():
    """The two SpecForge #339 tree rows: 3 draft steps each, verifying 4 and 8 tokens a request (tree_tokens + 1)."""
    rows = {(r.batch, r.tau): r for r in load_published() if r.source.startswith("SpecForge issue #339")}
    assert (rows[(1, 1.99)].gamma, rows[(1, 1.99)].tree_tokens + 1) == (3, 4)
    assert (rows[(4, 2.27)].gamma, rows[(4, 2.27)].tree_tokens + 1) == (3, 8)
