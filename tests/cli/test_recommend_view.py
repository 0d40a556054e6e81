"""What `recommend` prints (issue 41): a short default view (the pick, its numbers, why, the launch), the whole
path with --explain, readable at 80 columns and narrower without a terminal, vetoes named, and warnings
once, on one line, with their fix, for the chosen plan only."""

import json

LLAMA = ("--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "A100-80GB")


def plan_json(**kw) -> dict:
    """The plan `recommend -o json` prints, made in this process (the same library call)."""
    from specops.api.recommend import build_request, recommend_with_defaults
    from specops.cli.output import to_jsonable

    return to_jsonable(recommend_with_defaults(build_request(model=LLAMA[1], gpu=LLAMA[3], **kw)))


def test_the_default_view_is_short_and_names_the_veto_and_explain_shows_every_rule(cli):
    plan = plan_json()
    veto = next(s for s in plan["decision_path"] if s["rule"] == "evidence")["outcome"]  # keep or veto, and why
    out = cli("recommend", *LLAMA, env={"COLUMNS": "80"}).stdout  # no TTY, 80 columns
    lines = out.splitlines()
    assert len(lines) <= 36, out  # pick, numbers, acceptance, why, memory, top-3 alternatives, warnings, launch
    assert all(len(line) <= 80 for line in lines if not line.startswith("launch: ")), out
    assert lines[1].startswith("pick: ") and "why: " in out
    flat = " ".join(out.split())
    assert " ".join(veto.split()) in flat  # the veto: which candidate, its range, the rule
    assert "decision path:" not in out and "add --explain" in out
    full = cli("recommend", *LLAMA, "--explain", env={"COLUMNS": "80"}).stdout
    assert "decision path:" in full
    assert all(f"- {s['rule']} (" in full for s in plan["decision_path"])
    spec = cli("recommend", *LLAMA, "-o", "deployment").stdout
    assert "# why: " + " ".join(veto.split()) in spec  # and the spec kept in git says so


def test_a_narrow_console_drops_columns_never_numbers(cli):
    plan = plan_json(batch_size=8)
    out = cli("recommend", *LLAMA, "--batch-size", "8", env={"COLUMNS": "60"}).stdout
    table = [line for line in out.splitlines() if line.startswith("│")]
    assert all(len(line) <= 60 for line in table)
    for a in plan["alternatives"][:3]:
        assert any(f"{a['speedup']:.2f}" in row and f"{a['tpot_ms']:.1f}" in row for row in table), a
    assert "tok/s left out at this width" in out


def test_warnings_are_the_picks_only_each_once_on_one_line_with_the_fix(cli):
    at8 = json.loads(cli("recommend", *LLAMA, "--batch-size", "8", "-o", "json").stdout)  # as the CLI prints them
    bug = [w for w in at8["warnings"] if "vllm#41838" in w]
    assert len(bug) == 1 and "\n" not in bug[0] and "To fix: periodic restart" in bug[0] and len(bug[0]) < 260
    at256 = plan_json(batch_size=256)
    pick = at256["method"]  # a candidate's extrapolation warning stays only when that candidate is the pick
    assert not any(w.startswith("no published row is near ") and not w.startswith(f"no published row is near {pick} ")
                   for w in at256["warnings"]), at256["warnings"]
    assert all("\n" not in w for w in at8["warnings"] + at256["warnings"])
