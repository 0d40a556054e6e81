"""The leave-one-source-out harness: one row schema and one loop for every cross-validated model.

Acceptance (τ), step cost (baseline TPOT) and speedup models are each judged the same way: for every
source in the data, fit on the rows of all *other* sources, predict that source's rows, and score
``|ln(predicted / published)|``. A model is never judged on rows it was fitted on.

Usage::

    scored = leave_one_source_out(rows, fit=my_fit, predict=my_predict, published=lambda r: r.tau)
    print(summary_line("acceptance", scored))          # acceptance LOSO: median |ln| 0.123 over 150 rows
    for label, line in by_stratum(scored, key=lambda s: s.row.method): ...

``fit(train_rows)`` returns any model object; ``predict(model, row)`` returns a float, or None when
the model has no evidence near the row (it is then counted as *not predicted*, never as a hit).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

R = TypeVar("R")


@dataclass(frozen=True)
class Scored(Generic[R]):
    """One held-out row: what was published, what the model fitted without its source predicted."""

    row: R
    source: str
    published: float
    predicted: float | None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def log_error(self) -> float | None:
        """ln(published / predicted): positive when the model underpredicts; None when not predicted."""
        if self.predicted is None or self.predicted <= 0 or self.published <= 0:
            return None
        return math.log(self.published / self.predicted)


def leave_one_source_out(rows: Sequence[R], *, fit: Callable[[list[R]], Any],
                         predict: Callable[[Any, R], float | None],
                         published: Callable[[R], float | None],
                         source: Callable[[R], str] = lambda r: r.source,  # type: ignore[attr-defined]
                         extra: Callable[[Any, R], dict[str, Any]] | None = None) -> list[Scored[R]]:
    """Score every row with a published value by a model fitted on the other sources' rows only.

    The model is fitted once per source (rows of one sweep share a source, so a sweep is held out
    whole). ``extra(model, row)`` may attach more per-row figures (a range, P(gain)) to the result.
    """
    sources: dict[str, list[R]] = {}
    for r in rows:
        sources.setdefault(source(r), []).append(r)
    out: list[Scored[R]] = []
    for src, held in sources.items():
        scorable = [r for r in held if (published(r) or 0) > 0]
        if not scorable:
            continue
        model = fit([r for r in rows if source(r) != src])
        for r in scorable:
            p = predict(model, r)
            out.append(Scored(r, src, float(published(r)), None if p is None else float(p),
                              extra(model, r) if extra else {}))
    return out


def errors(scored: Iterable[Scored]) -> list[float]:
    """|ln| errors of the rows that were predicted."""
    return [abs(e) for s in scored if (e := s.log_error) is not None]


def summary_line(label: str, scored: Sequence[Scored], *, measure: str = "|ln|") -> str:
    """``<label> LOSO: median |ln| X over N rows`` (+ how many rows had no prediction); ``measure`` names
    the error (``|ln τ|`` for acceptance lengths)."""
    errs = errors(scored)
    missing = len(scored) - len(errs)
    med = statistics.median(errs) if errs else float("nan")
    tail = f" ({missing} without evidence near them, not predicted)" if missing else ""
    return f"{label} LOSO: median {measure} {med:.3f} over {len(errs)} rows{tail}"


def by_stratum(scored: Sequence[Scored], key: Callable[[Scored], Hashable]) -> dict[Hashable, list[Scored]]:
    """Group held-out rows by a stratum (method, task class, engine class, batch range...)."""
    out: dict[Hashable, list[Scored]] = {}
    for s in scored:
        out.setdefault(key(s), []).append(s)
    return dict(sorted(out.items(), key=lambda kv: str(kv[0])))
