import http.server
import json
import threading

import pytest

from specops.drift.outcomes import Fatal, Retry
from specops.drift.policy import ActionRunner, MemoryEvents, NotifyOnlyExecutor, Policy, load_policy
from specops.errors import ConfigFileError, NotFoundError
from specops.models import Finding

GOOD = """name: p
allow_restart_probe: true
rules:
  - name: r
    when: [ENGINE_STATE_SUSPECTED]
    actions:
      - kind: restart_probe
"""


def _finding(code="ENGINE_STATE_SUSPECTED", since=100.0, severity="warning"):
    return Finding(code=code, severity=severity, message="m", evidence={"since": since})


class Recorder(NotifyOnlyExecutor):
    def __init__(self, fail=None):
        self.calls, self.fail = [], fail

    def restart_probe(self, deployment, reason):
        if self.fail:
            raise self.fail.pop(0)
        self.calls.append(deployment)

    def notify(self, deployment, finding, webhook_url):
        self.calls.append(("notify", webhook_url))


def test_the_default_policy_loads():
    p = load_policy("default")
    assert p.gamma.mode == "propose" and p.rules


def test_an_unknown_policy_name_says_which_exist():
    with pytest.raises(NotFoundError, match='unknown policy "defualt".*Did you mean "default"'):
        load_policy("defualt")


@pytest.mark.parametrize("text, line, match", [
    (GOOD.replace("    when:", "    min_severty: info\n    when:"), 5,
     'unknown key "rules.0.min_severty".*Did you mean "min_severity"'),
    (GOOD.replace("ENGINE_STATE_SUSPECTED", "ENGINE_STATE_SUSPECT"), 4, 'unknown finding code "ENGINE_STATE_SUSPECT"'),
    (GOOD.replace("allow_restart_probe: true", "allow_restart_probe: false"), 1, "allow_restart_probe is false"),
    (GOOD.replace("kind: restart_probe", "kind: reboot"), 7, "rules.0.actions.0.kind"),
    (GOOD + "  - [broken\n", 9, "invalid YAML"),
])
def test_a_malformed_policy_is_one_line_with_file_line_and_fix(tmp_path, text, line, match):
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(ConfigFileError, match=match) as exc:
        load_policy(f)
    one = exc.value.one_line()
    assert "\n" not in one and f"{f}:{line}:" in one and "To fix:" in one


def test_actions_are_idempotent_within_an_episode_and_cooldown():
    pol = Policy.model_validate({**_yaml(GOOD)})
    ex = Recorder()
    runner = ActionRunner(pol, ex, restart_allowed={"d": True})
    for t in range(0, 600, 60):
        runner.apply(float(t), "d", [_finding()])
    assert ex.calls == ["d"]
    runner.apply(30000.0, "d", [_finding(since=29000.0)])  # a new episode after the cooldown
    assert ex.calls == ["d", "d"]


def test_dry_run_records_but_does_nothing():
    pol = Policy.model_validate({**_yaml(GOOD), "dry_run": True})
    ex, events = Recorder(), MemoryEvents()
    recs = ActionRunner(pol, ex, events, restart_allowed={"d": True}).apply(0.0, "d", [_finding()])
    assert ex.calls == [] and [r.outcome for r in recs] == ["dry-run"]
    assert events.events[0]["kind"] == "monitor.restart_probe" and events.events[0]["reason"] == "m"


def test_a_restart_is_refused_where_the_deployment_does_not_allow_it():
    ex = Recorder()
    recs = ActionRunner(Policy.model_validate(_yaml(GOOD)), ex).apply(0.0, "d", [_finding()])
    assert ex.calls == [] and recs[0].outcome == "refused"


def test_a_transient_action_failure_is_retried_after_its_delay():
    ex = Recorder(fail=[Retry(120, "engine busy")])
    runner = ActionRunner(Policy.model_validate(_yaml(GOOD)), ex, restart_allowed={"d": True})
    assert runner.apply(0.0, "d", [_finding()])[0].outcome == "retry"
    assert runner.apply(60.0, "d", [_finding()]) == []
    assert runner.apply(120.0, "d", [_finding()])[0].outcome == "done"
    assert ex.calls == ["d"]


def test_a_fatal_action_failure_is_recorded_and_not_repeated():
    ex = Recorder(fail=[Fatal("no restart wired")])
    runner = ActionRunner(Policy.model_validate(_yaml(GOOD)), ex, restart_allowed={"d": True})
    assert runner.apply(0.0, "d", [_finding()])[0].detail == "no restart wired"
    assert runner.apply(60.0, "d", [_finding()]) == []


def test_notify_posts_to_the_webhook_named_by_an_environment_variable():
    received = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *a):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        pol = Policy.model_validate({"name": "n", "rules": [{"name": "r", "when": ["CHANGED_MODEL"], "actions": [
            {"kind": "notify", "webhook_url_env": "HOOK"}]}]})
        env = {"HOOK": f"http://127.0.0.1:{server.server_port}/hook"}
        recs = ActionRunner(pol, NotifyOnlyExecutor(), env=env).apply(
            0.0, "d", [_finding("CHANGED_MODEL", severity="error")])
    finally:
        server.shutdown()
    assert recs[0].outcome == "done"
    assert received[0]["deployment"] == "d" and received[0]["code"] == "CHANGED_MODEL"


def _yaml(text):
    import yaml

    return yaml.safe_load(text)
