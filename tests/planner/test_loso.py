"""The leave-one-source-out harness never scores a row with a model that saw its source."""

from __future__ import annotations

from dataclasses import dataclass

from specops.planner.loso import by_stratum, leave_one_source_out, summary_line


@dataclass(frozen=True)
class Row:
    source: str
    x: float
    y: float


ROWS = [Row("a", 1, 2.0), Row("a", 2, 4.0), Row("b", 1, 3.0), Row("c", 1, 0.0)]


def test_each_source_is_predicted_by_a_model_fitted_without_it():
    seen = []

    def fit(train):
        seen.append({r.source for r in train})
        return sum(r.y / r.x for r in train if r.y) / max(1, sum(1 for r in train if r.y))

    scored = leave_one_source_out(ROWS, fit=fit, predict=lambda m, r: m * r.x, published=lambda r: r.y)
    # source c has no published value: not scored, and no model fitted for it
    assert [s.source for s in scored] == ["a", "a", "b"]
    assert seen == [{"b", "c"}, {"a", "c"}]
    # source a is predicted from b alone (slope 3): 3 and 6 against 2 and 4
    assert scored[0].predicted == 3.0 and scored[1].predicted == 6.0


def test_rows_without_evidence_are_not_counted_as_hits():
    scored = leave_one_source_out(ROWS, fit=lambda t: None, predict=lambda m, r: None if r.source == "b" else r.y,
                                  published=lambda r: r.y)
    line = summary_line("acceptance", scored)
    assert line.startswith("acceptance LOSO: median |ln| 0.000 over 2 rows")
    assert "1 without evidence" in line
    assert list(by_stratum(scored, key=lambda s: s.source)) == ["a", "b"]
