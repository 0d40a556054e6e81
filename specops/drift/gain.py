"""The realized-gain judgement (basis ``realized_gain``): what speculation still delivers when the
drafted length varies by design (adaptive verification trims what is verified; a γ schedule).

Neither τ nor the per-drafted-token rate can be compared with a fixed-K baseline there, so the
monitor judges what the drafts actually put into the output:

- **draft share** ``accepted / generated``: of the tokens the engine emitted in the window, the share
  that came from accepted drafts (each one a target step saved: tokens per target step =
  1 / (1 − share)). A budget change moves it a little (the tiny engine's γ schedule, K=3 at batch 1
  and K=1 above: 0.68 ↔ 0.46; vllm#52992's adaptive run, τ 4.35 → 3.76: 0.77 → 0.73); a draft that
  stopped working takes it to 0. ``GAIN_DROP`` is raised when it stays below ``gain_fraction`` of the
  baseline's for ``gain_windows`` windows, and cleared after as many windows back above it;
- **accepted tokens per second** and **TPOT p50** of the window are reported with it (they move with
  the load, so they are evidence, not the judgement; `specops runbook run acceptance-drop`'s
  ``tpot_vs_baseline`` step compares TPOT with the no-speculation baseline).

Counter semantics (an ASSUMPTION, not run: adaptive verification needs a GPU): in
``v1/core/sched/scheduler.py`` (``update_from_output``; read in the 0.32.0 CPU wheel here, the 0.33.0
reading is ../shared/reference) ``num_accepted = len(generated_token_ids) - num_sampled`` (the draft
tokens the step emitted) and ``num_draft_tokens = len(scheduled_spec_token_ids)`` (what was
scheduled, so trimmed tokens read as rejected); ``v1/spec_decode/metrics.py``'s ``observe_draft``
adds them up. So ``num_accepted_tokens`` and ``generation_tokens`` count what was emitted whatever
the worker trimmed, and ``num_draft_tokens`` is not used here. Every finding says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from specops.drift.detectors import DetectionConfig, LabelBaseline
from specops.drift.observe import LabelWindow, Observation
from specops.models import Finding

GAIN_ASSUMPTION = ("assumption: under adaptive verification num_accepted_tokens still counts the draft tokens "
                   "emitted (vLLM's v1/core/sched/scheduler.py: emitted - sampled per step, read in the 0.32.0 CPU "
                   "wheel) and generation_tokens the tokens emitted; adaptive verification needs a GPU and did "
                   "not run here")


def draft_share(w: LabelWindow, generated: float | None) -> float | None:
    """accepted / generated of one window (None without emitted tokens)."""
    if not generated or generated <= 0:
        return None
    return min(1.0, max(0.0, w.accepted / generated))


@dataclass
class GainDetector:
    """Consecutive windows below ``gain_fraction`` of the baseline's draft share (hysteresis: as many
    windows back above it to clear)."""

    cfg: DetectionConfig
    below: int = 0
    above: int = 0
    active: bool = False
    since: float | None = None
    last: dict | None = None

    def update(self, obs: Observation, w: LabelWindow, base: LabelBaseline | None, name: str) -> list[Finding]:
        share = draft_share(w, obs.generated)
        ev = {"deployment": name, "label": "all", "basis": "realized_gain", "draft_share": _r(share),
              "accepted_tokens_per_s": _r(w.accepted / obs.window_s if obs.window_s > 0 else None),
              "tpot_p50": obs.tpot_p50, "tau": _r(w.tau), "mean_drafted": _r(w.mean_drafted),
              "assumption": GAIN_ASSUMPTION}
        if share is None or base is None or not base.share_mean:
            why = ("no emitted tokens in the window" if share is None else
                   "the baseline has no draft share (recorded before it was kept: record it again)")
            self.last = {**ev, "verdict": "could not evaluate", "why": why}
            return []
        ratio = share / base.share_mean
        self.last = {**ev, "baseline_draft_share": _r(base.share_mean), "ratio": _r(ratio),
                     "fraction": self.cfg.gain_fraction}
        raised = False
        if ratio < self.cfg.gain_fraction:
            self.below, self.above = self.below + 1, 0
            if not self.active and self.below >= self.cfg.gain_windows:
                self.active, self.since, raised = True, obs.at, True
        else:
            self.below, self.above = 0, self.above + 1
            if self.active and self.above >= self.cfg.gain_windows:
                self.active, self.since = False, None
                self.last["verdict"] = "recovered"
                return [Finding(code="ACCEPTANCE_RECOVERED", severity="info",
                                message=f"{name}: the realized gain is back (draft share {share:.3f}, "
                                        f"{ratio:.0%} of its baseline {base.share_mean:.3f})",
                                evidence={**self.last, "collapse": False})]
        self.last["verdict"] = "fail" if self.active else "pass"
        if not self.active:
            return []
        return [Finding(
            code="GAIN_DROP", severity="warning",
            message=f"{name}: the realized gain fell: {share:.3f} of the emitted tokens came from accepted drafts, "
                    f"{ratio:.0%} of its baseline {base.share_mean:.3f}, for {self.cfg.gain_windows}+ windows "
                    f"({self.last['accepted_tokens_per_s']} accepted tokens/s; adaptive verification: τ "
                    f"{w.tau:.2f} is not judged; {GAIN_ASSUMPTION})",
            fix="run `specops runbook run acceptance-drop` (its TPOT step compares with the no-speculation "
                "baseline); if TPOT is above it, disable speculation until the cause is found",
            evidence={**self.last, "since": self.since, "raised_now": raised})]


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)
