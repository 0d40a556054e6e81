"""Counters that cannot come from a vLLM engine never make a check pass: they are refused before any
verdict (could not evaluate, exit 2). A real HTTP /metrics server (stdlib, loopback) serves the text,
the real parser and differencing read it, the real evaluator judges it. Faked: the engine (the test
writes its counters) and the clock between scrapes (a sleep that advances the counters instead)."""

from __future__ import annotations

import json

import pytest

from specops.checks.evaluate import run_checklist
from specops.checks.playbook import get_profile, load_checklist
from specops.checks.sources import Sources, deployment_facts, endpoint_windows
from tests.checks.helpers import exposition
from tests.metrics.textserver import TextServer

ACCEPTANCE = ["deploy.acceptance-p50", "deploy.acceptance-p5", "deploy.position0"]


class Hostile:
    """Counters per scrape: ``step(i)`` -> (drafts, per-position accepted, drafted tokens or None)."""

    def __init__(self, step):
        self.step, self.i = step, 0
        self.server = TextServer(self.text())

    def text(self) -> str:
        drafts, per_pos, drafted = self.step(self.i)
        text = exposition(drafts, per_pos, gen_tokens=drafts * 4)
        if drafted is not None:
            text = text.replace(f"num_draft_tokens_total{{engine=\"0\",model_name=\"tiny\"}} {float(drafts * len(per_pos))}",
                                f"num_draft_tokens_total{{engine=\"0\",model_name=\"tiny\"}} {drafted}")
        return text

    def sleep(self, _seconds: float) -> None:
        self.i += 1
        self.server.text = self.text()


def _run(registry, hostile: Hostile):
    cl = load_checklist("deploy")
    cl = cl.model_copy(update={"checks": [c for c in cl.checks if c.id in ACCEPTANCE]})
    src = Sources(deployment=deployment_facts(registry.get_deployment("tiny-matched")),
                  windows=endpoint_windows(hostile.server.url, "tiny", sleep=hostile.sleep), registry=registry)
    try:
        return run_checklist(cl, "cpu-tiny", get_profile("cpu-tiny"), src)
    finally:
        hostile.server.close()


CASES = {
    # accepted 10x the drafts at position 0 (and above the drafted tokens): α would clamp to 1.0
    "accepted above drafted": (lambda i: (100 * i, [1000 * i, 900 * i, 800 * i], None), "drafted"),
    "negative counters": (lambda i: (-100 * i, [-50 * i, -20 * i, -5 * i], None), ">= 0"),
    "infinite counter": (lambda i: (100 * i, [50 * i, 20 * i, 5 * i], "+Inf"), "finite"),
    # a reset on every scrape: every count lower than the one before
    "reset every scrape": (lambda i: (1000 - 100 * i, [500 - 50 * i] * 3, None), "went back in 6 of the 6"),
    # a restart in every other window
    "reset every other scrape": (lambda i: ((1000 if i % 2 else 100) * (i + 1), [(500 if i % 2 else 50) * (i + 1)] * 3,
                                            None), "went back in 3 of the 6"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_counters_that_cannot_be_real_are_never_a_pass(registry, case):
    step, words = CASES[case]
    report = _run(registry, Hostile(step))
    assert [r.status for r in report.results] == ["error"] * len(ACCEPTANCE), [r.message for r in report.results]
    assert report.exit_code == 2 and report.verdict == "could not evaluate"
    assert all(words in r.message and "could not evaluate" in r.message for r in report.results), \
        [r.message for r in report.results]
    json.loads(json.dumps(report.model_dump(mode="json"), allow_nan=False))  # stays JSON


def test_an_occasional_restart_is_named_in_the_verdict(registry):
    """One restart among the windows: the other windows are judged, and the message says so."""
    def step(i):
        n = 100 * i if i < 3 else 100 * (i - 2)  # the engine restarted before scrape 3
        return n, [round(n * 0.72), round(n * 0.45), round(n * 0.26)], None
    report = _run(registry, Hostile(step))
    p50 = next(r for r in report.results if r.id == "deploy.acceptance-p50")
    assert p50.status == "pass" and p50.evidence["counter_resets"] == 1
    assert "went back in 1 of" in p50.message


def test_a_profile_that_skips_every_check_is_not_a_pass(registry):
    from specops.checks.types import Profile

    cl = load_checklist("deploy")
    prof = get_profile("cpu-tiny")
    prof = Profile.model_validate({**prof.model_dump(), "skip": {c.id: "not here" for c in cl.checks}})
    src = Sources(deployment=deployment_facts(registry.get_deployment("tiny-matched")), registry=registry)
    report = run_checklist(cl, "everything-skipped", prof, src)
    assert {r.status for r in report.results} == {"skipped"}
    assert report.exit_code == 2 and report.verdict == "could not evaluate"
