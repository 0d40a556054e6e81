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

from pydantic import ConfigDict, Field

from specops.models import Strict


class AlertThresholds(Strict):
    """Thresholds for the rendered PrometheusRule. Acceptance thresholds are per deployment: from its
    spec's ``expectations`` (:meth:`for_spec`), never one number for every method and γ."""

    model_config = ConfigDict(populate_by_name=True)

    expected_acceptance_rate: float | None = Field(
        None, ge=0, le=1, description="The accepted/drafted rate this deployment should see (predicted or measured).")
    break_even_acceptance_rate: float | None = Field(
        None, ge=0, le=1, description="accepted/drafted below which this deployment is slower than without "
        "speculation: SpecopsAcceptanceBelowBreakEven fires below it.")
    min_acceptance_rate: float | None = Field(
        None, ge=0, le=1, description="SpecopsLowAcceptanceRate fires below this. Default: halfway between the "
        "break-even and the expected rate (the draft is going stale before it costs anything).")
    source: str = Field("", description="Where the acceptance numbers come from (shown in the annotations).")
    max_tpot_seconds: float = Field(0.1, gt=0, description="Alert when the TPOT quantile stays above this.")
    tpot_quantile: float = Field(0.9, gt=0, lt=1, description="Which TPOT quantile to watch.")
    window: str = Field("5m", pattern=r"^[0-9]+[smh]$", description="rate() window.")
    for_: str = Field("10m", alias="for", pattern=r"^[0-9]+[smh]$",
                      description="How long a condition must hold before the alert fires.")
    severity: str = Field("warning", description="`severity` label on the warning alerts (break-even: critical).")

    @classmethod
    def for_spec(cls, spec, base: AlertThresholds | None = None) -> AlertThresholds:
        """``base`` (or the defaults) with the acceptance numbers of ``spec.expectations`` filled in."""
        t = base or cls()
        exp = getattr(spec, "expectations", None)
        if exp is None or t.break_even_acceptance_rate is not None:
            return t
        return t.model_copy(update={"expected_acceptance_rate": exp.acceptance_rate,
                                    "break_even_acceptance_rate": exp.break_even_acceptance_rate,
                                    "source": exp.source})

    def warn_rate(self) -> float | None:
        """The warning threshold: explicit, else halfway from break-even to expected (None: no warning)."""
        if self.min_acceptance_rate is not None:
            return self.min_acceptance_rate
        e, b = self.expected_acceptance_rate, self.break_even_acceptance_rate
        if e is None or b is None or e <= b:
            return None
        return round(b + (e - b) / 2, 3)

    def missing(self) -> str | None:
        """Why no acceptance alert can be rendered, or None."""
        if self.break_even_acceptance_rate is None and self.min_acceptance_rate is None:
            return ("the spec has no `expectations` (expected and break-even acceptance), so no acceptance alert "
                    "is rendered. To fix: write the spec with `specops recommend ... -o deployment`, or add "
                    "`expectations: {acceptance_rate: R, break_even_acceptance_rate: B, source: ...}`")
        return None


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
    notes = {}
    dep = "{{ $labels.specops_deployment }}"
    src = f" ({t.source})" if t.source else ""
    if speculative and (why := t.missing()):
        notes["specops.io/acceptance-alert"] = f"not rendered: {why}"
    if speculative and t.break_even_acceptance_rate is not None:
        b = t.break_even_acceptance_rate
        rules.append({
            "alert": "SpecopsAcceptanceBelowBreakEven",
            "expr": f"({acceptance_expr(app, t.window)})\n  < {b}",
            "for": t.for_,
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": f"Acceptance rate of {dep} is {{{{ $value | humanizePercentage }}}}, below its break-even "
                           f"{b:.1%} (accepted/drafted)",
                "description": (f"Accepted/drafted tokens below {b:.3f} for {t.for_}: below that this deployment "
                                f"decodes slower than without speculation{src}. Run `specops runbook run "
                                f"spec-slower-than-baseline -d {dep}`; if it confirms, redeploy without speculation "
                                f"(`speculative.method: none`) while the draft is retrained (`specops heal -d {dep}`)."),
            },
        })
    warn = t.warn_rate() if speculative else None
    if warn is not None:
        e = t.expected_acceptance_rate
        expected = f" (expected {e:.3f}, break-even {t.break_even_acceptance_rate:.3f}{src})" if e is not None else ""
        rules.append({
            "alert": "SpecopsLowAcceptanceRate",
            "expr": f"({acceptance_expr(app, t.window)})\n  < {warn}",
            "for": t.for_,
            "labels": {"severity": t.severity},
            "annotations": {
                "summary": f"Acceptance rate of {dep} is {{{{ $value | humanizePercentage }}}} (accepted/drafted)",
                "description": (f"Accepted/drafted tokens below {warn:.3f} for {t.for_}{expected}: the draft may be "
                                f"stale for the target or the traffic. Run `specops runbook run acceptance-drop -d {dep}` "
                                "(its steps measure and name the cause) and consider a lower γ or a retrain."),
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
    meta = {"name": app, "namespace": namespace, "labels": dict(labels)}
    if notes:
        meta["annotations"] = notes
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": meta, "spec": {"groups": [{"name": f"specops.{app}", "rules": rules}]}}
