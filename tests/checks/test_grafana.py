"""The Grafana dashboard: valid JSON, the report's panels, PromQL that Prometheus' own parser accepts."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import yaml

from tests.conftest import REPO

DASHBOARD = REPO / "manifests" / "grafana" / "specops-dashboard.json"


def _exprs() -> list[str]:
    dash = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in dash["panels"] for t in p["targets"]]


def test_dashboard_has_the_report_panels_grouped_by_deployment_with_model_name_fallback():
    dash = json.loads(DASHBOARD.read_text())
    titles = [p["title"] for p in dash["panels"]]
    for wanted in ("Acceptance per draft position", "Acceptance over time", "TPOT p50 with vs without speculation"):
        assert wanted in titles
    for expr in _exprs():
        assert '"specops_deployment", "(.+)"' in expr and '"model_name", "(.+)"' in expr
    assert all(p["datasource"]["uid"] == "${datasource}" for p in dash["panels"])


@pytest.mark.promtool
def test_every_dashboard_query_parses_with_promtool(tmp_path):
    promtool = shutil.which("promtool")
    assert promtool, "install Debian's prometheus package (it ships promtool)"
    rules = {"groups": [{"name": "specops-dashboard", "rules": [
        {"record": f"specops:dashboard_query_{i}", "expr": e.replace("$__rate_interval", "5m")}
        for i, e in enumerate(_exprs())]}]}
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    r = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{len(_exprs())} rules found" in r.stdout
