"""Feedback into ``specops recommend``: measured per-position acceptance of a draft × task becomes the
prior the planner uses for that draft.

:func:`measured_priors` turns the registry's stored measurements (from ``specops bench`` and
``specops validate``) into :class:`specops.planner.types.MeasuredAcceptance` items, one per
(draft, method, task), draft-weighted over every deployment that ran the draft. Wire it as::

    priors = default_priors().with_measured(*measured_priors(reg))
    recommend(request, priors=priors)

The planner reports such a prior as "measured: N samples" (N = verify steps behind it).
"""

from __future__ import annotations

from typing import Any


def measured_priors(reg: Any, *, min_drafts: int = 100, limit_per_deployment: int = 1000,
                    draft_key: str = "ref", notes: list[str] | None = None) -> list:
    """Draft-weighted per-position rates per (draft, method, task) from stored measurements.

    ``draft_key="ref"`` names drafts NAME@VERSION (the registry's reference); ``"source"`` names them by
    the folder or hub id they were registered from (what the planner's catalog calls a draft).

    A deployment whose draft reference the registry does not know (adopted with ``--no-check`` and a
    hub id, or a draft removed since) is skipped, never an error: priors only ever add knowledge. One
    line per skipped deployment goes to ``notes`` when given."""
    from specops.errors import SpecopsError
    from specops.planner.types import MeasuredAcceptance

    sums: dict[tuple[str, str, str], dict] = {}
    for dep in reg.list_deployments():
        if not dep.method or dep.method in ("none",):
            continue
        draft = dep.draft_ref or "*"
        if draft_key == "source" and dep.draft_ref:
            try:
                draft = reg.get_draft(dep.draft_ref).source
            except SpecopsError:
                if notes is not None:
                    notes.append(f'registry: deployment {dep.name} skipped as a prior (draft "{dep.draft_ref}" '
                                 "is not a registered draft)")
                continue
        for m in reg.measurements(dep.name, limit=limit_per_deployment):
            if not m.per_position or m.num_drafts <= 0:
                continue
            key = (draft, dep.method, m.task or "unknown")
            acc = sums.setdefault(key, {"drafts": 0, "weighted": []})
            acc["drafts"] += m.num_drafts
            w = acc["weighted"]
            for i, p in enumerate(m.per_position):
                if i >= len(w):
                    w.append([0.0, 0])
                w[i][0] += p * m.num_drafts
                w[i][1] += m.num_drafts
    out = []
    for (draft, method, task), acc in sorted(sums.items()):
        if acc["drafts"] < min_drafts:
            continue
        rates, prev = [], 1.0
        for total, n in acc["weighted"]:
            rate = min(prev, total / n)  # cumulative rates never rise with position
            rates.append(rate)
            prev = rate
        out.append(MeasuredAcceptance(draft=draft, method=method, task=task, per_position=rates,
                                      samples=int(acc["drafts"])))
    return out
