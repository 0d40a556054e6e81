"""Which acceptance basis a window is judged on, and the fast collapse detector with its causes.

**Basis** (issue 40). vLLM's counters give τ per drafted step; what τ means depends on how many
tokens each step drafted:

- ``tau`` — every draft had K tokens (a fixed γ, no schedule): the per-token α solved from τ at the
  drafted length (K), the slow CUSUM's usual input. Also the fallback of a varying length when the
  stored baseline predates first-token acceptance (α at the mean drafted length, a least-spread mix);
- ``drafted_token`` — the drafted length varies (a per-batch γ schedule with ranges of different K,
  n-gram/suffix drafts that stop short, or a window whose num_draft_tokens / num_drafts is below K):
  τ falls with the budget, not with acceptance, so the window is judged on the acceptance of the
  first drafted token (accepted at position 0 / drafts), exact for any mix of draft lengths, against
  the baseline's first-token acceptance. A budget change is never an ``ACCEPTANCE_DROP``;
- ``realized_gain`` — adaptive verification is on (recorded launch): the counters count the
  *scheduled* draft tokens (vllm 0.33.0 ``v1/core/sched/scheduler.py``: num_draft_tokens =
  len(scheduled_spec_token_ids)) while the worker trims what it verifies
  (``v1/worker/gpu/spec_decode/adaptive_verification.py``), so trimmed tokens read as rejected and
  neither τ nor per-token rates can be compared with a fixed-K baseline. Only the realized gain
  (accepted tokens per second, TPOT against the deployment's no-speculation baseline) is judged.
  This reading is an ASSUMPTION taken from the wheel's source: the estimator is Triton-only and did
  not run on CPU here; every finding on this basis says so.

**Collapse.** The CUSUM needs many windows for a step to the floor; a collapse (acceptance ≈ 0 while
drafting continues) is flagged after ``collapse_windows`` (≤ 2) consecutive windows whose τ − 1
(``drafted_token`` basis: first-token acceptance) is below ``collapse_fraction`` of the baseline's,
or, without a baseline τ, whose τ is below ``collapse_tau``. Its causes, each with the runbook step
of ``acceptance-collapse`` that proves or refutes it:

- ``stale_draft_weights`` — a restart, sleep/wake or draft weight update just before the collapse
  (vllm#52487; RL weight sync): draft weights that no longer match the target's;
- ``kv_without_draft_kv`` — a KV connector in the recorded launch (vllm#49071, LMCache#3388): the
  target's KV restored from the store but not the draft's. The engine's own counters are the
  evidence (:func:`prefix_evidence`): tokens a connector restored at the onset
  (``vllm:external_prefix_cache_hits_total``: suspected even when the launch is not on record, or
  says there is no connector) and the prefix hit rate of the onset window against the windows before
  it (``vllm:prefix_cache_hits_total`` / ``vllm:prefix_cache_queries_total``, tokens; a jump of
  ``PREFIX_JUMP`` or more makes an unrecorded launch suspected);
- ``stale_drafter_after_k0`` — the schedule has a K=0 range and the engine just left one
  (TensorRT-LLM#16888): drafter state left stale by the steps without drafts;
- ``method_mismatch`` — the recorded method is not the one the draft's config is for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from specops.drift.detectors import DetectionConfig, LabelBaseline
from specops.drift.observe import LabelWindow, Observation

Basis = Literal["tau", "drafted_token", "realized_gain"]

BASIS_TEXT = {
    "tau": "per-token α from τ at the drafted length actually used (num_draft_tokens / num_drafts; K when fixed)",
    "drafted_token": "first-token acceptance (accepted at position 0 / drafts), per drafted token: the drafted "
                     "length varies, so τ is not compared",
    "realized_gain": "realized gain (accepted tokens/s, TPOT against the no-speculation baseline): adaptive "
                     "verification trims what is verified and the counters still count the scheduled draft tokens "
                     "(an assumption read from vLLM 0.33.0's scheduler.py; the estimator did not run here)",
}
ADAPTIVE_ASSUMPTION = ("assumption: with adaptive verification vLLM 0.33.0 counts scheduled (untrimmed) draft "
                       "tokens, so trimmed tokens read as rejected (read from v1/core/sched/scheduler.py, not run)")

LIFECYCLE = ("restart", "sleep", "wake_up", "weight_update")
PREFIX_JUMP = 0.2  # a prefix hit rate this much above the windows before the onset is a "jump"
CAUSES = ("stale_draft_weights", "kv_without_draft_kv", "stale_drafter_after_k0", "method_mismatch")
CAUSE_STEP = {"stale_draft_weights": "weights", "kv_without_draft_kv": "kv_connector",
              "stale_drafter_after_k0": "k0_schedule", "method_mismatch": "method"}


def varying_launch(schedule: Sequence[Sequence[int]] | None, method: str | None) -> bool:
    """The recorded launch drafts a varying number of tokens per step: a schedule with ranges of
    different K (0 ranges count: they change the drafted steps' mix only through the others) or a
    lookup method whose drafts stop short."""
    from specops.speculation import PROMPT_METHODS, canonical

    ks = {int(r[2]) for r in schedule or () if int(r[2]) > 0}
    return len(ks) > 1 or (method is not None and canonical(method) in PROMPT_METHODS)


def basis_for(w: LabelWindow, *, varying: bool, adaptive: bool) -> Basis:
    if adaptive:
        return "realized_gain"
    if varying or w.varying:
        return "drafted_token"
    return "tau"


def has_k0_range(schedule: Sequence[Sequence[int]] | None) -> bool:
    return any(int(r[2]) == 0 for r in schedule or ())


def collapse_ratio(w: LabelWindow, base: LabelBaseline | None, basis: Basis,
                   cfg: DetectionConfig) -> tuple[float | None, str]:
    """(value / baseline, what was compared) for one window; the ratio is None when the window cannot
    be judged. Without a baseline τ, τ against ``collapse_tau`` (ratio 0 below it, 1 above)."""
    tau = w.tau
    if tau is None:
        return None, "no drafts"
    if basis == "drafted_token" and base is not None and base.first_mean and w.first_rate is not None:
        return w.first_rate / base.first_mean, (f"first-token acceptance {w.first_rate:.3f} vs baseline "
                                                f"{base.first_mean:.3f}")
    if basis != "drafted_token" and base is not None and base.tau_mean and base.tau_mean > 1.0:
        return (tau - 1.0) / (base.tau_mean - 1.0), f"τ − 1 = {tau - 1:.3f} vs baseline {base.tau_mean - 1:.3f}"
    return (0.0 if tau < cfg.collapse_tau else 1.0), f"τ {tau:.3f} vs the collapse line {cfg.collapse_tau:g} (no baseline)"


@dataclass
class CollapseDetector:
    cfg: DetectionConfig
    below: int = 0
    above: int = 0
    active: bool = False
    since: float | None = None
    raised_now: bool = False
    last_ratio: float | None = None
    last_what: str = ""

    def update(self, at: float, ratio: float, what: str) -> None:
        self.raised_now = False
        self.last_ratio, self.last_what = ratio, what
        if ratio < self.cfg.collapse_fraction:
            self.below, self.above = self.below + 1, 0
            if not self.active and self.below >= self.cfg.collapse_windows:
                self.active, self.since, self.raised_now = True, at, True
        else:
            self.below, self.above = 0, self.above + 1
            if self.active and self.above >= self.cfg.collapse_windows:
                self.active, self.since = False, None


@dataclass(frozen=True)
class WindowTrace:
    """What the cause rules need from one recent window."""

    at: float
    drafts: float
    running: float | None
    counter_reset: bool
    uptime_s: float | None
    prefix_hit_rate: float | None
    events: tuple[str, ...]
    external_hits: float | None = None

    @classmethod
    def of(cls, obs: Observation) -> WindowTrace:
        t = obs.total
        return cls(obs.at, t.drafts if t else 0.0, obs.running, obs.counter_reset, obs.uptime_s,
                   obs.prefix_hit_rate, tuple(obs.events), obs.external_hits)


@dataclass
class CauseFacts:
    """The recorded launch, as the watch knows it."""

    method: str | None = None
    draft_method: str | None = None
    kv_connector: bool | None = None
    schedule: Sequence[Sequence[int]] | None = None
    window_s: float = 60.0
    min_drafts: float = 50.0
    lookback: int = 10
    notes: list[str] = field(default_factory=list)


def collapse_causes(facts: CauseFacts, windows: Sequence[WindowTrace], onset: float) -> list[dict]:
    """Each cause with status suspected | ruled out | unknown, its evidence and the runbook step that
    proves or refutes it; suspected causes first."""
    before = [w for w in windows if w.at <= onset][-facts.lookback:]
    pre_onset = [w for w in before if w.at < onset - facts.window_s * 1.5]
    out = []
    # stale draft weights: a lifecycle event near the onset
    seen = sorted({e for w in before for e in w.events if e in LIFECYCLE})
    reset = [w.at for w in before if w.counter_reset or (w.uptime_s is not None and w.uptime_s <= facts.window_s * 3)]
    if seen or reset:
        out.append(_cause("stale_draft_weights", "suspected",
                          f"{', '.join(seen) or 'restart'} seen within {len(before)} windows before the collapse",
                          events=seen, restarts=len(reset)))
    else:
        out.append(_cause("stale_draft_weights", "unknown", "no restart, sleep/wake or weight update in the "
                          "monitor's windows; the runbook step reads the registry's events", events=[]))
    out.append(_kv_cause(facts, before, onset))
    # stale drafter after a K=0 range
    if facts.schedule and has_k0_range(facts.schedule):
        idle = [w.at for w in pre_onset if w.drafts < facts.min_drafts and (w.running or 0) > 0]
        if idle:
            out.append(_cause("stale_drafter_after_k0", "suspected", f"the schedule has a K=0 range and {len(idle)} "
                              "window(s) before the collapse ran requests with (almost) no drafts",
                              k0_windows=len(idle)))
        else:
            out.append(_cause("stale_drafter_after_k0", "unknown", "the schedule has a K=0 range, but no window "
                              "without drafts was seen before the collapse"))
    else:
        out.append(_cause("stale_drafter_after_k0", "ruled out", "the recorded launch has no K=0 schedule range"))
    # method mismatch
    from specops.speculation import canonical

    if facts.method and facts.draft_method:
        same = canonical(facts.method) == canonical(facts.draft_method)
        out.append(_cause("method_mismatch", "ruled out" if same else "suspected",
                          f"recorded method {facts.method}, the draft's config is for {facts.draft_method}",
                          method=facts.method, draft_method=facts.draft_method))
    else:
        out.append(_cause("method_mismatch", "unknown", "the recorded method or the draft's config type is unknown",
                          method=facts.method, draft_method=facts.draft_method))
    rank = {"suspected": 0, "unknown": 1, "ruled out": 2}
    return sorted(out, key=lambda c: rank[c["status"]])


def prefix_evidence(windows: Sequence[WindowTrace], onset: float) -> dict:
    """The prefix-cache side of the onset, from vLLM's token counters (``vllm:prefix_cache_hits_total`` /
    ``vllm:prefix_cache_queries_total``, and the ``vllm:external_prefix_cache_*`` pair a KV connector
    feeds): the hit rate of the onset window, its jump over the mean of the windows before it (at least
    two), and the tokens a connector restored from the window before the onset on."""
    seen = [w for w in windows if w.prefix_hit_rate is not None]
    at_onset = next((w for w in seen if w.at >= onset), None)
    pre = [w.prefix_hit_rate for w in seen if w.at < onset]
    jump = None
    if at_onset is not None and len(pre) >= 2:
        jump = at_onset.prefix_hit_rate - sum(pre) / len(pre)  # type: ignore[operator]
    near = [w for w in windows if w.at >= onset - 1.5 * _gap(windows)]
    restored = [w.external_hits for w in near if w.external_hits is not None]
    return {"prefix_hit_rate_onset": None if at_onset is None else round(at_onset.prefix_hit_rate or 0.0, 4),
            "prefix_hit_rate_before": round(sum(pre) / len(pre), 4) if pre else None,
            "prefix_hit_jump": None if jump is None else round(jump, 4),
            "external_hits": sum(restored) if restored else None}


def _gap(windows: Sequence[WindowTrace]) -> float:
    ats = [w.at for w in windows]
    gaps = [b - a for a, b in zip(ats, ats[1:], strict=False) if b > a]
    return sorted(gaps)[len(gaps) // 2] if gaps else 60.0


def _kv_cause(facts: CauseFacts, windows: Sequence[WindowTrace], onset: float) -> dict:
    """KV restored without the draft's KV: the recorded launch (a KV connector or not) and the engine's own
    prefix-cache counters at the onset (a connector restoring tokens; a jump in the prefix hit rate)."""
    ev = prefix_evidence(windows, onset)
    jump, restored = ev["prefix_hit_jump"], ev["external_hits"]
    seen = []
    if jump is not None:
        seen.append(f"prefix hit rate {ev['prefix_hit_rate_before']:.2f} -> {ev['prefix_hit_rate_onset']:.2f} at the "
                    f"onset ({'a jump' if jump >= PREFIX_JUMP else 'no jump'}: {jump:+.2f})")
    if restored:
        seen.append(f"a KV connector restored {restored:g} tokens' KV around the onset "
                    "(vllm:external_prefix_cache_hits_total)")
    counters = "; ".join(seen) or "the engine exports no prefix-cache counters for these windows"
    if facts.kv_connector:
        return _cause("kv_without_draft_kv", "suspected", "a KV connector in the recorded launch "
                      f"(--kv-transfer-config); {counters}", **ev)
    if restored:
        why = ("the recorded launch has no KV connector, yet " if facts.kv_connector is False
               else "the launch's KV connector is not on record, but ")
        return _cause("kv_without_draft_kv", "suspected", why + counters, **ev)
    if facts.kv_connector is False:
        return _cause("kv_without_draft_kv", "ruled out", f"the recorded launch has no KV connector; {counters}", **ev)
    if jump is not None and jump >= PREFIX_JUMP:
        return _cause("kv_without_draft_kv", "suspected", "the launch's KV connector is not on record; " + counters,
                      **ev)
    return _cause("kv_without_draft_kv", "unknown", "the launch's KV connector is not on record; " + counters, **ev)


def _cause(code: str, status: str, why: str, **evidence) -> dict:
    return {"cause": code, "status": status, "why": why, "runbook_step": CAUSE_STEP[code], **evidence}
