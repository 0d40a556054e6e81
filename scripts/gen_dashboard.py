"""Generate manifests/grafana/specops-dashboard.json (run: `.venv/bin/python scripts/gen_dashboard.py`;
scripts/gen_docs.py writes it too, and its --check covers it).

Every query is built here from two pieces, so that all panels group and filter the same way:
- ``vllm(...)``: a vLLM series summed per deployment, the ``specops_deployment`` label where the
  series has one, else ``model_name`` (the served name), filtered by the ``$deployment`` variable;
- ``monitor(...)``: a series the specops monitor exports per watched deployment (its spec's
  ``expectations``: ``specops_expected_acceptance_rate``, ``specops_break_even_acceptance_rate``,
  ``specops_expected_speedup``, ``specops_expected_mean_acceptance_length``; specops/drift/monitor.py).

tests/checks/test_grafana.py runs every query against a real Prometheus scraping vLLM-format text and
the monitor's own /metrics.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET = REPO / "manifests" / "grafana" / "specops-dashboard.json"
DS = {"type": "prometheus", "uid": "${datasource}"}


def _by(extra: str = "") -> str:
    return "specops_deployment, model_name" + (f", {extra}" if extra else "")


def _dep(inner: str, agg: str, extra: str = "") -> str:
    """``inner`` (grouped by specops_deployment, model_name[, extra]) regrouped by one ``deployment`` label."""
    return (f'{agg} by (deployment{", " + extra if extra else ""}) (label_replace(label_replace({inner}, '
            f'"deployment", "$1", "model_name", "(.+)"), "deployment", "$1", "specops_deployment", "(.+)"))')


def _selectors(metric: str, match: str = "") -> tuple[str, str]:
    """The two selectors of ``metric`` that ``$deployment`` picks: by specops_deployment, or (series
    without that label) by model_name."""
    more = f", {match}" if match else ""
    return (f'{metric}{{specops_deployment=~"$deployment"{more}}}',
            f'{metric}{{specops_deployment="", model_name=~"$deployment"{more}}}')


def vllm_rate(metric: str, match: str = "", extra: str = "") -> str:
    a, b = _selectors(metric, match)
    inner = f"sum by ({_by(extra)}) (rate({a}[$__rate_interval]) or rate({b}[$__rate_interval]))"
    return _dep(inner, "sum", extra)


def vllm_gauge(metric: str, agg: str = "sum") -> str:
    a, b = _selectors(metric)
    return _dep(f"{agg} by ({_by()}) ({a} or {b})", agg)


def monitor(metric: str) -> str:
    return (f'max by (deployment) (label_replace({metric}{{specops_deployment=~"$deployment"}}, "deployment", "$1", '
            f'"specops_deployment", "(.+)"))')


ACCEPTED = vllm_rate("vllm:spec_decode_num_accepted_tokens_total")
DRAFT_TOKENS = vllm_rate("vllm:spec_decode_num_draft_tokens_total")
DRAFTS = vllm_rate("vllm:spec_decode_num_drafts_total")
RATE = f"{ACCEPTED} / {DRAFT_TOKENS}"
TAU = f"1 + {ACCEPTED} / {DRAFTS}"
REALIZED = (f'{monitor("specops_expected_speedup")} * ({TAU}) / '
            f'{monitor("specops_expected_mean_acceptance_length")}')

DEPLOYMENTS = _dep(f"count by ({_by()}) (vllm:spec_decode_num_drafts_total)", "count")
"""The ``deployment`` variable's query: every deployment Prometheus has speculative counters for."""


def _target(ref: str, expr: str, legend: str, **kw) -> dict:
    return {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": ref, **kw}


def _panel(pid: int, kind: str, title: str, description: str, pos: tuple[int, int, int, int], targets: list[dict],
           defaults: dict, overrides: list | None = None, **kw) -> dict:
    x, y, w, h = pos
    return {"id": pid, "type": kind, "title": title, "description": description, "datasource": DS,
            "gridPos": {"x": x, "y": y, "w": w, "h": h}, "fieldConfig": {"defaults": defaults,
                                                                       "overrides": overrides or []},
            **kw, "targets": targets}


def _dashed(ref_match: str, color: str) -> dict:
    return {"matcher": {"id": "byFrameRefID", "options": ref_match},
            "properties": [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
                           {"id": "color", "value": {"mode": "fixed", "fixedColor": color}}]}


def dashboard() -> dict:
    per_pos = (f'{vllm_rate("vllm:spec_decode_num_accepted_tokens_per_pos_total", extra="position")} '
               f'/ ignoring(position) group_left {DRAFTS}')
    pos0 = vllm_rate("vllm:spec_decode_num_accepted_tokens_per_pos_total", match='position="0"') + " / " + DRAFTS
    panels = [
        _panel(1, "timeseries", "Acceptance vs expected and break-even",
               "accepted/drafted as vLLM counts it (solid), the rate the deployment's spec expects (dashed "
               "green) and its break-even rate (dashed red: below it this deployment decodes slower than without "
               "speculation). The two reference lines are the monitor's series from the spec's `expectations` "
               "(`specops recommend -o deployment` writes them); a deployment without them has no lines.",
               (0, 0, 12, 9), [_target("A", RATE, "{{deployment}} accepted/drafted"),
                               _target("B", monitor("specops_expected_acceptance_rate"), "{{deployment}} expected"),
                               _target("C", monitor("specops_break_even_acceptance_rate"),
                                       "{{deployment}} break-even")],
               {"min": 0, "max": 1, "unit": "percentunit"}, [_dashed("B", "green"), _dashed("C", "red")]),
        _panel(2, "timeseries", "Realized speedup (estimated) vs expected",
               "Estimated realized speedup = expected speedup × measured τ / expected τ: the measured acceptance "
               "with the step cost the prediction assumed (not a timing; `specops bench` measures one). Dashed: "
               "the expected speedup; the line at 1 is break-even.",
               (12, 0, 12, 9), [_target("A", REALIZED, "{{deployment}} realized (est.)"),
                                _target("B", monitor("specops_expected_speedup"), "{{deployment}} expected")],
               {"min": 0, "unit": "x", "thresholds": {"mode": "absolute", "steps": [
                   {"color": "red", "value": None}, {"color": "green", "value": 1}]},
                "custom": {"thresholdsStyle": {"mode": "dashed"}}}, [_dashed("B", "green")]),
        _panel(3, "barchart", "Acceptance per draft position",
               "P(first i+1 drafts accepted) = accepted_per_pos[i] / drafts, per deployment.", (0, 9, 12, 9),
               [_target("A", per_pos, "{{deployment}} pos {{position}}", instant=True, range=False, format="table")],
               {"min": 0, "max": 1, "unit": "percentunit"}, options={"xField": "position", "orientation": "vertical"}),
        _panel(4, "timeseries", "Acceptance over time",
               "accepted/drafted (falls as γ grows) and position-0 acceptance. Dashed lines: the gpu-default "
               "floors (0.5, 0.7), which `specops validate` applies to the per-token α.", (12, 9, 12, 9),
               [_target("A", RATE, "{{deployment}} accepted/drafted"), _target("B", pos0, "{{deployment}} position 0")],
               {"min": 0, "max": 1, "unit": "percentunit", "thresholds": {"mode": "absolute", "steps": [
                   {"color": "red", "value": None}, {"color": "orange", "value": 0.5}, {"color": "green", "value": 0.7}]},
                "custom": {"thresholdsStyle": {"mode": "dashed"}}}),
        _panel(5, "timeseries", "Mean acceptance length τ", "1 + accepted / drafts (bonus token included); dashed: "
               "1 + γ × the expected rate.", (0, 18, 12, 8),
               [_target("A", TAU, "{{deployment}} τ"),
                _target("B", monitor("specops_expected_mean_acceptance_length"), "{{deployment}} expected τ")],
               {"min": 1, "unit": "none"}, [_dashed("B", "green")]),
        _panel(6, "timeseries", "TPOT p50 with vs without speculation",
               "Per-request TPOT from vllm:request_time_per_output_token_seconds. A no-speculation baseline "
               "deployment (its own specops_deployment label) appears as its own series beside the speculative one.",
               (12, 18, 12, 8),
               [_target("A", "histogram_quantile(0.5, " + vllm_rate("vllm:request_time_per_output_token_seconds_bucket",
                                                                    extra="le") + ")", "{{deployment}} TPOT p50")],
               {"unit": "s", "min": 0}),
        _panel(7, "timeseries", "Requests running and waiting", "Concurrency and queue depth.", (0, 26, 12, 7),
               [_target("A", vllm_gauge("vllm:num_requests_running"), "{{deployment}} running"),
                _target("B", vllm_gauge("vllm:num_requests_waiting"), "{{deployment}} waiting")], {"min": 0}),
        _panel(8, "timeseries", "KV-cache usage", "vllm:kv_cache_usage_perc (max over engines).", (12, 26, 12, 7),
               [_target("A", vllm_gauge("vllm:kv_cache_usage_perc", "max"), "{{deployment}}")],
               {"min": 0, "max": 1, "unit": "percentunit"}),
    ]
    return {
        "title": "specops: speculative decoding", "uid": "specops-spec-decode", "schemaVersion": 39, "version": 2,
        "tags": ["specops", "vllm", "speculative-decoding"], "timezone": "utc", "editable": True,
        "time": {"from": "now-6h", "to": "now"}, "refresh": "30s",
        "description": "Generated by scripts/gen_dashboard.py. Per deployment (the specops_deployment label "
                       "where present, else model_name; the `deployment` variable picks them): acceptance against "
                       "the spec's expected and break-even rates, the realized speedup (estimated) against the "
                       "expected one, acceptance per draft position, τ, TPOT, load and KV cache. The reference lines "
                       "need the specops monitor's /metrics scraped (docs/monitor.md). Checklist results live in "
                       "the registry (specops validate/report).",
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
            {"name": "deployment", "type": "query", "label": "Deployment", "datasource": DS,
             "query": {"query": f"query_result({DEPLOYMENTS})", "refId": "deployments"},
             "definition": f"query_result({DEPLOYMENTS})", "regex": '/deployment="([^"]+)"/',
             "multi": True, "includeAll": True, "allValue": ".*", "refresh": 2, "sort": 1,
             "current": {"selected": True, "text": ["All"], "value": ["$__all"]}},
        ]},
        "panels": panels,
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if TARGET.read_text() != text:
            print(f"{TARGET.relative_to(REPO)} is out of date. To fix: run .venv/bin/python scripts/gen_dashboard.py")
            return 1
        return 0
    TARGET.write_text(text)
    print(f"wrote {TARGET.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
