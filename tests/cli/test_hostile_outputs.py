"""Issue 39, outputs: every file a command writes is checked before any work (absent or a regular
file; never a FIFO or a device, which would hang the command or swallow the output); a default
output name the user did not type is never written through a symbolic link; a failed write leaves
no half-stored state (tune --html stores no calibration when its report cannot be written). A
playbook override that is a FIFO is refused instead of read forever. Real FIFOs, links, SQLite and
the CLI in this process (each run bounded by a thread join, so a regression fails instead of hanging)."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest

from tests.cli.inproc import run_main

REPO = Path(__file__).resolve().parents[2]


def _within(seconds: float, *args: str) -> tuple[int, str, str]:
    box: dict = {}
    t = threading.Thread(target=lambda: box.update(r=run_main(*args)), daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"specops {' '.join(args)} still running after {seconds}s (blocked on the output?)"
    return box["r"]


def _adopt(name: str = "web") -> None:
    code, _, err = run_main("deployment", "register", name, "--endpoint", "http://127.0.0.1:9", "--method", "ngram",
                            "--no-check")
    assert code == 0, err


def _spec(tmp_path: Path) -> Path:
    p = tmp_path / "prod.yaml"
    p.write_text("name: prod\ntarget: {model: meta-llama/Llama-3.1-8B-Instruct}\n"
                 "speculative: {method: ngram, num_speculative_tokens: 3, prompt_lookup_max: 4}\n")
    return p


def _commands(tmp_path: Path, out: str) -> dict[str, tuple[str, ...]]:
    return {
        "report --out": ("report", "-d", "web", "--out", out),
        "lineage export --file": ("lineage", "export", "--file", out),
        "bench --save": ("bench", "--endpoint", "http://127.0.0.1:9", "--requests", "1", "--save", out),
        "validate --junit": ("validate", "-c", "deploy", "-d", "web", "--junit", out),
        "gate --junit": ("gate", "--spec", str(_spec(tmp_path)), "--junit", out),
        "tune --html": ("tune", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--methods", "ngram", "--gammas", "2",
                        "--html", out),
    }


@pytest.mark.parametrize("which", ["report --out", "lineage export --file", "bench --save", "validate --junit",
                                   "gate --junit", "tune --html"])
def test_a_fifo_or_device_as_an_output_is_refused_before_any_work(tmp_path, specops_home, which):
    _adopt()
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    for out, word in ((fifo, "FIFO"), (Path("/dev/null"), "character device")):  # a device swallows the output
        code, stdout, err = _within(20, *_commands(tmp_path, str(out))[which])
        assert code == 2, (code, err)
        assert word in err and "To fix:" in err, err
    with __import__("sqlite3").connect(specops_home / "specops.db") as con:
        assert con.execute("SELECT count(*) FROM validation_run").fetchone()[0] == 0  # refused before the run
        assert con.execute("SELECT count(*) FROM tune_run").fetchone()[0] == 0


def test_a_link_planted_at_the_default_report_name_is_refused_and_its_target_untouched(tmp_path, monkeypatch):
    _adopt()
    monkeypatch.chdir(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / "web-report.html").symlink_to(victim)
    code, _, err = run_main("report", "-d", "web")
    assert code == 2 and "symbolic link" in err, err
    assert victim.read_text() == "keep me"
    code, out, err = run_main("report", "-d", "web", "--out", str(tmp_path / "web-report.html"))  # typed: allowed
    assert code == 0, err
    assert (tmp_path / "web-report.html").is_symlink() and "<html" in victim.read_text().lower()


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path):
    from specops.errors import InputError
    from specops.outputs import write_text

    (tmp_path / "out").mkdir()
    target = tmp_path / "out" / "r.json"
    target.write_text("old")

    with pytest.raises(InputError):
        write_text(target, "\udcff", "--save")  # cannot be encoded: the write fails halfway
    assert target.read_text() == "old" and sorted(p.name for p in target.parent.iterdir()) == ["r.json"]


def test_tune_html_that_cannot_be_written_stores_no_calibration(tmp_path, monkeypatch):
    import specops.tune.html as tune_html
    from specops.api.tune import TuneOptions, tune
    from specops.registry import open_registry
    from tests.tune.fakes import FakeDeployer, FakeMeasurer

    first = tune(TuneOptions(model="meta-llama/Llama-3.1-8B-Instruct", methods=["ngram"], gammas=[1, 2],
                             concurrency=[1], passes=1, name="cal"), deployer=FakeDeployer(),
                 measurer=FakeMeasurer(noise=0.0))
    folder = tmp_path / "reports"
    folder.mkdir()
    render = tune_html.render_tune_html

    def render_then_lose_the_folder(*a, **kw):
        html = render(*a, **kw)
        shutil.rmtree(folder)
        folder.write_text("a file where the folder was")  # the write now fails
        return html

    monkeypatch.setattr(tune_html, "render_tune_html", render_then_lose_the_folder)
    code, _, err = run_main("tune", "--resume", first.run_id, "--refit", "--html", str(folder / "t.html"))
    assert code == 2 and "--html" in err and "reports" in err, err
    assert [c.revision for c in open_registry().calibrations()] == [1]  # the refit's revision 2 is gone
    code, out, _ = run_main("tune", "--list", "-o", "json")
    assert code == 0 and "cal@2" not in out


def test_a_fifo_as_a_catalog_override_is_refused_not_read_forever(tmp_path, monkeypatch):
    books = tmp_path / "playbooks"
    shutil.copytree(REPO / "playbooks", books)
    (books / "catalogs" / "gpus.yaml").unlink()
    os.mkfifo(books / "catalogs" / "gpus.yaml")
    monkeypatch.setenv("SPECOPS_PLAYBOOKS", str(books))
    code, _, err = _within(20, "recommend", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100")
    assert code == 2 and "gpus.yaml" in err and "not a regular file" in err, err


def test_outputs_still_write_ordinary_files(tmp_path):
    _adopt()
    out = tmp_path / "sub" / "j.xml"
    code, _, err = run_main("validate", "-c", "deploy", "-d", "web", "--junit", str(out))
    assert code in (1, 2) and out.read_text().startswith("<?xml"), err
    code, _, err = run_main("lineage", "export", "--file", str(tmp_path / "e.json"))
    assert code == 0 and json.loads((tmp_path / "e.json").read_text())["format"] == "specops-registry", err


# --- hypothesis: whatever sits at an output path, the write is refused or complete -----------------

def test_no_kind_of_file_at_an_output_path_blocks_or_half_writes(tmp_path):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from specops.errors import InputError
    from specops.outputs import write_text

    kinds = ["absent", "file", "dir", "fifo", "link-to-fifo", "link-to-file", "dangling-link", "link-to-dir",
             "in-a-file", "device"]

    @settings(max_examples=40, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(st.sampled_from(kinds), st.booleans(), st.text(max_size=50))
    def run(kind, default, text):
        box = tmp_path / f"case-{kind}-{default}"
        shutil.rmtree(box, ignore_errors=True)
        box.mkdir()
        victim = box / "victim"
        victim.write_text("old")
        target = box / "out"
        if kind == "file":
            target.write_text("old")
        elif kind == "dir":
            target.mkdir()
        elif kind == "fifo":
            os.mkfifo(target)
        elif kind == "link-to-fifo":
            os.mkfifo(box / "f")
            target.symlink_to(box / "f")
        elif kind == "link-to-file":
            target.symlink_to(victim)
        elif kind == "dangling-link":
            target.symlink_to(box / "nowhere")
        elif kind == "link-to-dir":
            target.symlink_to(box)
        elif kind == "in-a-file":
            target = victim / "out"
        elif kind == "device":
            target = Path("/dev/null")
        done = threading.Event()
        outcome: dict = {}

        def write():
            try:
                outcome["path"] = write_text(target, text, "--out", default=default)
            except InputError as exc:
                outcome["error"] = exc
            done.set()

        threading.Thread(target=write, daemon=True).start()
        assert done.wait(10), f"{kind}: the write blocked"
        if "error" in outcome:
            assert "--out" in outcome["error"].one_line()
            assert victim.read_text() == "old" or kind == "in-a-file"
        else:
            written = target.resolve()
            assert written.is_file() and written.read_bytes().decode() == text, kind
            assert not (default and target.is_symlink()), "a default name was written through a link"
            if kind == "link-to-file":
                assert victim.read_bytes().decode() == text  # a typed link is written at its target
        assert not list(box.glob(".*.tmp")), "a temporary file was left behind"

    run()
