"""`specops canary watch`: a Kubernetes canary's windows through the sequential test, then promote or roll back.

A canary deployed with ``specops deploy SPEC --platform kubernetes --canary-of STABLE`` shares the
stable's Service, so both arms serve the same live traffic mix at the same time. Every window
(``canary.window_s`` of the canary's spec, or ``--window-s``) both arms' ``vllm:spec_decode_*``
accepted and drafted token counters are read from Prometheus for the *same* interval (one instant
query per counter, ``increase(...[W])`` at the window's end, the two arms told apart by the
``specops_deployment`` label the PodMonitor copies from each pod's ``specops.io/deployment``, and
``namespace``). One sample is the canary's acceptance rate minus the stable's
(:func:`specops.heal.traffic.window_samples`); a window where an arm drafted nothing (or Prometheus did
not answer) is no sample but still spends a window of the budget.

The test (:mod:`specops.heal.sequential`) looks after every window: ``better`` promotes the canary
(:func:`specops.k8s.deploy.promote`: its pod spec becomes the stable's, then it is deleted), ``worse``
rolls it back (:func:`specops.k8s.deploy.rollback`: the canary Deployment is deleted, the stable
serves everything), the budget spent without a decision is "could not evaluate; not promoted" and the
canary is rolled back too. The test is one ``canary_test`` row (traffic ``live-share``, every window's
counts), and ``heal.promoted`` / ``heal.rollback`` on the stable name it (``data.canary_test``).
Interrupted (SIGINT/SIGTERM/SIGHUP), the windows so far are recorded as a no-decision test and the
canary is left as it is.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

from pydantic import Field

from specops.errors import InputError, MeasurementError
from specops.heal.sequential import SequentialTest, Verdict
from specops.models import Strict

TRAFFIC_LIVE = "live-share"
METRIC_WINDOWS = "acceptance-rate difference (accepted/drafted tokens) per window, canary - stable"
"""What one sample is (the registry keeps at most 100 characters)."""
MIN_WINDOW_S = 2
COUNTERS = {"accepted": "spec_decode_num_accepted_tokens_total", "drafted": "spec_decode_num_draft_tokens_total"}


class KubeCanaryOutcome(Strict):
    """What one `specops canary watch` did."""

    canary: str = Field(description="The canary Deployment.")
    stable: str = Field(description="The stable it shares the Service with.")
    namespace: str = Field(description="Namespace.")
    status: str = Field(description="promoted or rolled-back.")
    verdict: Verdict = Field(description="The sequential test's verdict.")
    canary_test_id: int = Field(description="Registry row of the test (table canary_test).")
    window_s: int = Field(description="Seconds per window.")
    windows: int = Field(description="Windows read (samples plus windows with no sample).")
    empty_windows: int = Field(description="Windows that gave no sample (an arm drafted nothing, or no answer).")
    lines: list[str] = Field(default_factory=list, description="What promote or rollback did.")
    reason: str = Field(description="Why it ended this way, in one line.")


def window_query(counter: str, namespace: str, arms: tuple[str, str], window_s: int) -> str:
    """PromQL: one counter's increase over the window for both arms, one series per arm."""
    name = '__name__=~"vllm[:_]' + COUNTERS[counter] + '"'  # colon and underscore forms (client_python#1177)
    sel = f'{{{name}, namespace="{namespace}", specops_deployment=~"{arms[0]}|{arms[1]}"}}'
    return f"sum by (specops_deployment) (increase({sel}[{window_s}s]))"


def read_window(reader, namespace: str, stable: str, canary: str, window_s: int,
                end: datetime) -> dict[str, tuple[float, float] | None]:
    """Each arm's (accepted, drafted) tokens over the ``window_s`` seconds before ``end`` (None: no series)."""
    got: dict[str, dict[str, float]] = {stable: {}, canary: {}}
    for counter in COUNTERS:
        for row in reader.query(window_query(counter, namespace, (stable, canary), window_s), at=end):
            arm = (row.get("metric") or {}).get("specops_deployment")
            if arm in got:
                try:
                    got[arm][counter] = float(row["value"][1])
                except (KeyError, IndexError, TypeError, ValueError):
                    raise MeasurementError(f"Prometheus answered a malformed sample for {arm} ({str(row)[:120]})",
                                           "check what Prometheus scrapes for the canary's pods") from None
    return {arm: (v["accepted"], v["drafted"]) if len(v) == 2 else None for arm, v in got.items()}


def watch_params(block, *, window_s: int | None, alpha: float | None, min_gain: float | None,
                budget: int | None) -> tuple[SequentialTest, int]:
    """The test and the window from the spec's ``canary:`` block, each overridden by its option."""
    from pydantic import ValidationError

    window = window_s if window_s is not None else block.window_s
    if window < MIN_WINDOW_S:
        raise InputError(f"--window-s {window} is shorter than {MIN_WINDOW_S} s",
                         f"give --window-s {MIN_WINDOW_S} or more, at least two of Prometheus' scrape intervals "
                         "(or leave it out: the spec's canary.window_s, default 300)")
    try:
        test = SequentialTest(alpha=block.alpha if alpha is None else alpha,
                              min_gain=block.min_gain if min_gain is None else min_gain,
                              budget=block.budget if budget is None else budget)
    except ValidationError as exc:
        e = exc.errors()[0]
        raise InputError(f"canary test: {'.'.join(str(x) for x in e['loc'])}: {e['msg']} (got {e.get('input')!r})",
                         "use --alpha in (0, 0.5], --min-gain in [0, 1) and --budget of 2 or more") from None
    return test, window


def _block(canary: str):
    """The canary's ``canary:`` block from its saved spec (the defaults when it has none)."""
    from specops.engines.layout import DeploymentFolder
    from specops.engines.spec import CanaryBlock, load_spec

    path = DeploymentFolder.of(canary).spec
    spec = load_spec(path) if path.is_file() else None
    return (spec.canary if spec is not None and spec.canary is not None else CanaryBlock()), spec


def watch_canary(canary: str, *, registry, namespace: str | None = None, prometheus_url: str | None = None,
                 window_s: int | None = None, alpha: float | None = None, min_gain: float | None = None,
                 budget: int | None = None, api_client=None, timeout_s: float = 600, poll_s: float = 1.0,
                 progress=None) -> KubeCanaryOutcome:
    """Run the canary's windows through the sequential test and promote or roll back (module docstring)."""
    from specops.k8s.cluster import Cluster
    from specops.k8s.deploy import _canary, _namespace
    from specops.metrics.prometheus import PrometheusReader

    say = progress or (lambda _m: None)
    reg = registry
    block, _ = _block(canary)
    test, window = watch_params(block, window_s=window_s, alpha=alpha, min_gain=min_gain, budget=budget)
    ns = _namespace(canary, namespace, reg)
    _, stable = _canary(Cluster(api_client), canary, ns)  # refuses a stable or a missing Deployment
    if reg.find_deployment(stable) is None:
        raise InputError(f"the stable {stable} of canary {canary} is not in the registry",
                         "deploy it with `specops deploy STABLE.yaml --platform kubernetes` (or use the registry "
                         "it was deployed with: --db)")
    reader = PrometheusReader.from_settings(prometheus_url)
    reader.ping()
    crow, srow = reg.find_deployment(canary), reg.get_deployment(stable)
    candidate = (crow.draft_ref if crow is not None else None) or canary
    say(f"canary test: {canary} vs {stable} (namespace {ns}), windows of {window}s, at most {test.budget} "
        f"(alpha {test.alpha:g}, margin {test.min_gain:g}); traffic: {TRAFFIC_LIVE}")
    from specops.heal.sequential import Sequential
    from specops.retrain.lease import signals_as_exceptions

    started = datetime.now(timezone.utc)
    seq, samples, interrupted = Sequential(test), [], None
    with signals_as_exceptions():  # SIGTERM/SIGINT/SIGHUP: the windows so far are recorded, nothing is changed
        try:
            empty = _windows(reader, ns, stable, canary, window, seq, samples, say)
        except KeyboardInterrupt as exc:
            interrupted, empty = exc, sum(s["d"] is None for s in samples)
    seq.close()
    verdict = seq.verdict()
    row = reg.record_canary_test(stable, candidate=candidate, incumbent=srow.draft_ref, target=srow.target_ref,
                                 canary=canary, traffic=TRAFFIC_LIVE, metric=METRIC_WINDOWS,
                                 verdict=verdict.model_dump(mode="json"), data=samples,
                                 started_at=started)
    line = f"canary test {row.id}: {verdict.line()}; traffic: {TRAFFIC_LIVE} ({window}s windows, both arms)"
    if interrupted is not None:
        say(f"interrupted after {len(samples)} windows: recorded as {line}; {canary} was left as it is (not "
            f"promoted): run `specops canary watch {canary}` again, or `specops rollback {canary}`")
        raise interrupted
    say(line)
    data = {"canary": canary, "namespace": ns, "canary_test": row.id, "verdict": verdict.line()}
    if verdict.decision == "better":
        from specops.k8s.deploy import promote

        lines = promote(canary, namespace=ns, api_client=api_client, registry=reg, timeout_s=timeout_s,
                        poll_s=poll_s, progress=progress)
        reg.record_event("heal.promoted", stable, f"{stable}: {srow.draft_ref} -> {candidate} (canary {canary} "
                         "promoted on live traffic)", reason=line, data={**data, "from": srow.draft_ref,
                                                                         "to": candidate})
        status = "promoted"
    else:
        from specops.k8s.deploy import rollback

        lines = rollback(canary, namespace=ns, api_client=api_client, registry=reg, progress=progress)
        reg.record_event("heal.rollback", stable, f"{stable} keeps {srow.draft_ref} (canary {canary} rolled back)",
                         reason=line, data={**data, "draft": srow.draft_ref})
        status = "rolled-back"
    return KubeCanaryOutcome(canary=canary, stable=stable, namespace=ns, status=status, verdict=verdict,
                             canary_test_id=row.id, window_s=window, windows=len(samples), empty_windows=empty,
                             lines=lines, reason=line)


def _windows(reader, ns: str, stable: str, canary: str, window: int, seq, samples: list[dict], say) -> int:
    """Read windows into ``seq`` and ``samples`` until the test stops or its budget of windows is spent;
    returns the windows that gave no sample."""
    from specops.heal.traffic import window_samples

    test = seq.p
    empty = 0
    settle = min(2.0, window / 2)  # the scrape at the window's end must be stored before the query
    t0 = time.time()
    for i in range(test.budget):
        end_ts = t0 + (i + 1) * window
        time.sleep(max(0.0, end_ts + settle - time.time()))
        end = datetime.fromtimestamp(end_ts, timezone.utc)
        start = datetime.fromtimestamp(end_ts - window, timezone.utc)
        try:
            counts = read_window(reader, ns, stable, canary, window, end)
            note = None
        except MeasurementError as exc:  # one window lost; the test does not guess it
            counts, note = {stable: None, canary: None}, f"Prometheus: {exc.message}"[:300]
        s, c = counts[stable], counts[canary]
        d = window_samples([s], [c])[0] if s is not None and c is not None else None
        if d is None and note is None:
            missing = [arm for arm, v in ((stable, s), (canary, c)) if v is None or v[1] <= 0]
            note = f"no drafted tokens from {', '.join(missing)} in this window"
        samples.append({"i": i, "start": start.isoformat(), "end": end.isoformat(),
                        "incumbent": list(s) if s else None, "candidate": list(c) if c else None,
                        "d": None if d is None else round(d, 6), "from": "prometheus",
                        **({"note": note} if note else {})})
        if d is None:
            empty += 1
            say(f"window {i + 1}/{test.budget}: no sample ({note})")
            continue
        decided = seq.add(d)
        say(f"window {i + 1}/{test.budget}: stable {s[0] / s[1]:.3f} ({s[1]:.0f} drafted), canary "
            f"{c[0] / c[1]:.3f} ({c[1]:.0f} drafted), d {d:+.3f}; {seq.verdict(with_power=False).line()}")
        if decided:
            break
    return empty
