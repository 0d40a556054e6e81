"""PrometheusRule: speculative-decoding acceptance and TPOT alerts, one series per deployment.

The PodMonitor copies each pod's ``specops.io/deployment`` label into ``specops_deployment`` (and
``specops.io/role`` into ``specops_role``, ``app.kubernetes.io/name`` into ``specops_app``), so a
canary and its stable, which share a served model name (vLLM's ``model_name`` label), stay apart.
The expressions are the reference PromQL (docs/kubernetes.md) grouped by ``specops_deployment``:

- acceptance rate = accepted tokens / drafted tokens (vLLM's per-drafted-token acceptance; not the
  acceptance length τ, and not the i.i.d. α of the papers);
- TPOT = a quantile of ``vllm:request_time_per_output_token_seconds`` (per request).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class AlertThresholds(BaseModel):
    """Thresholds for the rendered PrometheusRule."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    min_acceptance_rate: float = Field(
        0.4, gt=0, lt=1,
        description="Alert when accepted/drafted tokens stays below this (per drafted token). Below ~0.4 "
        "a chain of γ≥3 rarely pays for its verification.")
    max_tpot_seconds: float = Field(0.1, gt=0, description="Alert when the TPOT quantile stays above this.")
    tpot_quantile: float = Field(0.9, gt=0, lt=1, description="Which TPOT quantile to watch.")
    window: str = Field("5m", pattern=r"^[0-9]+[smh]$", description="rate() window.")
    for_: str = Field("10m", alias="for", pattern=r"^[0-9]+[smh]$",
                      description="How long a condition must hold before the alert fires.")
    severity: str = Field("warning", description="`severity` label on the alerts.")


def acceptance_expr(app: str, window: str) -> str:
    sel = f'{{specops_app="{app}"}}'
    return (f"sum by (namespace, specops_deployment) (rate(vllm:spec_decode_num_accepted_tokens_total{sel}[{window}]))\n"
            f"  / sum by (namespace, specops_deployment) (rate(vllm:spec_decode_num_draft_tokens_total{sel}[{window}]))")


def tpot_expr(app: str, window: str, quantile: float) -> str:
    sel = f'{{specops_app="{app}"}}'
    return (f"histogram_quantile({quantile}, sum by (le, namespace, specops_deployment) "
            f"(rate(vllm:request_time_per_output_token_seconds_bucket{sel}[{window}])))")


def prometheus_rule(*, app: str, namespace: str, speculative: bool, thresholds: AlertThresholds,
                    labels: dict[str, str]) -> dict:
    t = thresholds
    rules = []
    if speculative:
        rules.append({
            "alert": "SpecopsLowAcceptanceRate",
            "expr": f"({acceptance_expr(app, t.window)})\n  < {t.min_acceptance_rate}",
            "for": t.for_,
            "labels": {"severity": t.severity},
            "annotations": {
                "summary": "Speculative acceptance rate of {{ $labels.specops_deployment }} is {{ $value | humanize }}",
                "description": (f"Accepted/drafted tokens below {t.min_acceptance_rate} for {t.for_}: the draft "
                                "may be stale for the target or the traffic. Run `specops runbook run acceptance-drop "
                                "-d {{ $labels.specops_deployment }}` (its steps measure and name the cause) and "
                                "consider a lower γ or a retrain."),
            },
        })
    rules.append({
        "alert": "SpecopsHighTPOT",
        "expr": f"{tpot_expr(app, t.window, t.tpot_quantile)}\n  > {t.max_tpot_seconds}",
        "for": t.for_,
        "labels": {"severity": t.severity},
        "annotations": {
            "summary": (f"p{round(t.tpot_quantile * 100)} TPOT of {{{{ $labels.specops_deployment }}}} is "
                        "{{ $value | humanizeDuration }}"),
            "description": f"Time per output token above {t.max_tpot_seconds}s for {t.for_}.",
        },
    })
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": {"name": app, "namespace": namespace, "labels": dict(labels)},
            "spec": {"groups": [{"name": f"specops.{app}", "rules": rules}]}}
