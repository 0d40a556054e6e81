"""Per-deployment watch state: detectors per task label, history, restart probe, γ controller.

``DeploymentWatch.update(observation)`` turns one window into findings (active alarms, the believed
cause, recoveries) and possibly a γ proposal. The monitor calls ``start_probe`` after a restart probe
action ran; the next ``probe_windows`` usable windows decide whether acceptance came back.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from pydantic import Field

from specops.drift.classify import Evidence, LabelDrop, ProbeResult, classify
from specops.drift.collapse import (
    ADAPTIVE_ASSUMPTION,
    BASIS_TEXT,
    CauseFacts,
    CollapseDetector,
    WindowTrace,
    basis_for,
    collapse_causes,
    collapse_ratio,
    varying_launch,
)
from specops.drift.detectors import (
    Baseline,
    BreakEven,
    ChangeDetector,
    DetectionConfig,
    FloorDetector,
    LabelBaseline,
    LabelDetectors,
    first_rate_error,
    sampling_error,
)
from specops.drift.gain import GainDetector
from specops.drift.gamma import GammaController, GammaPolicy, GammaProposal, Predictor, single
from specops.drift.observe import ALL, Observation
from specops.engines.spec import CapacityExpectation
from specops.models import Finding, Strict


class WatchTarget(Strict):
    """What the monitor knows about one deployment (from the registry and the validation profile)."""


    name: str = Field(description="Deployment name (the specops_deployment label).")
    gamma: int = Field(3, ge=0, description="Current num_speculative_tokens.")
    schedule: list[tuple[int, int, int]] | None = Field(None, description="Current per-batch schedule, if any.")
    baseline: Baseline | None = Field(None, description="Recorded baseline (None: change detection off).")
    alpha_floor: float | None = Field(None, ge=0, le=1, description="Per-token acceptance floor (profile).")
    break_even_alpha: float | None = Field(None, ge=0, le=1,
                                           description="α below which speculation is slower (performance model).")
    trained_against: str | None = Field(None, description="Target fingerprint the draft was trained against.")
    restart_allowed: bool = Field(False, description="Whether a restart probe may run on this deployment.")
    expected_acceptance_rate: float | None = Field(None, ge=0, le=1, description="accepted/drafted the spec's "
                                                   "`expectations` predict (exported for dashboards).")
    break_even_acceptance_rate: float | None = Field(None, ge=0, le=1, description="accepted/drafted below which "
                                                     "it is slower than without speculation (the spec's).")
    expected_speedup: float | None = Field(None, gt=0, description="Speedup the spec's `expectations` predict.")
    method: str | None = Field(None, description="Recorded speculative method (vLLM name).")
    draft_method: str | None = Field(None, description="The method the draft's config is for (DRAFT_CONFIG_TYPES).")
    kv_connector: bool | None = Field(None, description="The recorded launch has a KV connector (None: unknown).")
    adaptive_verification: bool = Field(False, description="The recorded launch enables adaptive verification "
                                        "(speculative_config.enable_adaptive_verification, vLLM >= 0.33).")
    capacity: CapacityExpectation | None = Field(None, description="The spec's `capacity` block: SLO and one "
                                                 "replica's capacity by acceptance (the capacity metric; issue 44).")


@dataclass
class _Probe:
    at: float
    before: float
    after: list[float] = field(default_factory=list)


class DeploymentWatch:
    probe_windows = 5
    recent_windows = 5
    probe_memory_s = 6 * 3600.0

    def __init__(self, target: WatchTarget, detection: DetectionConfig, gamma_policy: GammaPolicy,
                 predictor: Predictor | None, break_even: BreakEven | None = None,
                 window_s: float = 60.0) -> None:
        self.target, self.cfg = target, detection
        self.break_even = target.break_even_alpha if target.break_even_alpha is not None else break_even
        self.last_break_even: float | None = None
        self.labels: dict[str, LabelDetectors] = {}
        self.recent: dict[str, deque[float]] = {}
        self.history: deque[tuple[float, float, float, float | None]] = deque(maxlen=2880)  # at, uptime, α, kv
        self.last_restart_at: float | None = None
        self.probe: _Probe | None = None
        self.probe_result: ProbeResult | None = None
        self.live_fingerprint: str | None = None
        self.gamma: GammaController | None = None
        self.varying = varying_launch(target.schedule, target.method)
        self.collapse = CollapseDetector(detection)
        self.collapse_finding: Finding | None = None
        self.gain = GainDetector(detection)  # the realized-gain judgement (adaptive verification)
        self.traces: deque[WindowTrace] = deque(maxlen=30)
        self.basis: dict[str, str] = {}  # label -> the basis its last window was judged on
        self.recent_first: dict[str, deque[float]] = {}
        self.window_s = window_s
        if predictor is not None and gamma_policy.mode != "off" and target.gamma > 0:
            current = tuple(tuple(r) for r in target.schedule) if target.schedule else single(target.gamma)
            self.gamma = GammaController(target.name, gamma_policy, predictor, current, window_s)  # type: ignore[arg-type]

    # -- inputs ---------------------------------------------------------------------------------
    def _detectors(self, label: str) -> LabelDetectors:
        det = self.labels.get(label)
        if det is None:
            base = self.target.baseline.labels.get(label) if self.target.baseline else None
            first = (ChangeDetector(self.cfg, LabelBaseline(mean=base.first_mean, std=base.first_std or 0.0,
                                                            windows=base.windows))
                     if base is not None and base.first_mean is not None else None)
            det = LabelDetectors(change=ChangeDetector(self.cfg, base) if base else None,
                                 floor=FloorDetector(self.cfg), break_even=FloorDetector(self.cfg), first=first)
            self.labels[label] = det
        return det

    def _break_even(self, obs: Observation) -> float | None:
        if self.break_even is None:
            return None
        if callable(self.break_even):
            return self.break_even(obs.gamma or self.target.gamma, obs.running or 1.0)
        return float(self.break_even)

    def start_probe(self, at: float) -> None:
        total = self.recent.get(ALL)
        if total:
            self.probe = _Probe(at=at, before=sum(total) / len(total))

    # -- one window -----------------------------------------------------------------------------
    def update(self, obs: Observation) -> tuple[list[Finding], GammaProposal | None]:
        if obs.target_fingerprint:
            self.live_fingerprint = obs.target_fingerprint
        if obs.uptime_s is not None:
            self.last_restart_at = obs.at - obs.uptime_s
        elif obs.counter_reset:
            self.last_restart_at = obs.at
        findings: list[Finding] = []
        self.traces.append(WindowTrace.of(obs))  # every window, idle ones too (a K=0 stretch has no drafts)
        be = self.last_break_even = self._break_even(obs)
        for label, w in obs.labels.items():
            if w.drafts < self.cfg.min_drafts or w.alpha is None:
                continue
            a = w.alpha
            det = self._detectors(label)
            det.last_alpha, det.last_at = a, obs.at
            self.recent.setdefault(label, deque(maxlen=self.recent_windows)).append(a)
            # the basis is sticky: once a window drafted fewer than K tokens on average, the deployment's
            # drafted length varies and τ is not compared again (the τ detector's state is dropped)
            basis = basis_for(w, varying=self.varying or self.basis.get(label) == "drafted_token",
                              adaptive=self.target.adaptive_verification)
            if basis != "tau" and self.basis.get(label, "tau") == "tau" and det.change and (
                    det.first is not None or basis == "realized_gain"):
                det.change.reset()
            self.basis[label] = basis
            if w.first_rate is not None:
                self.recent_first.setdefault(label, deque(maxlen=self.recent_windows)).append(w.first_rate)
            if label == ALL:
                self.history.append((obs.at, obs.uptime_s or 0.0, a, obs.kv_usage))
                findings += self._probe_step(obs, a)
                findings += self._collapse_step(obs, w, basis)
                if basis == "realized_gain":
                    base = self.target.baseline.labels.get(ALL) if self.target.baseline else None
                    findings += self.gain.update(obs, w, base, self.target.name)
            if basis == "drafted_token" and det.first is None:
                basis = "tau"  # a baseline recorded without first-token acceptance: α at the drafted length
            judged = det.change if basis == "tau" else det.first if basis == "drafted_token" else None
            if judged is not None:
                value = a if basis == "tau" else w.first_rate
                if value is not None:
                    st = judged.update(obs.at, value, sampling_error(w) if basis == "tau" else first_rate_error(w))
                    if st.cleared_now:
                        findings.append(self._recovered(label, det))
            if self.target.alpha_floor is not None:
                det.floor.update(obs.at, a, self.target.alpha_floor)
            if be is not None:
                det.break_even.update(obs.at, a, be)
        findings += self._alarm_findings(be)
        proposal = self.gamma.step(obs) if self.gamma else None
        if proposal is not None:
            findings.append(Finding(
                code="GAMMA_CHANGE_PROPOSED", severity="info",
                message=f"{self.target.name}: predicted speedup {proposal.score_current:.3f} -> "
                        f"{proposal.score_proposed:.3f} with schedule {proposal.proposed} (γ {proposal.gamma} now)",
                fix="apply the schedule (policy gamma.mode: apply does it) or keep the current one",
                evidence=proposal.model_dump()))
        return findings, proposal

    def _collapse_step(self, obs: Observation, w, basis: str) -> list[Finding]:
        """τ − 1 far below its baseline while drafting continues, for collapse_windows windows."""
        base = self.target.baseline.labels.get(ALL) if self.target.baseline else None
        ratio, what = collapse_ratio(w, base, basis, self.cfg)  # type: ignore[arg-type]
        if ratio is None:
            return []
        was = self.collapse.active
        self.collapse.update(obs.at, ratio, what)
        if not self.collapse.active:
            if was:
                self.collapse_finding = None
                return [Finding(code="ACCEPTANCE_RECOVERED", severity="info",
                                message=f"{self.target.name}: acceptance is back from its collapse ({what})",
                                evidence={"deployment": self.target.name, "label": "all", "collapse": False})]
            return []
        if not self.collapse.raised_now:  # still collapsed: the finding of its onset, every window (like alarms)
            return [self.collapse_finding] if self.collapse_finding is not None else []
        t = self.target
        facts = CauseFacts(method=t.method, draft_method=t.draft_method, kv_connector=t.kv_connector,
                           schedule=t.schedule, window_s=self.window_s, min_drafts=self.cfg.min_drafts)
        onset = self.traces[-self.cfg.collapse_windows].at if len(self.traces) >= self.cfg.collapse_windows else obs.at
        causes = collapse_causes(facts, list(self.traces), onset)
        suspected = [c["cause"] for c in causes if c["status"] == "suspected"]
        ev = {"deployment": t.name, "label": "all", "basis": basis, "basis_text": BASIS_TEXT[basis],
              "ratio": _r(ratio), "compared": what, "fraction": self.cfg.collapse_fraction,
              "windows": self.cfg.collapse_windows, "drafts": w.drafts, "tau": _r(w.tau),
              "mean_drafted": _r(w.mean_drafted), "since": onset, "causes": causes, "suspected": suspected}
        if basis == "realized_gain":
            ev["assumption"] = ADAPTIVE_ASSUMPTION
        self.collapse_finding = Finding(
            code="ACCEPTANCE_COLLAPSE", severity="error",
            message=f"{t.name}: acceptance collapsed while drafting continues ({what}, {ratio:.0%} of baseline, "
                    f"{self.cfg.collapse_windows} windows, {w.drafts:g} drafts in the last); suspected: "
                    f"{', '.join(suspected) or 'none on record'}",
            fix=f"run `specops runbook run acceptance-collapse --deployment {t.name}`: one step per cause proves or "
                "refutes it; disable speculation meanwhile (it only costs)",
            evidence=ev)
        return [self.collapse_finding]

    def _probe_step(self, obs: Observation, alpha: float) -> list[Finding]:
        if self.probe_result and obs.at - self.probe_result.at > self.probe_memory_s:
            self.probe_result = None
        p = self.probe
        if p is None or obs.at <= p.at:
            return []
        p.after.append(alpha)
        if len(p.after) < self.probe_windows:
            return []
        base = self._baseline_mean(ALL)
        self.probe_result = ProbeResult(at=obs.at, before=p.before, after=sum(p.after) / len(p.after),
                                        baseline=base if base is not None else p.before)
        self.probe = None
        for det in self.labels.values():
            for d in (det.change, det.first):
                if d:
                    d.reset()
        finding = classify(self._evidence())
        return [finding] if finding.code == "ENGINE_STATE_DECAY" else []

    def _baseline_mean(self, label: str) -> float | None:
        b = self.target.baseline.labels.get(label) if self.target.baseline else None
        return b.mean if b else None

    def _recovered(self, label: str, det: LabelDetectors) -> Finding:
        return Finding(code="ACCEPTANCE_RECOVERED", severity="info",
                       message=f"{self.target.name}{_lab(label)}: acceptance is back near its baseline "
                               f"(α {det.last_alpha:.3f})",
                       evidence={"deployment": self.target.name, "label": label or "all",
                                 "alpha": round(det.last_alpha or 0.0, 4)})

    def episode_since(self) -> float | None:
        starts = [s.since for d in self.labels.values() for s in (d.floor.state, d.break_even.state)
                  + tuple(c.state for c in (d.change, d.first) if c) if s.active and s.since is not None]
        return min(starts) if starts else None

    def _alarm_findings(self, be: float | None) -> list[Finding]:
        out: list[Finding] = []
        name = self.target.name
        for label, det in sorted(self.labels.items()):
            recent = self.recent.get(label)
            cur = sum(recent) / len(recent) if recent else None
            ev = {"deployment": name, "label": label or "all", "alpha_recent": _r(cur)}
            for basis, ch in (("tau", det.change), ("drafted_token", det.first)):
                if not (ch and ch.state.active):
                    continue
                b = ch.baseline
                what = "per-token acceptance" if basis == "tau" else "first-token acceptance (per drafted token)"
                firsts = self.recent_first.get(label)
                now = cur if basis == "tau" else (sum(firsts) / len(firsts) if firsts else None)
                out.append(Finding(
                    code="ACCEPTANCE_DROP", severity="warning",
                    message=f"{name}{_lab(label)}: {what} fell from its baseline {b.mean:.3f}"
                            + (f" to {now:.3f}" if now is not None else "")
                            + f" (CUSUM {ch.s:.1f} >= {self.cfg.cusum_h})",
                    fix="see the believed cause below; run `specops runbook run acceptance-drop`",
                    evidence={**ev, "basis": basis, "basis_text": BASIS_TEXT[basis], "baseline": _r(b.mean),
                              "baseline_std": _r(b.std), "cusum": _r(ch.s), "since": ch.state.since}))
            if det.floor.state.active:
                out.append(Finding(
                    code="ACCEPTANCE_BELOW_FLOOR", severity="warning",
                    message=f"{name}{_lab(label)}: per-token acceptance {cur:.3f} below the floor "
                            f"{self.target.alpha_floor:.3f} for {self.cfg.floor_windows}+ windows",
                    fix="see the believed cause; lower γ or retrain the draft",
                    evidence={**ev, "floor": self.target.alpha_floor, "since": det.floor.state.since}))
            if det.break_even.state.active:
                out.append(Finding(
                    code="BELOW_BREAK_EVEN", severity="error",
                    message=f"{name}{_lab(label)}: per-token acceptance {cur:.3f} is below break-even "
                            f"{be:.3f}: speculation makes this deployment slower",
                    fix="disable speculation (policy action disable_speculation) until the cause is fixed",
                    evidence={**ev, "break_even": _r(be), "since": det.break_even.state.since}))
        mismatch = (self.target.trained_against and self.live_fingerprint
                    and self.target.trained_against != self.live_fingerprint)
        if (out and self.probe is None) or mismatch:
            cause = classify(self._evidence())
            if not out and cause.code == "CHANGED_MODEL":
                cause = cause.model_copy(update={"severity": "warning", "message": cause.message
                                                 + " (acceptance has not dropped yet)"})
            # while collapsed, the collapse finding names its causes; "unknown" would only contradict it
            unknown_in_collapse = cause.code == "DRIFT_CAUSE_UNKNOWN" and self.collapse.active
            if (self.probe is None or cause.code == "CHANGED_MODEL") and not unknown_in_collapse:
                out.append(cause)
        return out

    def _evidence(self) -> Evidence:
        drops = {}
        for label, det in self.labels.items():
            recent = self.recent.get(label)
            if not det.change or not recent:
                continue
            b = det.change.baseline
            cur = sum(recent) / len(recent)
            alarmed = det.change.state.active or det.floor.state.active or bool(det.first and det.first.state.active)
            drops[label] = LabelDrop(label=label, baseline=b.mean, recent=cur,
                                     sigmas=(b.mean - cur) / max(b.std, self.cfg.min_sigma), alarmed=alarmed)
        since = self.episode_since()
        start = self.last_restart_at or 0.0
        pre = [(up, a, kv) for at, up, a, kv in self.history
               if at >= start and (since is None or at < since)]
        kvs = [kv for _, _, _, kv in list(self.history)[-self.recent_windows:] if kv is not None]
        return Evidence(deployment=self.target.name, drops=drops, trained_against=self.target.trained_against,
                        live_fingerprint=self.live_fingerprint, pre_alarm=pre,
                        kv_recent=sum(kvs) / len(kvs) if kvs else None, probe=self.probe_result,
                        break_even=self.last_break_even)


def _lab(label: str) -> str:
    return f" [{label}]" if label else ""


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)
