#!/usr/bin/env python3
"""The test suite's budget: where each tier's time goes (stdlib only: runs before the venv exists).

    python3 scripts/test_budget.py run fast -- make test-fast     # run a tier's command, recording it
    python3 scripts/test_budget.py run test -- make test
    python3 scripts/test_budget.py report                          # every tier recorded in .test-budget/
    python3 scripts/test_budget.py report --junit x.xml [--events x.events]   # any pytest junit XML

``run TIER -- CMD...`` runs CMD with ``PYTEST_ADDOPTS=--junitxml=OUT/TIER.xml`` (pytest reads it, so
any make target works as written; a command of several pytest runs, scripts/test.sh, gives each its own
``OUT/TIER.PART.xml``, and the tier is all of them) and ``SPECOPS_TEST_EVENTS=OUT/TIER.events`` (the test-only hook in
specops/engines/local.py: one line per real vLLM engine start, failed start and vLLM pre-launch check,
from whichever process made it, with the test that caused it), times CMD's wall clock (venv and
service set-up included) into OUT/TIER.json, then prints the report. OUT (default ``.test-budget/``,
git-ignored) holds only the latest run of each tier; ``run`` deletes that tier's old files first, so a
report never mixes runs.

The report: the 30 slowest tests (setup + call + teardown, from the junit XML), the tests that start
engines (how many starts, checks and their seconds), and per tier: tests, failures, pytest's own
time, the command's wall time, engine starts and checks. CI (.ci/run) runs its targets through
``run`` and ends with ``report``, so every CI log shows the budget, and a change's delta is the
difference of two reports.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / ".test-budget"
TIER_ORDER = ("fast", "test", "kube", "long")
EVENTS = ("engine_start", "engine_start_failed", "vllm_check")


@dataclass
class Tier:
    name: str
    tests: dict[str, float] = field(default_factory=dict)  # test id -> seconds (setup+call+teardown)
    failed: int = 0
    skipped: int = 0
    pytest_s: float = 0.0
    wall_s: float | None = None
    rc: int | None = None
    command: str = ""
    span: tuple[float, float] | None = None  # (started, ended), epoch seconds, where recorded
    events: dict[str, dict[str, list[float]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(list)))

    def count(self, kind: str) -> int:
        return sum(len(v[kind]) for v in self.events.values())

    def seconds(self, kind: str) -> float:
        return sum(sum(v[kind]) for v in self.events.values())


def _test_id(case: ET.Element) -> str:
    cls, name = case.get("classname", ""), case.get("name", "")
    parts = cls.split(".")
    # pytest writes tests/x/test_y.py::Class::test as classname "tests.x.test_y.Class", name "test"
    for i in range(len(parts), 0, -1):
        path = Path(*parts[:i]).with_suffix(".py")
        if (REPO / path).is_file():
            return "::".join([str(path), *parts[i:], name])
    return f"{cls}::{name}"


def read_junit(path: Path, tier: Tier) -> None:
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    for suite in suites:
        tier.pytest_s += float(suite.get("time", 0) or 0)
        for case in suite.iter("testcase"):
            tid = _test_id(case)
            tier.tests[tid] = tier.tests.get(tid, 0.0) + float(case.get("time", 0) or 0)
            if case.find("failure") is not None or case.find("error") is not None:
                tier.failed += 1
            elif case.find("skipped") is not None:
                tier.skipped += 1


def read_events(path: Path, tier: Tier) -> None:
    for line in path.read_text(errors="replace").splitlines():
        kind, _, rest = line.partition("\t")
        seconds, _, test = rest.partition("\t")
        if kind not in EVENTS:
            continue
        # PYTEST_CURRENT_TEST is "tests/x.py::test_y (call)": the phase says a fixture (setup) started it
        tier.events[test.strip() or "-"][kind].append(float(seconds or 0))


def load_tier(out: Path, name: str) -> Tier | None:
    xml, events, meta = out / f"{name}.xml", out / f"{name}.events", out / f"{name}.json"
    tier = Tier(name)
    parts = sorted(out.glob(f"{name}.*.xml"))  # scripts/test.sh: one junit file per pytest run
    if not (xml.is_file() or events.is_file() or meta.is_file() or parts):
        return None
    for x in ([xml] if xml.is_file() else []) + parts:
        read_junit(x, tier)
    if events.is_file():
        read_events(events, tier)
    if meta.is_file():
        m = json.loads(meta.read_text())
        tier.wall_s, tier.rc, tier.command = m.get("wall_s"), m.get("rc"), m.get("command", "")
        tier.span = (m["started"], m["ended"]) if "started" in m and "ended" in m else None
    return tier


def _fmt_s(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s:.0f} s" if s < 120 else f"{s:.0f} s ({s / 60:.1f} min)"


def report(tiers: list[Tier], slowest: int = 30) -> str:
    lines: list[str] = []
    every = [(s, t.name, tid) for t in tiers for tid, s in t.tests.items()]
    every.sort(reverse=True)
    lines.append(f"== the {min(slowest, len(every))} slowest tests (setup + call + teardown) ==")
    for s, name, tid in every[:slowest]:
        lines.append(f"{s:8.1f} s  [{name}]  {tid}")
    lines.append("")
    lines.append("== real vLLM engine starts and pre-launch checks, by test ==")
    any_events = False
    for t in tiers:
        for test, kinds in sorted(t.events.items()):
            any_events = True
            parts = [f"{k} x{len(v)} ({sum(v):.0f} s)" for k, v in kinds.items() if v]
            lines.append(f"[{t.name}]  {test}: " + ", ".join(parts))
    if not any_events:
        lines.append("(none recorded)")
    lines.append("")
    lines.append("== tiers ==")
    lines.append("| tier | command | tests | failed | skipped | pytest | wall (command) | engine starts | "
                 "failed starts | vLLM checks | seconds in starts + checks |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for t in tiers:
        in_engines = sum(t.seconds(k) for k in EVENTS)
        lines.append(f"| {t.name} | `{t.command or '-'}` | {len(t.tests)} | {t.failed} | {t.skipped} | "
                     f"{_fmt_s(t.pytest_s)} | {_fmt_s(t.wall_s)} | {t.count('engine_start')} | "
                     f"{t.count('engine_start_failed')} | {t.count('vllm_check')} | {_fmt_s(in_engines)} |")
    walls = [t.wall_s for t in tiers if t.wall_s is not None]
    if len(tiers) > 1 and len(walls) == len(tiers):
        lines.append(f"\ntotal wall time of the tiers above: {_fmt_s(sum(walls))}")
        spans = [t.span for t in tiers if t.span]
        if len(spans) == len(tiers):  # tiers run side by side (.ci/run) overlap: the clock from first start to last end
            elapsed = max(e for _, e in spans) - min(s for s, _ in spans)
            lines.append(f"from the first tier's start to the last one's end: {_fmt_s(elapsed)}")
    return "\n".join(lines)


def _tiers(out: Path, names: list[str] | None) -> list[Tier]:
    found = names or [*TIER_ORDER, *sorted({p.stem for p in out.glob("*.json")} - set(TIER_ORDER))]
    return [t for t in (load_tier(out, n) for n in found) if t is not None]


def cmd_run(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        print("test_budget.py run: no command. To fix: python3 scripts/test_budget.py run TIER -- make test",
              file=sys.stderr)
        return 2
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    for suffix in (".xml", ".events", ".json"):
        (out / f"{args.tier}{suffix}").unlink(missing_ok=True)
    for part in out.glob(f"{args.tier}.*.xml"):
        part.unlink()
    env = dict(os.environ)
    # an outer tier's --junitxml (this script run inside a test that `run` is timing) is dropped: the
    # tier's parts are found from the first --junitxml, which must be this tier's own
    inherited = re.sub(r"--junitxml(=|\s+)\S+", "", env.get("PYTEST_ADDOPTS", "")).split()
    env["PYTEST_ADDOPTS"] = " ".join(inherited + [f"--junitxml={out / (args.tier + '.xml')}"])
    env["SPECOPS_TEST_EVENTS"] = str(out / f"{args.tier}.events")
    t0, started = time.monotonic(), time.time()
    rc = subprocess.run(command, env=env).returncode
    wall = time.monotonic() - t0
    (out / f"{args.tier}.json").write_text(json.dumps({"wall_s": round(wall, 1), "rc": rc, "command": " ".join(command),
                                                        "started": round(started, 1),
                                                        "ended": round(started + wall, 1)}) + "\n")
    print(report(_tiers(out, [args.tier]), args.slowest))
    return rc


def cmd_report(args: argparse.Namespace) -> int:
    if args.junit or args.events:
        tier = Tier(args.tier or "run")
        for j in args.junit or []:
            read_junit(j, tier)
        if args.events:
            read_events(args.events, tier)
        tiers = [tier]
    else:
        tiers = _tiers(args.out, [args.tier] if args.tier else None)
    if not tiers:
        print(f"test_budget.py: nothing recorded in {args.out}. To fix: python3 scripts/test_budget.py run "
              "test -- make test (or pass --junit FILE)", file=sys.stderr)
        return 2
    print(report(tiers, args.slowest))
    return 0


def main(argv: list[str] | None = None) -> int:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder of the recorded runs (.test-budget/)")
    common.add_argument("--slowest", type=int, default=30, help="how many of the slowest tests to list (30)")
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run", parents=[common], help="run a tier's command and record it")
    r.add_argument("tier", help="a name for the tier: fast, test, kube, long")
    r.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command, e.g. -- make test")
    r.set_defaults(fn=cmd_run)
    q = sub.add_parser("report", parents=[common], help="print the budget of recorded runs (or of a junit XML)")
    q.add_argument("--tier", help="only this tier (or the name for --junit)")
    q.add_argument("--junit", type=Path, action="append", help="a pytest --junitxml file (repeatable)")
    q.add_argument("--events", type=Path, help="a SPECOPS_TEST_EVENTS file for --junit")
    q.set_defaults(fn=cmd_report)
    args = p.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
