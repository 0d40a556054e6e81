"""Replay a trace recorded from the real CPU engine (scripts/record_traces.py, kept in
tests/assets/drift-traces/) through the monitor's real pipeline.

Nothing here computes acceptance: each recorded scrape is turned back into Prometheus text and given
to ``MetricsSource`` as what its scrape function returned at the recorded time (a skipped or failed
scrape raises the ``MeasurementError`` a real failed scrape raises), so the product's own parser,
counter deltas, reset handling, observations, detectors and classifier see exactly what they would
have seen live. The test module derives its expectations from the recording's phase labels.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

from specops.errors import MeasurementError

TRACES = Path(__file__).resolve().parents[1] / "assets" / "drift-traces"
ENDPOINT = "http://recorded-engine:8000"


def load(name: str) -> dict:
    return json.loads((TRACES / name).read_text())


def exposition(trace: dict, values: list[float | None]) -> str:
    """The recorded samples of one scrape as Prometheus text (TYPE lines for the recorded families)."""
    lines: list[str] = []
    by_family: dict[str, list[str]] = {fam: [] for fam in trace["types"]}
    untyped: list[str] = []
    for key, v in zip(trace["series"], values, strict=True):
        if v is None:
            continue
        name = key.split("{", 1)[0]
        fam = next((f for f in by_family if name in (f, f + "_total")), None)
        (by_family[fam] if fam else untyped).append(f"{key} {v!r}")
    for fam, samples in by_family.items():
        if samples:
            lines += [f"# TYPE {fam} {trace['types'][fam]}", *samples]
    return "\n".join(lines + untyped) + "\n"


class Replay:
    """A clock and a scrape function that step through the recorded scrapes, one per monitor cycle."""

    def __init__(self, trace: dict, scrapes: list[dict] | None = None) -> None:
        self.trace = trace
        self.scrapes = scrapes if scrapes is not None else trace["scrapes"]
        self.i = -1
        self.t = self.scrapes[0]["t"]

    # clock
    def now(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        pass

    def advance(self) -> dict:
        self.i += 1
        s = self.scrapes[self.i]
        self.t = s["t"]
        return s

    # what MetricsSource calls as its scrape function
    def scrape(self, endpoint: str):
        from specops.metrics.parse import parse_metrics_text
        from specops.metrics.scrape import metrics_url

        s = self.scrapes[self.i]
        if not s["ok"]:
            raise MeasurementError(f"cannot scrape {metrics_url(endpoint)}: {s['error']}",
                                   "check that the engine is running")
        return parse_metrics_text(exposition(self.trace, s["values"]), source=metrics_url(endpoint),
                                  taken_at=datetime.fromtimestamp(s["t"], tz=timezone.utc))


def deployment_row(name: str = "tiny") -> SimpleNamespace:
    """The registry fields MetricsSource reads (a local engine without a recorded pid)."""
    return SimpleNamespace(name=name, endpoint=ENDPOINT, served_model_name="tiny", target_fingerprint=None,
                           platform="local", pid=None, pid_start_time=None)


@dataclass
class Step:
    """One monitor cycle over one recorded scrape."""

    scrape: dict
    report: object
    observation: object | None = None
    codes: list[str] = field(default_factory=list)

    @property
    def phase(self) -> str:
        return self.scrape["phase"]


def observations(trace: dict, scrapes: list[dict]) -> list:
    """What the real MetricsSource makes of these scrapes, one fetch per scrape (Unseen included)."""
    from specops.drift.sources import MetricsSource

    replay = Replay(trace, scrapes)
    src = MetricsSource({"tiny": deployment_row()}, replay, scrape=replay.scrape, save_state=False,
                        uptime=lambda dep: None)
    out = []
    for _ in scrapes:
        replay.advance()
        out.append(src.fetch(["tiny"])["tiny"])
    return out


def run_monitor(trace: dict, target, scrapes: list[dict] | None = None, policy=None) -> list[Step]:
    """Run the real Monitor (dry run) one cycle per recorded scrape; returns every cycle."""
    from specops.drift.monitor import Monitor
    from specops.drift.policy import NotifyOnlyExecutor, load_policy
    from specops.drift.sources import MetricsSource

    replay = Replay(trace, scrapes)
    src = MetricsSource({target.name: deployment_row(target.name)}, replay, scrape=replay.scrape,
                        save_state=False, uptime=lambda dep: None)
    pol = policy or load_policy("default").model_copy(update={"dry_run": True})
    mon = Monitor([target], src, pol, NotifyOnlyExecutor(), replay, interval_s=trace["provenance"]["scrape_interval_s"])
    steps = []
    for _ in replay.scrapes:
        s = replay.advance()
        report = mon.run_cycle()
        m = src.last_measurements.get(target.name)
        steps.append(Step(scrape=s, report=report, observation=m if s["ok"] else None,
                          codes=[f.code for f in report.findings]))
        src.last_measurements.pop(target.name, None)
    return steps
