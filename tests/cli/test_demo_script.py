"""scripts/demo.py without starting an engine (issue 41): the one line that says why the demo pins a plan
predicted slower, and its steps' progress shown before their results."""

import importlib.util
import stat
import sys

from tests.conftest import REPO


def _demo():
    spec = importlib.util.spec_from_file_location("demo", REPO / "scripts" / "demo.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _plan(**kw) -> dict:
    """What `recommend -o json` prints for the demo's flags, made in this process (the same library call)."""
    from specops.api.recommend import build_request, recommend_with_defaults
    from specops.cli.output import to_jsonable

    return to_jsonable(recommend_with_defaults(build_request(**kw)))


def test_the_demo_says_in_one_line_why_it_pins_a_plan_predicted_slower():
    demo = _demo()
    common = dict(model=str(demo.MODELS / "target-v1"), gpu="cpu", task="code", vllm_version="0.32.0",
                  context_len=256, output_len=128)
    best = _plan(**common)
    pinned = _plan(**common, draft=str(demo.MODELS / "draft-v1"), method="draft_model", num_speculative_tokens=3)
    note = demo.pin_note(pinned, best)
    if pinned["predicted"]["speedup"] >= 1:
        assert note is None
        return
    assert note is not None and "\n" not in note
    assert f"{pinned['predicted']['speedup']:.2f}x" in note and "pins draft_model" in note
    assert f"unpinned it picks {best['method']}" in note
    won = {**pinned, "predicted": {**pinned["predicted"], "speedup": 1.3}}
    assert demo.pin_note(won, best) is None  # a plan that wins needs no excuse


def test_a_steps_progress_is_printed_before_its_result(tmp_path, capsys):
    """`specops` is replaced by a script (a fake: no engine can start here) that writes progress to stderr,
    then its result to stdout, as `specops deploy` does."""
    demo = _demo()
    fake = tmp_path / "specops"
    fake.write_text(f"#!{sys.executable}\nimport sys, time\nsys.stderr.write('  … starting\\n'); sys.stderr.flush()\n"
                    "time.sleep(0.2)\nprint('deployed')\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    demo.BIN = tmp_path
    r = demo.run("deploy", "x.yaml")
    out = capsys.readouterr().out
    assert r.returncode == 0 and out.index("… starting") < out.index("deployed")
