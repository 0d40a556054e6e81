import subprocess
import sys
from pathlib import Path

import pytest

from specops.drift.runbooks import RunbookContext, list_runbooks, load_runbook, render_markdown, run_runbook
from specops.errors import ConfigFileError, MeasurementError, NotFoundError
from specops.models import Finding

REPO = Path(__file__).resolve().parents[2]
REQUIRED = {"acceptance-drop", "spec-slower-than-baseline", "kv-cache-pressure", "draft-target-mismatch",
            "high-batch-collapse", "long-context-degradation"}


class Steps:
    """Injected step implementations (the real ones need an engine and a registry)."""

    def __init__(self, mismatch=False, recovers=False, query_error=False):
        self.mismatch, self.recovers, self.query_error, self.ran = mismatch, recovers, query_error, []

    def query(self, deployment, name):
        self.ran.append(name)
        if self.query_error:
            raise MeasurementError("prometheus unreachable", "start it")
        return [Finding(code="QUERY_OK", severity="info", message=name)]

    def lineage_check(self, deployment):
        self.ran.append("lineage")
        return [Finding(code="LINEAGE_OK", severity="info", message="ok")]

    def fingerprint_check(self, deployment):
        self.ran.append("fingerprint")
        code = "FINGERPRINT_MISMATCH" if self.mismatch else "FINGERPRINT_OK"
        return [Finding(code=code, severity="error" if self.mismatch else "info", message=code)]

    def restart_probe(self, deployment):
        self.ran.append("restart")
        code = "RESTART_RECOVERED" if self.recovers else "RESTART_NO_CHANGE"
        return [Finding(code=code, severity="info", message=code)]


def test_every_required_runbook_exists_and_loads():
    assert REQUIRED <= set(list_runbooks())
    for name in list_runbooks():
        assert load_runbook(name).name == name


def test_a_changed_target_is_named_and_the_restart_is_skipped():
    steps = Steps(mismatch=True)
    r = run_runbook("acceptance-drop", "d", RunbookContext(steps, allow_restart=True))
    assert "restart" not in steps.ran
    assert r.steps[-1].status == "skipped" and "FINGERPRINT_MISMATCH" in r.steps[-1].detail
    assert "Retrain" in r.next_action.recommend and r.next_action.command.startswith("specops retrain")


def test_a_restart_probe_runs_only_where_allowed():
    steps = Steps(recovers=True)
    r = run_runbook("acceptance-drop", "d", RunbookContext(steps, allow_restart=False))
    assert "restart" not in steps.ran and r.steps[-1].detail.startswith("restart probes are not allowed")
    r = run_runbook("acceptance-drop", "d", RunbookContext(steps, allow_restart=True))
    assert "Engine-state decay" in r.next_action.recommend


def test_a_failing_step_is_reported_and_the_runbook_goes_on():
    r = run_runbook("draft-target-mismatch", "d", RunbookContext(Steps(query_error=True)))
    assert r.steps[-1].status == "error" and "To fix: start it" in r.steps[-1].detail
    assert r.steps[0].status == "ran"


def test_an_unknown_runbook_suggests_the_closest():
    with pytest.raises(NotFoundError, match='Did you mean "acceptance-drop"'):
        load_runbook("acceptance-drops")


@pytest.mark.parametrize("edit, match", [
    (("kind: fingerprint_check", "kind: fingerprint"), "steps.2.kind"),
    (("query: acceptance_by_label", "query: by_label"), 'needs query: one of'),
    (("if_any: [WORKLOAD_DRIFT]", "if_any: [WORKLOAD_DRIFTS]"), 'unknown finding code "WORKLOAD_DRIFTS"'),
    (("    explain: Restarts", "    explian: Restarts"), 'unknown key "steps.4.explian".*Did you mean "explain"'),
])
def test_a_malformed_runbook_is_one_line_with_file_line_and_fix(tmp_path, edit, match):
    text = (REPO / "playbooks" / "runbooks" / "acceptance-drop.yaml").read_text()
    assert edit[0] in text
    f = tmp_path / "bad.yaml"
    f.write_text(text.replace(edit[0], edit[1], 1))
    with pytest.raises(ConfigFileError, match=match) as exc:
        load_runbook(f)
    one = exc.value.one_line()
    assert "\n" not in one and f"{f}:" in one and "To fix:" in one
    assert int(one.split(":")[1]) > 1  # points at a line inside the file


def test_a_rendered_runbook_lists_steps_and_next_actions():
    md = render_markdown(load_runbook("kv-cache-pressure"))
    assert md.startswith("### kv-cache-pressure:") and "4. **Restart probe**" in md and "- otherwise:" in md


def test_docs_monitor_md_is_up_to_date_with_the_runbooks():
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "render_runbooks.py"), "--check"],
                       capture_output=True, text=True, cwd=str(REPO))
    assert r.returncode == 0, r.stderr
