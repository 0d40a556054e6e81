"""The human rendering of a Plan and of a sweep (rich); JSON/YAML come from the same models.

Readable at 80 columns and without a terminal: long text wraps at word boundaries, tables keep every
number whole (numeric columns never wrap) and drop optional columns, named below the table, when the
console is too narrow for them.
"""

from __future__ import annotations

DECIDING = ("cost_model", "evidence")
"""Decision-path rules whose outcome says why the pick won (the default view shows these; --explain all)."""


def _what(method: str, gamma, kv: str | None = None, draft: str | None = None) -> str:
    text = "no speculation" if method == "none" else f"{method} γ={gamma or '-'}"
    if kv:
        text += f", KV {kv}"
    if draft:
        text += f", draft {draft}"
    return text


def _line(out, text: str, indent: int = 0, hang: int = 2, prefix: str = "") -> None:
    """One paragraph (after ``prefix``) wrapped at the console's width, continuation lines indented by ``hang``
    more; a word longer than a line (an id, a path) is split across lines, never cut. No markup."""
    import textwrap

    lines = textwrap.wrap(" ".join(text.split()), width=max(20, out.width), initial_indent=" " * indent + prefix,
                          subsequent_indent=" " * (indent + hang), break_on_hyphens=False) or [""]
    for line in lines:
        out.print(line, soft_wrap=True, markup=False, highlight=False)


def _fit_table(out, title: str | None, columns: list[tuple[str, str, bool]], rows: list[list[str]]):
    """A rich table of ``columns`` (header, justify "left"/"right", optional) that fits the console: optional
    columns are dropped from the right until it does; numbers never wrap. Returns (table, dropped headers)."""
    from rich.table import Table

    keep = list(range(len(columns)))

    def width(idx: list[int]) -> int:
        cells = [max([len(columns[i][0])] + [len(r[i]) for r in rows]) for i in idx]
        return sum(cells) + 3 * len(idx) + 1

    dropped = []
    for i in reversed(range(len(columns))):
        if width(keep) <= out.width:
            break
        if columns[i][2]:
            keep.remove(i)
            dropped.insert(0, columns[i][0])
    table = Table(title=title, title_justify="left")
    for i in keep:
        head, justify, _ = columns[i]
        numeric = justify == "right"
        table.add_column(head, justify=justify, no_wrap=numeric, overflow="fold")
    for r in rows:
        table.add_row(*[r[i] for i in keep])
    return table, dropped


def _rng(lo, hi) -> str:
    return f"{lo:.2f}-{hi:.2f}" if lo is not None and hi is not None else "-"


def print_plan(plan, explain: bool = False) -> None:
    """``plan``: a specops.planner.types.Plan. Default: the pick, its numbers, why, the warnings and the launch;
    ``explain``: also every rule of the decision path, every alternative, the evidence and what was learned."""
    import shlex

    from specops.cli.output import console

    out = console()
    p, m = plan.predicted, plan.memory
    _line(out, f"{plan.model} on {plan.gpus}× {plan.gpu}")
    _line(out, "pick: " + _what(plan.method, plan.num_speculative_tokens, plan.kv_cache_dtype, plan.draft))
    if plan.num_speculative_tokens_per_batch_size:
        _line(out, "per-batch γ: " + ", ".join(f"{a}-{b}: {k}" for a, b, k in plan.num_speculative_tokens_per_batch_size),
              2)
    rng = f" (range {p.speedup_low:.2f}-{p.speedup_high:.2f}x)" if p.speedup_low is not None else ""
    gain = getattr(p, "p_gain", None)
    _line(out, f"predicted: {p.speedup:.2f}x{rng}" + (f", P(gain) {gain:.0%}" if gain is not None else "")
          + f", TPOT {p.tpot_ms:.1f} ms (baseline {p.baseline_tpot_ms:.1f}), {p.throughput_tok_s:.0f} tok/s, "
          f"TTFT {p.ttft_ms:.0f} ms at batch {p.effective_batch}")
    if plan.method != "none":
        acc = getattr(p, "acceptance", None)
        src = p.acceptance_prior_source if explain or acc is None else (
            f"acceptance model: {len(acc.cell_rows)} {plan.method} × {acc.task_class} rows from {acc.cell_sources} "
            f"sources, {acc.method_rows} {plan.method} rows in all; --explain names them")
        _line(out, f"acceptance: τ {p.mean_acceptance_length:.2f}, accepted/drafted {p.acceptance_rate:.2f} ({src})")
    if explain:
        _line(out, ("range: " if p.speedup_low is not None else "evidence: ") + p.evidence)
        for note in plan.learned_from:
            _line(out, f"learned from {note}")
    deciding = [s for s in plan.decision_path if explain or s.rule in DECIDING]
    if explain:
        _line(out, "decision path:")
        for s in deciding:
            _line(out, f"- {s.rule} ({s.input}): {s.outcome}", 2)
    else:
        for i, s in enumerate(deciding):
            _line(out, s.outcome, hang=5, prefix="why: " if i == 0 else "     ")
    if plan.load is not None:
        ld = plan.load
        lat = f"{ld.latency_s:.2f} s" if ld.latency_s is not None else "unbounded"
        _line(out, f"load: {ld.qps:g} req/s -> {ld.concurrency} in flight (latency {lat}; "
              f"{'converged' if ld.converged else 'NOT converged'} in {ld.iterations} steps): {ld.note}")
    _line(out, f"memory: {m.total_gib:.1f} of {m.available_gib:.1f} GiB (weights {m.weights_gib:.1f}, draft "
          f"{m.draft_gib:.2f}, KV {m.kv_cache_gib:.1f}); {'fits' if m.fits else 'does NOT fit'}, at most "
          f"{m.max_batch_that_fits} requests at once")
    alts = plan.alternatives if explain else plan.alternatives[:3]
    if alts:
        rows = [[a.method, str(a.num_speculative_tokens or "-"), f"{a.speedup:.2f}", _rng(a.speedup_low, a.speedup_high),
                 f"{a.tpot_ms:.1f}", a.kv_cache_dtype, f"{a.throughput_tok_s:.0f}"] for a in alts]
        cols = [("method", "left", False), ("γ", "right", False), ("speedup", "right", False),
                ("range", "right", False), ("TPOT ms", "right", False), ("KV", "left", True), ("tok/s", "right", True)]
        more = len(plan.alternatives) - len(alts)
        table, dropped = _fit_table(out, "alternatives" + (f" (top {len(alts)}; --explain shows {more} more)"
                                                           if more else ""), cols, rows)
        out.print(table)
        if dropped:
            _line(out, f"({', '.join(dropped)} left out at this width; -o json has them)")
    for w in plan.warnings:
        _line(out, "warning: " + w)
    if plan.vllm.setup:
        _line(out, f"{plan.vllm.nodes} nodes: {plan.vllm.setup}")
    if plan.vllm.withheld:  # an artifact the configuration needs is missing: what, and how to supply it
        for w in plan.vllm.withheld:
            _line(out, "launch: withheld: " + w.line())
    else:
        out.print("launch: " + shlex.join(plan.vllm.argv), soft_wrap=True, markup=False, highlight=False)  # [ngram]
    if not explain:
        _line(out, f"(the whole decision path, {len(plan.decision_path)} rules: add --explain)")


def print_sweep(sweep, plot: str | None = None) -> None:
    """``sweep``: a specops.api.sweep.Sweep - one row per value: the pick, γ, speedup with its range, TPOT, fits."""
    from specops.cli.output import console

    out = console()
    head = f"{sweep.model} on {sweep.gpus}× {sweep.gpu}" if sweep.model else "recommend"
    _line(out, f"{head}: {sweep.flag} swept over {len(sweep.points)} values")
    rows, refused = [], []
    for pt in sweep.points:
        value = f"{pt.value:g}"
        if pt.error is not None:
            rows.append([value, "refused", "-", "-", "-", "-", "-", "-", "-"])
            refused.append(f"{sweep.variable}={value}: {pt.error}")
            continue
        rows.append([value, pt.method, str(pt.num_speculative_tokens or "-"), f"{pt.speedup:.2f}",
                     _rng(pt.speedup_low, pt.speedup_high), f"{pt.tpot_ms:.1f}",
                     "yes" if pt.fits else f"no ({pt.effective_batch})",
                     f"{pt.p_gain:.0%}" if pt.p_gain is not None else "-"])
    cols = [(sweep.variable, "right", False), ("method", "left", False), ("γ", "right", False),
            ("speedup", "right", False), ("range", "right", False), ("TPOT ms", "right", False),
            ("fits", "left", False), ("P(gain)", "right", True)]
    if all(pt.p_gain is None for pt in sweep.points):
        cols, rows = cols[:7], [r[:7] for r in rows]
    table, dropped = _fit_table(out, None, cols, rows)
    out.print(table)
    if dropped:
        _line(out, f"({', '.join(dropped)} left out at this width; -o json has them)")
    for pt in sweep.points:  # where no speculation is picked: what was not, and its numbers
        if pt.error is None and pt.best_speculative:
            _line(out, f"{sweep.variable} {pt.value:g}: no speculation picked over {pt.best_speculative}")
    for r in refused:
        _line(out, "refused " + r)
    where: dict[str, list[str]] = {}  # each warning once, with the values whose plan it concerns
    for pt in sweep.points:
        for w in (pt.plan or {}).get("warnings", []):
            where.setdefault(w, []).append(f"{pt.value:g}")
    for w, at in where.items():
        _line(out, f"warning ({sweep.variable} {', '.join(at)}): {w}")
    if plot:
        _line(out, f"plot: {plot}")
