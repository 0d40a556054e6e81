"""The monitor exports each watched deployment's expectations (from its saved spec's `expectations`
block) as series on its own /metrics, for the Grafana dashboard's reference lines: a real registry, a
real saved spec, the real Watcher and its exposition text."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from specops.drift.actions import EngineExecutor
from specops.drift.service import MonitorOptions, Watcher
from tests.drift.test_wiring import Spawned, _save_spec, engine, reg  # noqa: F401 - fixtures

from .wiring import make_fleet


def _series(reg) -> dict[tuple[str, str], float]:  # noqa: F811 - the fixture's value
    watcher = Watcher(reg, MonitorOptions(interval_s=60.0), executor=EngineExecutor(reg, spawn=Spawned()))
    text = watcher.monitor.metrics.exposition().decode()
    return {(s.name, s.labels.get("specops_deployment", "")): s.value
            for family in text_string_to_metric_families(text) for s in family.samples
            if s.name.startswith(("specops_expected", "specops_break_even", "specops_num_speculative"))}


def test_expected_break_even_speedup_and_tau_come_from_the_saved_spec(reg, tmp_path, engine):  # noqa: F811
    f = make_fleet(reg, tmp_path, engine.url)
    _save_spec("chat", f["served"], f["draft"], None)
    assert _series(reg) == {("specops_num_speculative_tokens", "chat"): 3.0}  # no expectations: no lines
    _save_spec("chat", f["served"], f["draft"], {"acceptance_rate": 0.6, "break_even_acceptance_rate": 0.35,
                                                   "speedup": 1.8, "source": "specops recommend (predicted)"})
    assert _series(reg) == {
        ("specops_num_speculative_tokens", "chat"): 3.0,
        ("specops_expected_acceptance_rate", "chat"): 0.6,
        ("specops_break_even_acceptance_rate", "chat"): 0.35,
        ("specops_expected_speedup", "chat"): 1.8,
        ("specops_expected_mean_acceptance_length", "chat"): 1 + 3 * 0.6,
    }
