"""The known-bug mitigations a candidate's launch will carry, and their price in the prediction.

The renderer applies the capability table's ``mitigate`` rows to the chosen launch
(:func:`specops.engines.bugs.known_bugs`); the cost model must charge for them before it chooses, or a
candidate that will run without CUDA graphs competes with the graph-captured speed it will not get.
:func:`launch_mitigations` asks the same rows (:func:`specops.engines.bugs.audit` on the launch that
candidate would render) which flags they add; :func:`priced` turns them into evaluation inputs:

- ``--enforce-eager`` (e.g. TurboQuant KV + speculation under CUDA graphs, vllm#40831): the speculative
  launch runs with :func:`~specops.planner.perfmodel.eager_profile` - the baseline it is compared with
  keeps its graphs, so the speedup is against what the user would run without speculation;
- ``speculative_config.kv_cache_dtype=auto`` (the draft's KV kept out of FP8): the draft's KV is
  priced at 16 bits (memory and the draft's reads);
- ``--no-enable-prefix-caching`` (MTP on hybrid models): the model does not credit prefix-cache hits,
  so losing them costs nothing here; the decision path says so (with shared prompt prefixes TTFT rises).
"""

from __future__ import annotations

from dataclasses import dataclass

from specops.planner.perfmodel import EngineProfile, eager_profile

DRAFT_KV_AUTO = "speculative_config.kv_cache_dtype=auto"
UNPRICED = {"--no-enable-prefix-caching": "not priced: the model credits no prefix-cache hits, so losing them "
            "costs nothing here (with shared prompt prefixes TTFT rises)"}


@dataclass(frozen=True)
class Priced:
    """What the mitigations change in one evaluation."""

    flags: tuple[str, ...]
    spec_profile: EngineProfile | None
    draft_kv_dtype: str | None

    def note(self) -> str:
        parts = []
        for f in self.flags:
            if f == "--enforce-eager":
                parts.append("--enforce-eager priced as no CUDA graphs (the eager profile's launch costs)")
            elif f == DRAFT_KV_AUTO:
                parts.append("the draft's KV priced at 16 bits (speculative_config.kv_cache_dtype: auto)")
            else:
                parts.append(f"{f} {UNPRICED.get(f, 'not priced')}")
        return "; ".join(parts)


def launch_mitigations(ctx, method: str, kv_dtype: str, draft_id: str | None, gamma: int) -> tuple[str, ...]:
    """Flags the capability table's mitigate rows add to the launch this candidate would render (cached per
    method × KV dtype × draft on the context)."""
    if method == "none" or not gamma:
        return ()
    cache = ctx.mitigation_cache
    key = (method, kv_dtype, draft_id)
    if key not in cache:
        from specops.engines.bugs import audit
        from specops.errors import SpecopsError
        from specops.planner.render import launch_config

        try:
            _facts, findings = audit(launch_config(ctx, method, draft_id, gamma, kv_dtype, None), table=ctx.table)
        except SpecopsError:
            findings = []  # a launch the rows refuse is refused when it is rendered, not priced here
        cache[key] = tuple(m for f in findings if f.status == "applies" and f.row.effect == "mitigate"
                           for m in f.missing)
    return cache[key]


def priced(profile: EngineProfile, flags: tuple[str, ...]) -> Priced:
    return Priced(flags, eager_profile(profile) if "--enforce-eager" in flags else None,
                  "auto" if DRAFT_KV_AUTO in flags else None)
