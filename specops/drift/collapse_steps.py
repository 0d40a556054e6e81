"""The acceptance-collapse runbook's steps: one per cause, each proving or refuting it from the record.

Mixed into :class:`specops.drift.steps.RegistrySteps` (it uses its ``reg``, ``store``, ``observation``,
``baseline`` and ``now``). Each step returns a ``COLLAPSE_*`` finding when its cause holds, a
``QUERY_OK`` saying why it is refuted otherwise, or raises ``CouldNotEvaluate`` when the record
cannot tell (never a silent pass):

- ``collapse`` — τ − 1 (first-token acceptance when the drafted length varies) now against the
  baseline's, on the basis the monitor uses (:mod:`specops.drift.collapse`);
- ``draft_weight_events`` — restarts, sleep/wake and draft weight updates: the registry's events for
  the deployment and, for a local engine, its log;
- ``kv_connector`` — a ``--kv-transfer-config`` in the recorded argv (vllm#49071, LMCache#3388);
- ``k0_schedule`` — a K=0 range in the recorded schedule and stored windows that ran without drafts;
- ``method_match`` — the recorded method against the method the registered draft is for.
"""

from __future__ import annotations

import re

from specops.drift.collapse import (
    BASIS_TEXT,
    LIFECYCLE,
    basis_for,
    collapse_ratio,
    has_k0_range,
    varying_launch,
)
from specops.drift.detectors import DetectionConfig
from specops.drift.observe import ALL
from specops.errors import CouldNotEvaluate, NotFoundError, SpecopsError
from specops.models import Finding

EVENT_WINDOW_S = 6 * 3600.0
LOG_MARKERS = re.compile(r"(sleep|wake[_ ]?up|weight[_ ]update|start_draft_weight_update|Starting vLLM)", re.I)


def _f(code: str, severity: str, message: str, fix: str | None = None, **evidence) -> Finding:
    return Finding(code=code, severity=severity, message=message, fix=fix, evidence=evidence)


def launch_record(dep) -> dict:
    """What the monitor and the runbook read from a deployment's recorded launch: method, schedule,
    KV connector, adaptive verification (from its --speculative-config / engine_config)."""
    from specops.drift.fleet import _schedule, _spec_config, method_of
    from specops.engines.bugs import _last_value

    sc = _spec_config(dep) or {}
    argv = [str(a) for a in dep.argv_redacted or []]
    ec = dep.engine_config or {}
    return {"method": method_of(dep), "schedule": _schedule(dep) or sc.get("num_speculative_tokens_per_batch_size"),
            "kv_connector": (_last_value(argv, "--kv-transfer-config") is not None) if argv else None,
            "kv_connector_config": _last_value(argv, "--kv-transfer-config") if argv else None,
            "adaptive_verification": bool(sc.get("enable_adaptive_verification")
                                          or (ec.get("speculative_config") or {}).get("enable_adaptive_verification"))}


class CollapseSteps:
    """Runbook queries for ``acceptance-collapse`` (mixed into RegistrySteps)."""

    def _basis(self, deployment: str, w) -> tuple[str, dict]:
        rec = launch_record(self.reg.get_deployment(deployment))
        return basis_for(w, varying=varying_launch(rec["schedule"], rec["method"]),
                         adaptive=rec["adaptive_verification"]), rec

    def _q_collapse(self, deployment: str) -> list[Finding]:
        obs = self.observation(deployment)
        w = obs.total
        if w is None or w.drafts <= 0:
            raise CouldNotEvaluate(f"{deployment}: no drafts in the {obs.window_s:g}s window: a collapse needs drafts "
                                   "that keep coming", "send traffic to the deployment and run the runbook again")
        basis, _ = self._basis(deployment, w)
        base = self.baseline(deployment)
        b = base.labels.get(ALL) if base else None
        cfg = DetectionConfig()
        ratio, what = collapse_ratio(w, b, basis, cfg)  # type: ignore[arg-type]
        ev = dict(deployment=deployment, basis=basis, basis_text=BASIS_TEXT[basis], compared=what,
                  ratio=None if ratio is None else round(ratio, 3), tau=round(w.tau, 4), drafts=w.drafts,
                  mean_drafted=round(w.mean_drafted, 3), fraction=cfg.collapse_fraction)
        if ratio is not None and ratio < cfg.collapse_fraction:
            return [_f("ACCEPTANCE_COLLAPSE", "error", f"{deployment}: acceptance collapsed ({what}) while drafting "
                       f"continues ({w.drafts:g} drafts)", "the next steps prove or refute each cause", **ev)]
        return [_f("QUERY_OK", "info", f"{deployment}: no collapse now ({what})", **ev)]

    def _q_draft_weight_events(self, deployment: str) -> list[Finding]:
        since = self.now() - EVENT_WINDOW_S
        events = [e for e in self.reg.events(subject=deployment, limit=200)
                  if e.at.timestamp() >= since and _lifecycle(e.kind, e.message)]
        log_lines: list[str] = []
        from specops.engines.manage import tail

        try:
            log_lines = [ln for ln in tail(deployment, 400) if LOG_MARKERS.search(ln)]
        except (NotFoundError, OSError):
            log_lines = []
        seen = [f"{e.at:%Y-%m-%d %H:%M} {e.kind}: {e.message[:120]}" for e in events] + log_lines[-5:]
        ev = dict(deployment=deployment, events=seen, hours=EVENT_WINDOW_S / 3600)
        if seen:
            return [_f("COLLAPSE_STALE_WEIGHTS", "warning", f"{deployment}: {len(seen)} restart/sleep/wake/weight-update "
                       f"record(s) in the last {EVENT_WINDOW_S / 3600:g} h: the draft weights may not match the target's "
                       "any more (vllm#52487)", f"reload the draft: `specops restart {deployment}` with the draft the "
                       "registry records, then re-run this runbook; if a weight update ran, push the draft's weights too",
                       **ev)]
        return [_f("QUERY_OK", "info", f"{deployment}: no restart, sleep/wake or weight update recorded in the last "
                   f"{EVENT_WINDOW_S / 3600:g} h (registry events, engine log where local): stale weights refuted as "
                   "far as the record goes", **ev)]

    def _q_kv_connector(self, deployment: str) -> list[Finding]:
        dep = self.reg.get_deployment(deployment)
        rec = launch_record(dep)
        if rec["kv_connector"] is None:
            raise CouldNotEvaluate(f"{deployment}: no launch argv on record, so a KV connector cannot be ruled out",
                                   "deploy it with `specops deploy SPEC` or register it with its argv")
        ev = dict(deployment=deployment, kv_connector=rec["kv_connector"], method=rec["method"],
                  prefix_hit_rate="not measured (the vllm:prefix_cache_* counters are not read yet)")
        if rec["kv_connector"]:
            return [_f("COLLAPSE_KV_WITHOUT_DRAFT_KV", "warning", f"{deployment}: the launch has a KV connector "
                       "(--kv-transfer-config): restored target KV without the draft's KV collapses acceptance "
                       "(vllm#49071 fixed in 0.33.0; LMCache#3388 open)", "relaunch without the KV connector (or on "
                       "vLLM >= 0.33.0 for vllm#49071) and compare acceptance", **ev)]
        return [_f("QUERY_OK", "info", f"{deployment}: no KV connector in the recorded launch: refuted", **ev)]

    def _q_k0_schedule(self, deployment: str) -> list[Finding]:
        rec = launch_record(self.reg.get_deployment(deployment))
        sched = rec["schedule"]
        ev = dict(deployment=deployment, schedule=sched)
        if not sched or not has_k0_range(sched):
            return [_f("QUERY_OK", "info", f"{deployment}: the recorded launch has no K=0 schedule range: refuted", **ev)]
        hist = self.store.history(deployment, since=self.now() - 3600)
        idle = [o.at for o in hist if (o.total is None or o.total.drafts < 1) and (o.running or 0) > 0]
        ev["k0_windows"] = len(idle)
        if idle:
            return [_f("COLLAPSE_STALE_AFTER_K0", "warning", f"{deployment}: the schedule has a K=0 range and {len(idle)} "
                       "stored window(s) in the last hour ran requests without drafts: drafter state left stale by a "
                       "K=0 stretch (TensorRT-LLM#16888 on another engine)", "replace the K=0 range with K=1 (or drop "
                       "the schedule) and compare", **ev)]
        return [_f("QUERY_OK", "info", f"{deployment}: the schedule has a K=0 range but no stored window of the last "
                   "hour ran without drafts: refuted for now", **ev)]

    def _q_method_match(self, deployment: str) -> list[Finding]:
        dep = self.reg.get_deployment(deployment)
        method = launch_record(dep)["method"]
        if not dep.draft_ref:
            from specops.speculation import needs_draft

            if method and not needs_draft(method):
                return [_f("QUERY_OK", "info", f"{deployment}: {method} has no draft of its own: refuted")]
            raise CouldNotEvaluate(f"{deployment}: no draft on record to compare the method with",
                                   "register the pair with --draft NAME@VERSION")
        try:
            draft = self.reg.get_draft(dep.draft_ref)
        except SpecopsError as exc:
            raise CouldNotEvaluate(f"{deployment}: the draft {dep.draft_ref} is not registered ({exc.message})",
                                   "register it: `specops lineage register-draft PATH ...`") from None
        from specops.speculation import canonical

        ev = dict(deployment=deployment, method=method, draft_method=draft.method, draft=draft.ref)
        if method and canonical(method) != canonical(draft.method):
            return [_f("COLLAPSE_METHOD_MISMATCH", "error", f"{deployment}: served with method {method}, but "
                       f"{draft.ref} is a {draft.method} draft", f"relaunch with method {draft.method}", **ev)]
        return [_f("QUERY_OK", "info", f"{deployment}: method {method} matches the draft ({draft.method}): refuted", **ev)]


def _lifecycle(kind: str, message: str) -> bool:
    text = f"{kind} {message}".lower()
    return (kind == "deployment.status" and any(w in text for w in ("start", "restart", "running")) or
            any(w.replace("_", "") in re.sub(r"[\s_-]", "", text) for w in LIFECYCLE))
