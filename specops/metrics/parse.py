"""Parse Prometheus text exposition from a vLLM ``/metrics`` endpoint into a :class:`Snapshot`.

Uses ``prometheus_client.parser.text_string_to_metric_families``. vLLM exports colon names
(``vllm:spec_decode_num_drafts_total``); an exporter scraped through OpenMetrics may show them with
underscores (``vllm_spec_decode_...``), so both spellings are read. Samples are summed over the
``engine`` label within a group (``specops_deployment`` where present, else ``model_name``).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

from specops.errors import MeasurementError
from specops.metrics.types import GroupValues, Snapshot

# sample name (after the vllm: prefix) -> GroupValues field, for plain summed counters/gauges
_SUMMED = {
    "spec_decode_num_drafts_total": "num_drafts",
    "spec_decode_num_draft_tokens_total": "num_draft_tokens",
    "spec_decode_num_accepted_tokens_total": "num_accepted_tokens",
    "generation_tokens_total": "generation_tokens",
    "request_success_total": "request_success",
    "request_time_per_output_token_seconds_count": "tpot_count",
    "request_time_per_output_token_seconds_sum": "tpot_sum",
    "num_requests_running": "requests_running",
    "num_requests_waiting": "requests_waiting",
    "prefix_cache_queries_total": "prefix_cache_queries",
    "prefix_cache_hits_total": "prefix_cache_hits",
    "external_prefix_cache_queries_total": "external_prefix_cache_queries",
    "external_prefix_cache_hits_total": "external_prefix_cache_hits",
}
PER_POS = "spec_decode_num_accepted_tokens_per_pos_total"
TPOT_BUCKET = "request_time_per_output_token_seconds_bucket"
KV_USAGE = "kv_cache_usage_perc"
MAX_POSITIONS = 64  # vLLM drafts at most a few dozen tokens per step; beyond this a position label is not real


def _short_name(name: str) -> str | None:
    for prefix in ("vllm:", "vllm_"):
        if name.startswith(prefix):
            return name[len(prefix):]
    return None


def group_of(labels: dict[str, str]) -> tuple[str, str]:
    """(group, label) for a sample: specops_deployment wins over model_name."""
    if labels.get("specops_deployment"):
        return labels["specops_deployment"], "specops_deployment"
    return labels.get("model_name", ""), "model_name"


def parse_metrics_text(text: str, source: str = "", taken_at: datetime | None = None) -> Snapshot:
    """Parse one scrape. Raises MeasurementError on text that is not Prometheus exposition."""
    from prometheus_client.parser import text_string_to_metric_families

    taken_at = taken_at or datetime.now(timezone.utc)
    groups: dict[str, GroupValues] = {}
    count = 0
    process_start = None
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        raise MeasurementError(f"{source or 'the metrics text'} is not Prometheus text format ({first[:120]})",
                               "point --endpoint at a vLLM server (its /metrics page)") from None
    notes: list[str] = []
    incomplete: set[str] = set()
    for family in families:
        for sample in family.samples:
            if sample.name == "process_start_time_seconds" and process_start is None:
                try:
                    process_start = datetime.fromtimestamp(float(sample.value), tz=timezone.utc)
                except (OverflowError, OSError, ValueError):
                    _note(notes, f"process_start_time_seconds {sample.value} is not a time: ignored")
            short = _short_name(sample.name)
            if short is None or sample.name.endswith("_created"):
                continue
            value = float(sample.value)
            if math.isnan(value):
                continue
            count += 1
            group, label = group_of(sample.labels)
            if not group:  # engine-wide info series (cache_config_info, ...) belong to no model
                continue
            g = groups.get(group)
            if g is None:
                g = groups[group] = GroupValues(group=group, group_label=label)
            if not _add(g, short, sample.labels, value, notes):
                incomplete.add(group)
    for group, g in groups.items():  # a per-position series left out, or a gap: the rest says nothing of γ
        if g.accepted_per_pos and (group in incomplete or len(g.accepted_per_pos) != max(g.accepted_per_pos) + 1):
            g.accepted_per_pos = {}
            _note(notes, f"{group}: the per-position acceptance series are incomplete (a position label that is "
                         "not a draft position, or a gap): per-position acceptance and γ are not read from them")
    return Snapshot(source=source, taken_at=taken_at, groups=groups, vllm_series=count,
                    process_start=process_start, notes=notes)


def _note(notes: list[str], text: str) -> None:
    if text not in notes and len(notes) < 20:
        notes.append(text)


def position(text: str) -> int | None:
    """A per-position label as a draft position 0..MAX_POSITIONS-1, else None (not a real position)."""
    try:
        pos = int(text)
    except (TypeError, ValueError):
        return None
    return pos if 0 <= pos < MAX_POSITIONS else None


def _add(g: GroupValues, short: str, labels: dict[str, str], value: float, notes: list[str]) -> bool:
    """Add one sample to its group; False when it was a per-position sample whose position label is not
    a number (that series may be a real position: the group's per-position data is then incomplete)."""
    field = _SUMMED.get(short)
    if field is not None:
        setattr(g, field, (getattr(g, field) or 0.0) + value)
    elif short == PER_POS and "position" in labels:
        pos = position(labels["position"])
        if pos is None:
            _note(notes, f'position="{labels["position"][:20]}" is not a draft position (0-{MAX_POSITIONS - 1}): ignored')
            try:  # a number out of range is no real position; a label that is no number may hide one
                int(labels["position"])
            except (TypeError, ValueError):
                return False
            return True
        g.accepted_per_pos[pos] = g.accepted_per_pos.get(pos, 0.0) + value
    elif short == TPOT_BUCKET and "le" in labels:
        try:
            le = float(labels["le"])  # "+Inf" parses to inf
        except ValueError:
            _note(notes, f'le="{labels["le"][:20]}" is not a bucket bound: ignored')
            return True
        g.tpot_buckets[le] = g.tpot_buckets.get(le, 0.0) + value
    elif short == KV_USAGE:
        g.kv_cache_usage = value if g.kv_cache_usage is None else max(g.kv_cache_usage, value)
    return True


