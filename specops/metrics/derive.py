"""Derived speculative-decoding quantities and snapshot deltas.

- acceptance rate r = accepted / draft_tokens (equals α only when K = 1);
- mean acceptance length τ = 1 + accepted / drafts (bonus token included). vLLM counts a step as a
  draft only when it drafted tokens, so τ is per *drafted* step: steps where nothing was drafted (an
  n-gram miss, K=0 in a per-batch schedule) are excluded, and a speedup or tokens-per-step computed
  from τ describes the drafted steps only;
- per-position rate p_i = accepted_per_pos[i] / drafts. vLLM exports no draft tokens per position, so
  when drafts are shorter than K (ngram, ngram_gpu, suffix, per-batch schedules) the later positions
  are divided by steps that never drafted them: the rates are lower bounds, and so is α solved at K.
  :func:`per_position_caveat` says so in the Measurement's notes;
- the i.i.d. per-token α equivalent: the α in [0, 1] with (1 − α^(K+1)) / (1 − α) = τ (bisection);
- TPOT quantiles from the ``vllm:request_time_per_output_token_seconds`` histogram, with the same
  linear interpolation as PromQL's ``histogram_quantile``.

A counter that goes down between two snapshots was reset (the engine restarted): the post-reset value
is used as the delta, ``counter_reset`` is set and the counter named. A window without drafts gives
``None`` rates and ``empty_window``: nothing is ever divided by zero or guessed.
"""

from __future__ import annotations

import math
from datetime import datetime

from specops.errors import MeasurementError
from specops.metrics.types import SPEC_COUNTERS, GroupValues, Measurement, Snapshot
from specops.speculation import Acceptance, alpha_from_tau


def histogram_quantile(q: float, buckets: dict[float, float]) -> float | None:
    """PromQL's histogram_quantile on cumulative bucket counts {le: count}; None without observations."""
    if not buckets:
        return None
    items = sorted(buckets.items())
    if not math.isinf(items[-1][0]):
        return None  # no +Inf bucket: not a valid histogram
    total = items[-1][1]
    if total <= 0:
        return None
    rank = q * total
    prev_le, prev_count = 0.0, 0.0
    for le, count in items:
        if count >= rank:
            if math.isinf(le):
                return prev_le  # PromQL returns the highest finite bound
            if count == prev_count:
                return le
            return prev_le + (le - prev_le) * (rank - prev_count) / (count - prev_count)
        prev_le, prev_count = le, count
    return prev_le


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den


def check_counters(m: Measurement) -> Measurement:
    """Refuse counters that cannot be real before anything is derived from them: every counter a
    finite number >= 0, accepted <= drafted tokens, drafts <= drafted tokens (<= K per draft), and no
    position accepted more often than there were drafts. Raises MeasurementError naming the counter."""
    where = f"{m.deployment} ({m.source}, window ending {m.window_end:%Y-%m-%d %H:%M:%S}"
    where += f", after a reset of {', '.join(m.reset_counters)})" if m.reset_counters else ")"
    fix = ("check what answers for the engine (its /metrics, or the Prometheus in between): these counters "
           "cannot come from a vLLM engine")
    values = [(c, getattr(m, c)) for c in (*SPEC_COUNTERS, "generation_tokens", "requests_finished")]
    values += [(f"accepted_per_pos[{i}]", v) for i, v in enumerate(m.accepted_per_position)]
    for name, v in values:
        if v is not None and not (math.isfinite(v) and v >= 0):
            raise MeasurementError(f"{where}: {name} is {v}; a counter is a finite number >= 0", fix)
    drafts, drafted, accepted = m.num_drafts, m.num_draft_tokens, m.num_accepted_tokens

    def above(a: float | None, b: float | None) -> bool:
        return a is not None and b is not None and a > b * (1 + 1e-6) + 1e-6

    if above(accepted, drafted):
        raise MeasurementError(f"{where}: {accepted:g} accepted tokens but only {drafted:g} drafted", fix)
    if above(drafts, drafted):
        raise MeasurementError(f"{where}: {drafts:g} drafts but only {drafted:g} drafted tokens", fix)
    k = m.num_speculative_tokens
    if k and drafts is not None and above(drafted, drafts * k):
        raise MeasurementError(f"{where}: {drafted:g} drafted tokens in {drafts:g} drafts of at most γ={k}", fix)
    for i, v in enumerate(m.accepted_per_position):
        if above(v, drafts):
            raise MeasurementError(f"{where}: position {i} accepted {v:g} times in {drafts:g} drafts", fix)
    return m


def per_position_caveat(drafts: float | None, draft_tokens: float | None, k: int | None,
                        method: str | None = None) -> str | None:
    """Why per-position rates (and α solved at K) are lower bounds here, or None: drafts shorter than
    K on average, or a method whose drafts vary in length (PROMPT_METHODS)."""
    from specops.speculation import PROMPT_METHODS

    mean = draft_tokens / drafts if drafts and draft_tokens is not None else None
    short = bool(k) and mean is not None and mean < k - 0.01
    if not short and method not in PROMPT_METHODS:
        return None
    why = (f"drafts averaged {mean:.2f} tokens of K={k}" if short else
           f"method {method} drafts from the prompt, so its drafts can be shorter than K")
    return (f"{why}: per-position rates divide by every drafted step (vLLM exports no draft tokens per "
            "position), so later positions are lower bounds; α solved at K is a lower bound too")


PREFIX_COUNTERS = ("prefix_cache_queries", "prefix_cache_hits", "external_prefix_cache_queries",
                   "external_prefix_cache_hits")


def prefix_rates(m: Measurement) -> None:
    """Prefix-cache hit rates of the window (vLLM counts tokens: hits / queries), None without queries."""
    def rate(hits: float | None, queries: float | None) -> float | None:
        return min(1.0, max(0.0, hits / queries)) if hits is not None and queries else None

    m.prefix_hit_rate = rate(m.prefix_cache_hits, m.prefix_cache_queries)
    m.external_prefix_hit_rate = rate(m.external_prefix_cache_hits, m.external_prefix_cache_queries)


def fill_rates(m: Measurement) -> Measurement:
    """Set acceptance rate, τ, α and per-position rates from the counters already in ``m`` (after
    :func:`check_counters`: impossible counters raise, they are never clamped into a rate)."""
    check_counters(m)
    prefix_rates(m)
    if not m.speculation:
        m.notes.append("the engine exports no vllm:spec_decode_* counters (speculation off, or stats disabled)")
        return m
    drafts = m.num_drafts or 0.0
    if drafts <= 0:
        m.empty_window = True
        m.notes.append("no drafts in the window (no traffic, or speculation off at this batch size): "
                       "acceptance is undefined, not zero")
        m.per_position_rate = [None for _ in m.accepted_per_position]
        return m
    acc = Acceptance(drafts, m.num_draft_tokens or 0.0, m.num_accepted_tokens or 0.0,
                     tuple(m.accepted_per_position))
    m.acceptance_rate = acc.rate
    m.mean_acceptance_length = acc.tau
    m.per_position_rate = acc.per_position or []
    k = m.num_speculative_tokens
    if k and (caveat := per_position_caveat(drafts, m.num_draft_tokens, k)):
        m.short_drafts = True
        m.notes.append(caveat)
    if k is None and m.num_draft_tokens:
        k = round(m.num_draft_tokens / drafts)
        m.num_speculative_tokens = k or None
    if m.num_speculative_tokens:
        m.per_token_alpha = alpha_from_tau(m.mean_acceptance_length, m.num_speculative_tokens)
    else:
        m.notes.append("K unknown (no per-position series): per-token α not computed")
    return m


def _delta(name: str, before: float | None, after: float | None, resets: list[str]) -> float | None:
    if after is None:
        return None
    if before is None:
        return after
    if after < before:
        resets.append(name)
        return after  # counted from zero after the restart
    return after - before


def delta(before: Snapshot, after: Snapshot, group: str) -> Measurement:
    """Measurement of ``group`` between two snapshots of the same endpoint."""
    if group not in after.groups:
        known = ", ".join(sorted(after.groups)) or "none"
        raise MeasurementError(f'no vLLM series for "{group}" at {after.source} (groups seen: {known})',
                               "pass the served model name or the specops_deployment label value")
    a = after.groups[group]
    b = before.groups.get(group) or GroupValues(group=group, group_label=a.group_label)
    resets: list[str] = []
    m = Measurement(deployment=group, group_label=a.group_label, source="metrics",
                    window_start=before.taken_at, window_end=after.taken_at, speculation=a.has_spec)
    for c in SPEC_COUNTERS:
        setattr(m, c, _delta(c, getattr(b, c), getattr(a, c), resets))
    if a.accepted_per_pos:
        k = max(a.accepted_per_pos) + 1
        m.num_speculative_tokens = k
        per_pos_resets: list[str] = []
        m.accepted_per_position = [
            _delta(f"accepted_per_pos[{i}]", b.accepted_per_pos.get(i), a.accepted_per_pos.get(i, 0.0),
                   per_pos_resets) or 0.0 for i in range(k)]
        resets += per_pos_resets
    m.generation_tokens = _delta("generation_tokens", b.generation_tokens, a.generation_tokens, resets)
    m.requests_finished = _delta("request_success", b.request_success, a.request_success, resets)
    for c in PREFIX_COUNTERS:
        setattr(m, c, _delta(c, getattr(b, c), getattr(a, c), resets))
    _tpot(m, b, a, resets)
    m.kv_cache_usage, m.requests_running, m.requests_waiting = a.kv_cache_usage, a.requests_running, a.requests_waiting
    m.notes += after.notes
    if resets:
        m.counter_reset = True
        m.reset_counters = sorted(set(resets))
        m.notes.append(f"counter reset in the window ({', '.join(m.reset_counters)}): the engine restarted; "
                       "post-restart values are used as the deltas")
    return fill_rates(m)


def _tpot(m: Measurement, b: GroupValues, a: GroupValues, resets: list[str]) -> None:
    if not a.tpot_buckets:
        return
    went_down = any(a.tpot_buckets.get(le, 0.0) < b.tpot_buckets.get(le, 0.0) for le in a.tpot_buckets)
    if went_down:
        resets.append("request_time_per_output_token_seconds")
        buckets = dict(a.tpot_buckets)
        count, total = a.tpot_count, a.tpot_sum
    else:
        buckets = {le: c - b.tpot_buckets.get(le, 0.0) for le, c in a.tpot_buckets.items()}
        count = None if a.tpot_count is None else a.tpot_count - (b.tpot_count or 0.0)
        total = None if a.tpot_sum is None else a.tpot_sum - (b.tpot_sum or 0.0)
    set_tpot(m, buckets, count, total)


def set_tpot(m: Measurement, buckets: dict[float, float], count: float | None, total: float | None) -> None:
    m.tpot_p50 = histogram_quantile(0.5, buckets)
    m.tpot_p90 = histogram_quantile(0.9, buckets)
    m.tpot_p99 = histogram_quantile(0.99, buckets)
    m.tpot_mean = _ratio(total, count)
    if m.tpot_p50 is None:
        m.notes.append("no finished requests with more than one output token in the window: TPOT undefined")


def all_deltas(before: Snapshot, after: Snapshot) -> dict[str, Measurement]:
    return {g: delta(before, after, g) for g in after.groups}


def pick_group(snapshot: Snapshot, wanted: str | None) -> str:
    """The group to report: ``wanted`` if given, else the only one; an error when ambiguous or absent."""
    if snapshot.vllm_series == 0:
        raise MeasurementError(f"{snapshot.source} exports no vllm:* metrics (engine started with "
                               "--disable-log-stats, or not a vLLM server)",
                               "start vLLM without --disable-log-stats and point at its /metrics")
    groups = sorted(snapshot.groups)
    if wanted:
        if wanted in snapshot.groups:
            return wanted
        from specops.errors import did_you_mean

        raise MeasurementError(f'{snapshot.source} has no series for "{wanted}".{did_you_mean(wanted, groups)} '
                               f"(groups: {', '.join(groups)})",
                               "pass --served-name with the model name the engine serves")
    if len(groups) == 1:
        return groups[0]
    raise MeasurementError(f"{snapshot.source} serves several models ({', '.join(groups)})",
                           "pick one with --served-name")


def require_speculation(m: Measurement, where: str) -> None:
    """Fail closed when a measurement that should hold spec-decode counters does not."""
    if not m.speculation:
        raise MeasurementError(f"{where} exports no vllm:spec_decode_* counters for \"{m.deployment}\" "
                               "(speculation is not configured, or the engine runs with --disable-log-stats)",
                               "enable speculation (--speculative-config) and stats on that engine, "
                               "or measure it as a baseline")


def utc(ts: float) -> datetime:
    from datetime import timezone

    return datetime.fromtimestamp(ts, tz=timezone.utc)
