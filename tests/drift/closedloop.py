"""A closed loop: the real Monitor over simulated engines (tracegen), with an executor that restarts
the simulated engine. Mocks: the engines are simulated (no fleet can run here); everything else is
the real library."""

from __future__ import annotations

from specops.drift.gamma import reference_predictor
from specops.drift.monitor import Monitor
from specops.drift.policy import NotifyOnlyExecutor, Policy, load_policy
from specops.drift.tracegen import FakeClock, SimDeployment, SimSource, TraceConfig
from specops.drift.watch import WatchTarget


class SimExecutor(NotifyOnlyExecutor):
    def __init__(self, sims):
        self.sims, self.calls = sims, []

    def notify(self, deployment, finding, webhook_url):
        self.calls.append(("notify", deployment, finding.code))

    def restart_probe(self, deployment, reason):
        self.calls.append(("restart_probe", deployment, reason))
        self.sims[deployment].restart()

    def open_retraining(self, deployment, reason):
        self.calls.append(("open_retraining", deployment, reason))

    def disable_speculation(self, deployment, reason):
        self.calls.append(("disable_speculation", deployment, reason))


def run(cfg: TraceConfig, hours: float, base, policy: Policy | None = None, **target):
    clock = FakeClock(cfg.start)
    sims = {"d1": SimDeployment("d1", cfg)}
    ex = SimExecutor(sims)
    t = dict(name="d1", baseline=base, trained_against="sha256:target-v1", restart_allowed=True)
    t.update(target)
    mon = Monitor([WatchTarget(**t)], SimSource(sims, clock), policy or load_policy("default"), ex, clock,
                  predictor=reference_predictor())
    reports = []
    mon.run(max_cycles=int(hours * 60), on_report=reports.append)
    return reports, ex, sims["d1"]


def first(reports, code):
    for r in reports:
        for f in r.findings:
            if f.code == code:
                return r, f
    return None, None
