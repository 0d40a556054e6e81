"""vLLM 0.33's defaults that change what a launch does: the default model runner, and adaptive
verification (``speculative_config.enable_adaptive_verification``).

- :func:`default_runner` — Model Runner V2 is the default from 0.33.0 (vllm/config/vllm.py
  ``use_v2_model_runner``) unless a feature forces V1: methods suffix and custom_class, EAGLE with
  ``parallel_drafting`` (P-EAGLE), heterogeneous-vocabulary drafts. dspark runs only on V2. Before
  0.33.0 only what a method forces is known (None otherwise: the rows that test it "may apply").
- :func:`with_adaptive_verification` — the launch with adaptive verification on, or a
  CapabilityError naming the capability row that refuses it (LoRA, pipeline parallelism, no FULL
  CUDA graphs, a method without a draft model or on V1, a release before 0.33.0). The rows in
  playbooks/vllm/capabilities.csv decide; nothing here repeats their conditions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specops.capabilities import CapabilityTable, default_table, format_version, parse_version
from specops.errors import CapabilityError

if TYPE_CHECKING:
    from specops.engines.argv import LaunchConfig

V2_DEFAULT = (0, 33, 0)
FORCES_V1 = ("suffix", "custom_class")


def default_runner(method: str, version: tuple[int, int, int], *, parallel_drafting: bool = False,
                   heterogeneous_vocab: bool = False) -> str | None:
    """"v1", "v2", or None (not known for this release)."""
    if method in FORCES_V1 or (parallel_drafting and method in ("eagle", "eagle3")) or heterogeneous_vocab:
        return "v1"
    if method == "dspark":
        return "v2"
    return "v2" if version >= V2_DEFAULT else None


def with_adaptive_verification(cfg: LaunchConfig, table: CapabilityTable | None = None) -> LaunchConfig:
    """``cfg`` with adaptive verification on, where the capability rows allow it; else CapabilityError."""
    from specops.engines.bugs import audit

    table = table or default_table()
    v = parse_version(cfg.vllm_version)
    if not table.has("field", "enable_adaptive_verification", v):
        row = table.lookup("field", "enable_adaptive_verification")
        raise CapabilityError(f"adaptive verification does not exist in vLLM {format_version(v)} "
                              f"(it exists in {row.span() if row else 'no release'})",
                              "drop --adaptive-verification or use --vllm-version 0.33.0")
    if cfg.vllm_method() in ("none", ""):
        raise CapabilityError("adaptive verification sizes the verified draft per step: it needs speculation",
                              "drop --adaptive-verification, or pin a model-based method (--method eagle3)")
    on = cfg.model_copy(update={"adaptive_verification": True})
    _facts, findings = audit(on, table=table)
    refused = [f for f in findings if f.status == "applies" and f.row.effect == "refuse"]
    if refused:
        r = refused[0].row
        raise CapabilityError(f"vLLM {cfg.vllm_version} refuses adaptive verification for this launch: {r.name}",
                              f"{r.notes.split('. ')[0].rstrip('.')} (playbooks/vllm/capabilities.csv), or drop "
                              "--adaptive-verification")
    return on


def render_adaptive(cfg: LaunchConfig, table: CapabilityTable, warn) -> LaunchConfig:
    """``recommend --adaptive-verification``: the launch with it on where the rows allow, else unchanged
    with a warning naming the row that refuses it. Either way the plan says what it did."""
    row = table.lookup("field", "enable_adaptive_verification")
    if row is not None and not table.has("field", "enable_adaptive_verification", cfg.vllm_version):
        raise CapabilityError(f"--adaptive-verification: vLLM {cfg.vllm_version} has no enable_adaptive_verification "
                              f"(it exists in {row.span()})", "use --vllm-version 0.33.0, or drop --adaptive-verification")
    try:
        on = with_adaptive_verification(cfg, table)
    except CapabilityError as exc:
        warn(f"--adaptive-verification not rendered: {exc.message} (To fix: {exc.fix})")
        return cfg
    warn("adaptive verification is on (enable_adaptive_verification): the prediction is for a fixed γ and does not "
         "model it; vLLM's published runs show acceptance length falling while throughput rises (vllm#52992, "
         "vllm#52362: slower at concurrency 4-32). The monitor judges this deployment on its realized gain "
         "(accepted tokens/s, TPOT against a no-speculation baseline): record one with `specops bench --baseline`")
    return on
