"""Canary tests: the sequential promotion gate's record (table ``canary_test``, migration
``0003_canary_tests``).

One row per test: the deployment (incumbent) it was run for, candidate and incumbent drafts, where the
traffic came from (``replayed-prompts`` locally, ``live-share`` on Kubernetes), what one sample is, the
decision (better / worse / no-decision), samples used of the budget, the stated false-promotion rate
(``alpha``) and margin, the simulated power, the whole verdict and every sample in order. The
``heal.promoted`` and ``heal.rollback`` events name the row (``data.canary_test``).

The verdict's type lives in :mod:`specops.heal.sequential`; this module stores it as JSON and does not
import it (the registry stays below the capability packages).
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session, select

from specops.errors import NotFoundError
from specops.registry.schema import CanaryTest, CanaryTestCreate, CanaryTestPublic, Deployment, to_utc, utcnow
from specops.registry.store import RegistryBase, _validated


def _public(row: CanaryTest, deployment: str) -> CanaryTestPublic:
    return CanaryTestPublic.model_validate({**row.model_dump(exclude={"deployment_id"}), "deployment": deployment})


class CanaryMixin(RegistryBase):
    def record_canary_test(self, deployment: str, *, candidate: str, verdict: dict, traffic: str, metric: str,
                           data: list[dict], incumbent: str | None = None, target: str | None = None,
                           canary: str | None = None, started_at: datetime | None = None,
                           finished_at: datetime | None = None) -> CanaryTestPublic:
        """Store one finished test (``verdict``: a ``Verdict`` as JSON) and a ``canary.test`` event."""
        def work(s: Session) -> CanaryTestPublic:
            dep = self._dep(s, deployment)
            create = CanaryTestCreate(deployment_id=dep.id, candidate=candidate, incumbent=incumbent, target=target,
                                      canary=canary, traffic=traffic, metric=metric, decision=verdict["decision"],
                                      samples=verdict["samples"], budget=verdict["budget"], alpha=verdict["alpha"],
                                      min_gain=verdict["min_gain"], power=verdict.get("power"),
                                      mean_gain=verdict.get("mean_gain"), verdict=verdict, data=data,
                                      started_at=to_utc(started_at) or utcnow(),
                                      finished_at=to_utc(finished_at) or utcnow())
            row = _validated(CanaryTest, create)
            s.add(row)
            s.flush()
            self._event(s, "canary.test", deployment,
                        f"canary test {row.id}: {candidate} vs {incumbent or '-'}: {row.decision} after "
                        f"{row.samples}/{row.budget} samples (alpha {row.alpha:g}, {traffic})",
                        data={"canary_test": row.id, "decision": row.decision, "samples": row.samples,
                              "alpha": row.alpha})
            return _public(row, deployment)
        return self._tx(work)

    def get_canary_test(self, test_id: int) -> CanaryTestPublic:
        def work(s: Session) -> CanaryTestPublic:
            row = s.get(CanaryTest, test_id)
            if row is None:
                raise NotFoundError(f"no canary test {test_id} in the registry",
                                    "list them with `specops lineage show DRAFT` (its canary_tests)")
            return _public(row, s.get(Deployment, row.deployment_id).name)
        return self._tx(work, write=False)

    def canary_tests(self, *, deployment: str | None = None, draft: str | None = None,
                     limit: int = 50) -> list[CanaryTestPublic]:
        """Newest first; ``draft`` matches the candidate or the incumbent."""
        def work(s: Session) -> list[CanaryTestPublic]:
            q = select(CanaryTest, Deployment.name).join(Deployment, Deployment.id == CanaryTest.deployment_id)
            if deployment:
                q = q.where(CanaryTest.deployment_id == self._dep(s, deployment).id)
            if draft:
                q = q.where((CanaryTest.candidate == draft) | (CanaryTest.incumbent == draft))
            return [_public(r, n) for r, n in s.exec(q.order_by(CanaryTest.id.desc()).limit(limit)).all()]
        return self._tx(work, write=False)
