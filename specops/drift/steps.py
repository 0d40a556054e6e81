"""The real runbook steps (``StepImplementations``) over the registry, the metrics layer and the engines.

- ``query``: one window of the deployment now (the same ``MetricsSource`` as the monitor:
  Prometheus, else the engine's ``/metrics``) next to the recorded baseline and the stored history;
- ``lineage_check``: the registry's lineage check of the deployed pair (it re-fingerprints local
  folders, so a target folder changed under the draft is ``STALE_DRAFT``);
- ``fingerprint_check``: the fingerprint of the target folder the deployment serves now
  (re-computed) against the fingerprint the draft was trained against, naming the registered
  model whose fingerprint the folder now has;
- ``restart_probe``: ``engines.manage.restart`` and a wait for fresh traffic, then acceptance after
  against before and the baseline.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from specops.drift.classify import uptime_trend
from specops.drift.collapse import BASIS_TEXT
from specops.drift.collapse_steps import CollapseSteps
from specops.drift.detectors import Baseline
from specops.drift.fleet import LiveFingerprints, served_model_path
from specops.drift.observe import ALL, Observation, Unseen
from specops.drift.store import HistoryStore
from specops.errors import CouldNotEvaluate, MeasurementError, SpecopsError
from specops.models import Finding

DROP_SIGMAS = 3.0
KV_PRESSURE = 0.9


def _f(code: str, severity: str, message: str, fix: str | None = None, **evidence) -> Finding:
    return Finding(code=code, severity=severity, message=message, fix=fix, evidence=evidence)


def _needs_draft(method: str | None) -> bool:
    from specops.speculation import WEIGHTLESS_METHODS

    return bool(method) and method != "none" and method not in WEIGHTLESS_METHODS


def _record_pair_fix(deployment: str) -> str:
    return (f"record the pair: `specops deployment register {deployment} --endpoint URL --target NAME@VERSION "
            "--draft NAME@VERSION --method METHOD` (adopted), or deploy it with `specops deploy SPEC`")


def _r(x: float | None, n: int = 4) -> float | None:
    return None if x is None else round(x, n)


class RegistrySteps(CollapseSteps):
    """Runbook steps for registered deployments. ``source_for(dep_row)`` returns a MeasurementSource."""

    def __init__(self, reg, source_for: Callable, *, fingerprints: LiveFingerprints | None = None,
                 now: Callable[[], float] = time.time, probe_wait_s: float = 180.0, min_drafts: float = 20,
                 sleep: Callable[[float], None] = time.sleep, progress=None) -> None:
        self.reg, self.source_for, self.now = reg, source_for, now
        self.fps = fingerprints or LiveFingerprints()
        self.store = HistoryStore(reg)
        self.probe_wait_s, self.min_drafts, self.sleep, self.progress = probe_wait_s, min_drafts, sleep, progress
        self._obs: dict[str, Observation | Unseen] = {}

    # --- shared ----------------------------------------------------------------------------------
    def observation(self, deployment: str, fresh: bool = False) -> Observation:
        if fresh or deployment not in self._obs:
            dep = self.reg.get_deployment(deployment)
            self._obs[deployment] = self.source_for(dep).fetch([deployment])[deployment]
        obs = self._obs[deployment]
        if isinstance(obs, Unseen):
            reason, _, fix = obs.reason.partition(" To fix: ")
            raise MeasurementError(f"cannot see {deployment}: {reason}",
                                   fix or "check the engine and its metrics (specops status, --prometheus-url)")
        if not fresh and (obs.total is None or obs.total.drafts < self.min_drafts):
            stored = [o for o in self.store.history(deployment, since=self.now() - 3600)
                      if o.total is not None and o.total.drafts >= self.min_drafts]
            if stored:  # no traffic since the monitor's last scrape: its newest stored window
                obs = self._obs[deployment] = stored[-1]
        return obs

    def baseline(self, deployment: str) -> Baseline | None:
        return self.store.baselines([deployment]).get(deployment)

    def break_even(self, deployment: str) -> tuple[float, str] | None:
        """(break-even accepted/drafted rate, where it came from) from the spec the deployment was deployed
        from (its ``expectations``, written by ``specops recommend -o deployment``); None when unknown."""
        from specops.engines.manage import saved_spec

        try:
            found = saved_spec(deployment, self.reg)
        except (SpecopsError, ValueError):
            return None
        exp = found[0].expectations if found is not None else None
        return (exp.break_even_acceptance_rate, exp.source) if exp is not None else None

    # --- query steps ---------------------------------------------------------------------------
    def query(self, deployment: str, name: str) -> list[Finding]:
        return getattr(self, "_q_" + name)(deployment)

    def _q_acceptance(self, deployment: str) -> list[Finding]:
        obs = self.observation(deployment)
        w = obs.total
        if w is None or w.drafts <= 0 or w.alpha is None:
            raise CouldNotEvaluate(f"{deployment}: no drafts in the {obs.window_s:g}s window (no traffic, or "
                                   "speculation off): acceptance cannot be compared",
                                   "send traffic to the deployment and run the runbook again")
        basis, _rec = self._basis(deployment, w)
        ev = dict(deployment=deployment, alpha=_r(w.alpha), acceptance_rate=_r(w.acceptance_rate), tau=_r(w.tau),
                  drafts=w.drafts, gamma=w.k, mean_drafted=_r(w.mean_drafted), first_token_rate=_r(w.first_rate),
                  window_s=obs.window_s, basis=basis, basis_text=BASIS_TEXT[basis],
                  tau_per="drafted step (vLLM does not count steps without a draft; they are excluded)")
        if basis == "realized_gain":
            return self._realized_gain(deployment, obs, ev)
        be = self.break_even(deployment)
        if be is not None:
            ev.update(break_even_acceptance_rate=_r(be[0]), break_even_source=be[1])
            if w.acceptance_rate < be[0]:
                return [_f("BELOW_BREAK_EVEN", "error", f"{deployment}: acceptance rate {w.acceptance_rate:.3f} is "
                           f"below its break-even {be[0]:.3f} ({be[1]}): it decodes slower than without "
                           "speculation", "disable speculation (redeploy with `speculative.method: none`) while the "
                           f"draft is retrained (`specops heal -d {deployment}`)", **ev)]
        versus = (f"; break-even {be[0]:.3f}, so speculation still pays" if be is not None else
                  "; no break-even known: the saved spec has no expectations (recommend -o deployment writes them)")
        base = self.baseline(deployment)
        b = base.labels.get(ALL) if base else None
        if b is None:
            raise CouldNotEvaluate(f"{deployment}: α {w.alpha:.3f} (rate {w.acceptance_rate:.3f}, τ {w.tau:.2f}{versus}), "
                                   "but no baseline is recorded to compare it with",
                                   "record one while the deployment is healthy: `specops monitor --once "
                                   f"--record-baseline -d {deployment}`")
        if basis == "drafted_token":
            return self._per_drafted_token(deployment, w, b, ev, versus)
        ev.update(baseline=_r(b.mean), baseline_std=_r(b.std))
        return _against_baseline(deployment, w.alpha, b.mean, b.std, ev, drop_what="per-token α", ok_what="α",
                                 detail=f"acceptance rate {w.acceptance_rate:.3f}{versus}",
                                 ok_detail=f"acceptance rate {w.acceptance_rate:.3f}{versus}")

    def _per_drafted_token(self, deployment: str, w, b, ev: dict, versus: str) -> list[Finding]:
        """The drafted length varies: first-token acceptance against the baseline's, never τ."""
        budget = f"τ {w.tau:.2f} at {w.mean_drafted:.2f} drafted tokens per step of K={w.k}"
        if b.first_mean is None or w.first_rate is None:
            raise CouldNotEvaluate(f"{deployment}: the drafted length varies ({budget}), and the "
                                   f"{'baseline' if b.first_mean is None else 'window'} has no first-token "
                                   "acceptance to compare per drafted token", "record the baseline again (`specops "
                                   f"monitor --once --record-baseline -d {deployment}`) while it is healthy")
        ev.update(baseline_first_token_rate=_r(b.first_mean), baseline_std=_r(b.first_std))
        return _against_baseline(deployment, w.first_rate, b.first_mean, b.first_std or 0.0, ev,
                                 drop_what="first-token acceptance", ok_what="first-token acceptance",
                                 detail=f"per drafted token; {budget}{versus}",
                                 ok_detail=f"per drafted token; {budget}: a budget change is not a drop{versus}")

    def _realized_gain(self, deployment: str, obs: Observation, ev: dict) -> list[Finding]:
        """Adaptive verification: accepted tokens/s and TPOT against the no-speculation baseline."""
        from specops.drift.collapse import ADAPTIVE_ASSUMPTION
        from specops.drift.gain import draft_share

        w = obs.total
        base = self.baseline(deployment)
        b = base.labels.get(ALL) if base else None
        ev.update(accepted_tokens_per_s=_r(w.accepted / obs.window_s if obs.window_s > 0 else None, 2),
                  draft_share=_r(draft_share(w, obs.generated)), baseline_draft_share=_r(b.share_mean if b else None),
                  assumption=ADAPTIVE_ASSUMPTION)
        try:
            tpot = self._q_tpot_vs_baseline(deployment)
        except CouldNotEvaluate as exc:
            raise CouldNotEvaluate(f"{deployment}: adaptive verification is on, so τ ({w.tau:.2f}) is not judged "
                                   f"({ADAPTIVE_ASSUMPTION}); {exc.message}", exc.fix) from None
        return [t.model_copy(update={"message": t.message + f"; judged on the realized gain (adaptive verification "
                                     f"on: {ev['accepted_tokens_per_s']} accepted tokens/s, τ {w.tau:.2f} not judged)",
                                     "evidence": {**ev, **t.evidence}}) for t in tpot]

    def _q_acceptance_by_label(self, deployment: str) -> list[Finding]:
        obs = self.observation(deployment)
        labels = {k: w for k, w in obs.labels.items() if k and w.alpha is not None}
        if not labels:
            return [_f("QUERY_OK", "info", f"{deployment}: traffic is not labelled by task; acceptance is only known "
                       "for all traffic together", deployment=deployment)]
        base = self.baseline(deployment)
        out, dropped, stable = [], [], []
        for k, w in sorted(labels.items()):
            b = base.labels.get(k) if base else None
            if b is None:
                continue
            s = (b.mean - w.alpha) / max(b.std, 0.01)
            (dropped if s >= DROP_SIGMAS else stable if s < 2 else []).append(k)
        ev = dict(deployment=deployment, alpha={k: _r(w.alpha) for k, w in labels.items()})
        if dropped and stable:
            out.append(_f("WORKLOAD_DRIFT", "warning", f"{deployment}: acceptance dropped for {', '.join(dropped)} "
                          f"while {', '.join(stable)} held", "look at what changed in that traffic",
                          dropped=dropped, stable=stable, **ev))
        else:
            out.append(_f("QUERY_OK", "info", f"{deployment}: per-label acceptance {ev['alpha']}", **ev))
        return out

    def _q_per_position(self, deployment: str) -> list[Finding]:
        obs = self.observation(deployment)
        w = obs.total
        rates = [round(r, 3) for r in (w.position_rates if w else ())]
        from specops.metrics.derive import per_position_caveat

        try:
            method = self.reg.get_deployment(deployment).method
        except SpecopsError:
            method = None
        caveat = per_position_caveat(w.drafts, w.draft_tokens, len(w.accepted_per_pos) or None, method) if w else None
        # biased rates are reported with the caveat and never judged as a per-position drop
        return [_f("QUERY_OK", "info", f"{deployment}: P(first i+1 drafts accepted) by position: {rates or 'none'}"
                   + (f" ({caveat}; not judged)" if caveat else ""), deployment=deployment, per_position=rates,
                   lower_bounds=bool(caveat))]

    def _q_kv_usage(self, deployment: str) -> list[Finding]:
        obs = self.observation(deployment)
        if obs.kv_usage is None:
            raise CouldNotEvaluate(f"{deployment}: the engine exports no KV-cache usage",
                                   "check that the engine exports vllm:kv_cache_usage_perc (stats enabled)")
        if obs.kv_usage >= KV_PRESSURE:
            return [_f("KV_PRESSURE", "warning", f"{deployment}: KV-cache usage {obs.kv_usage:.0%}",
                       "lower γ or max-num-seqs, or give the KV cache more memory", deployment=deployment,
                       kv_usage=obs.kv_usage)]
        return [_f("QUERY_OK", "info", f"{deployment}: KV-cache usage {obs.kv_usage:.0%}", deployment=deployment,
                   kv_usage=obs.kv_usage)]

    def _q_load(self, deployment: str) -> list[Finding]:
        obs = self.observation(deployment)
        return [_f("QUERY_OK", "info", f"{deployment}: {obs.running if obs.running is not None else '?'} running, "
                   f"{obs.waiting if obs.waiting is not None else '?'} waiting", deployment=deployment,
                   running=obs.running, waiting=obs.waiting)]

    def _q_uptime(self, deployment: str) -> list[Finding]:
        obs = self.observation(deployment)
        hist = self.store.history(deployment, since=self.now() - 24 * 3600)
        pre = [(o.uptime_s, o.total.alpha, o.kv_usage) for o in hist
               if o.uptime_s is not None and o.total is not None and o.total.alpha is not None]
        trend = uptime_trend(pre)
        up = f"{obs.uptime_s / 3600:.1f} h" if obs.uptime_s is not None else "unknown"
        if trend["corr_uptime"] <= -0.5 and trend["slope_per_hour"] <= -0.005:
            return [_f("ENGINE_STATE_SUSPECTED", "warning", f"{deployment}: α slides with uptime (corr "
                       f"{trend['corr_uptime']}, {trend['slope_per_hour']:+.4f} α/h; uptime {up})",
                       "a restart probe tells whether it is engine state", deployment=deployment, trend=trend)]
        return [_f("QUERY_OK", "info", f"{deployment}: uptime {up}; no uptime trend in {trend['windows']} stored "
                   "windows", deployment=deployment, trend=trend, uptime_s=obs.uptime_s)]

    def _q_tpot_vs_baseline(self, deployment: str) -> list[Finding]:
        obs = self.observation(deployment)
        # the newest stored `specops bench` with a no-speculation baseline (its lowest concurrency)
        base = next((c["baseline_tpot_p50_s"] for e in self.reg.events(subject=deployment, kind="bench", limit=50)
                     for c in sorted((e.data or {}).get("comparisons") or [], key=lambda c: c.get("concurrency", 0))
                     if c.get("baseline_tpot_p50_s")), None)
        now = obs.tpot_p50
        if base is None or now is None:
            raise CouldNotEvaluate(f"{deployment}: TPOT p50 now {'-' if now is None else f'{now * 1000:.1f} ms'}, "
                                   "but no TPOT without speculation is recorded to compare with"
                                   if now is not None else f"{deployment}: no TPOT in the window (no finished requests)",
                                   f"record one with a baseline benchmark (`specops bench -d {deployment} "
                                   "--baseline redeploy`, or --baseline-endpoint URL)")
        ev = dict(deployment=deployment, tpot_p50=now, baseline_tpot_p50=base)
        if now > base * 1.05:
            return [_f("SLOWER_THAN_BASELINE", "error", f"{deployment}: TPOT p50 {now * 1000:.1f} ms is above the "
                       f"no-speculation baseline {base * 1000:.1f} ms", "disable speculation or lower γ", **ev)]
        return [_f("QUERY_OK", "info", f"{deployment}: TPOT p50 {now * 1000:.1f} ms vs {base * 1000:.1f} ms without "
                   "speculation", **ev)]

    def _q_long_context(self, deployment: str) -> list[Finding]:
        return [_f("QUERY_OK", "info", f"{deployment}: vLLM exports no acceptance by request length; compare "
                   "per-position acceptance and replay long prompts with specops bench", deployment=deployment)]

    # --- registry steps --------------------------------------------------------------------------
    def lineage_check(self, deployment: str) -> list[Finding]:
        dep = self.reg.get_deployment(deployment)
        if not dep.draft_ref or not dep.target_ref:
            if _needs_draft(dep.method):
                raise CouldNotEvaluate(f"{deployment} runs {dep.method} but the registry records no "
                                       f"{'draft' if not dep.draft_ref else 'target'} for it: its lineage cannot "
                                       "be checked", _record_pair_fix(deployment))
            return [_f("LINEAGE_OK", "info", f"{deployment}: method {dep.method or 'none'} has no draft weights "
                       "to check", deployment=deployment)]
        report = self.reg.check_lineage(dep.target_ref, dep.draft_ref, vllm_version=dep.vllm_version or "0.33.0",
                                        method=dep.method if dep.method not in (None, "none") else None)
        if report.verdict == "could not evaluate":
            blind = report.unevaluated
            raise CouldNotEvaluate(f"{dep.draft_ref} on {dep.target_ref}: " + "; ".join(f.message for f in blind),
                                   blind[0].fix)
        out = list(report.findings)
        if report.ok:
            out.append(_f("LINEAGE_OK", "info", f"{dep.draft_ref} on {dep.target_ref}: lineage check passed",
                          deployment=deployment))
        return out

    def fingerprint_check(self, deployment: str) -> list[Finding]:
        dep = self.reg.get_deployment(deployment)
        if not dep.draft_ref:
            if _needs_draft(dep.method):
                raise CouldNotEvaluate(f"{deployment} runs {dep.method} but the registry records no draft for it: "
                                       "what the draft was trained against cannot be compared",
                                       _record_pair_fix(deployment))
            return [_f("FINGERPRINT_OK", "info", f"{deployment}: method {dep.method or 'none'} has no draft weights, "
                       "nothing to compare")]
        draft = self.reg.get_draft(dep.draft_ref)
        trained = draft.trained_against_fingerprint
        live, where = self.fps.of(dep)
        ev = dict(deployment=deployment, draft=draft.ref, trained_against=trained, trained_against_target=draft.target,
                  live_fingerprint=live, live_from=where, served_path=served_model_path(dep))
        if not trained or not live:
            raise CouldNotEvaluate(f"{deployment}: cannot compare fingerprints (trained against: "
                                   f"{trained or 'unknown'}, live: {live or 'unknown'})",
                                   "register the draft with its local target folder so lineage records the "
                                   "fingerprint, and serve the target from a local folder")
        if trained == live:
            return [_f("FINGERPRINT_OK", "info", f"{deployment}: the live target ({where}) is the one {draft.ref} was "
                       f"trained against ({draft.target})", **ev)]
        now_is = [t.ref for t in self.reg.list_targets() if t.fingerprint == live]
        ev["live_matches"] = now_is
        what = f"now holds {', '.join(now_is)}" if now_is else "holds weights no registered target has"
        return [_f("FINGERPRINT_MISMATCH", "error",
                   f"{deployment}: the target changed under the draft - {served_model_path(dep) or dep.target_ref} "
                   f"{what} (fingerprint {live[:15]}...), but {draft.ref} was trained against {draft.target} "
                   f"({trained[:15]}...)",
                   f"retrain the draft against the live target (specops retrain --deployment {deployment}) or roll "
                   f"the target back to {draft.target}", **ev)]

    def restart_probe(self, deployment: str) -> list[Finding]:
        from specops.engines.manage import restart

        before = self.observation(deployment)
        a0 = before.total.alpha if before.total else None
        restart(deployment, registry=self.reg, progress=self.progress)
        t0 = self.now()
        deadline = t0 + self.probe_wait_s
        obs = None
        while self.now() < deadline:
            if self.progress:
                from specops.progress import waiting

                self.progress(waiting(f"{self.min_drafts:g} drafts on the restarted {deployment}", self.now() - t0,
                                      self.probe_wait_s))
            self.sleep(10)
            obs = self.observation(deployment, fresh=True)
            if obs.total is not None and obs.total.drafts >= self.min_drafts:
                break
        if obs is None or obs.total is None or obs.total.drafts < self.min_drafts or obs.total.alpha is None:
            raise MeasurementError(f"{deployment} restarted, but saw under {self.min_drafts:g} drafts within "
                                   f"{self.probe_wait_s:.0f}s", "send traffic and run the runbook again")
        a1 = obs.total.alpha
        base = self.baseline(deployment)
        b = base.labels[ALL].mean if base and ALL in base.labels else None
        ev = dict(deployment=deployment, alpha_before=_r(a0), alpha_after=_r(a1), baseline=_r(b))
        lost = (b - a0) if (b is not None and a0 is not None) else None
        if lost and lost > 1e-6 and (a1 - a0) / lost >= 0.6:
            return [_f("RESTART_RECOVERED", "warning", f"{deployment}: α {a0:.3f} -> {a1:.3f} after a restart "
                       f"(baseline {b:.3f}): engine-state decay", "schedule restarts; do not retrain", **ev)]
        return [_f("RESTART_NO_CHANGE", "info", f"{deployment}: a restart did not bring acceptance back "
                   f"(α {a0 if a0 is None else round(a0, 3)} -> {a1:.3f})", **ev)]


def _against_baseline(deployment: str, observed: float, mean: float, std: float, ev: dict, *, drop_what: str,
                      ok_what: str, detail: str, ok_detail: str) -> list[Finding]:
    """ACCEPTANCE_DROP when ``observed`` is DROP_SIGMAS or more below its baseline ``mean`` (std floored at
    0.01), else QUERY_OK: the one judgement both acceptance bases (per step, per drafted token) make."""
    sigmas = (mean - observed) / max(std, 0.01)
    ev.update(sigmas=_r(sigmas, 2))
    if sigmas >= DROP_SIGMAS:
        return [_f("ACCEPTANCE_DROP", "warning", f"{deployment}: {drop_what} {observed:.3f} is {sigmas:.1f}σ below "
                   f"its baseline {mean:.3f} ({detail})", "find the cause with the next steps", **ev)]
    return [_f("QUERY_OK", "info", f"{deployment}: {ok_what} {observed:.3f} is within {DROP_SIGMAS:g}σ of its "
               f"baseline {mean:.3f} ({ok_detail})", **ev)]
