"""Every fix message fits where the deployment runs, and following it works.

One table: each day-2 command (stop, restart, logs, promote, retrain, heal) on each kind of deployment -
a local process specops deployed, a Kubernetes deployment (and canary), an engine adopted with
`deployment register` - and an unknown name. The deployments are real rows in a real SQLite registry
(local and Kubernetes rows written as the deploy paths write them; the adopted one through the real
`deployment register` against a loopback HTTP peer that answers /v1/models and /metrics: the only fake,
standing in for a vLLM server). Where the fix is a specops command, the test runs it and checks it did
what it says; where it is a command of another tool (kubectl), the test checks it is that tool's and
names the deployment's namespace, since no cluster runs here.
"""

from __future__ import annotations

import json
import re
import shlex

import pytest

from tests.checks.helpers import exposition

MODELS = json.dumps({"data": [{"id": "tiny"}]})


def _fix(r) -> str:
    """The `To fix:` text of a one-line refusal (exit 2, no traceback)."""
    assert r.returncode == 2, (r.returncode, r.stdout[-400:], r.stderr[-400:])
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    assert "To fix:" in r.stderr, r.stderr
    return r.stderr.split("To fix:", 1)[1].strip()


def _commands(fix: str) -> list[list[str]]:
    """The `specops ...` commands quoted in backticks in a fix, as argv (without the program name)."""
    return [shlex.split(c)[1:] for c in re.findall(r"`(specops [^`]+)`", fix)]


@pytest.fixture
def fleet(cli, peer, specops_home, tiny_models, tmp_path):
    """local-tiny (local, stopped, target registered), kube-prod and kube-canary (Kubernetes, namespace
    serving), ext (adopted through the CLI, no target recorded); a prompts file for retrain/heal."""
    from specops.registry import open_registry

    engine = peer({"/metrics": (200, exposition(100, [72, 45, 26], 400)), "/v1/models": (200, MODELS),
                   "/health": (200, "")})
    with open_registry() as reg:
        reg.register_target(str(tiny_models["target-v1"]), name="tiny", version="v1")
        reg.register_draft(str(tiny_models["draft-v1"]), target="tiny@v1", name="tiny-draft", version="v1",
                           method="draft_model")
        reg.upsert_deployment("local-tiny", platform="local", status="stopped", target_ref="tiny@v1",
                              draft_ref="tiny-draft@v1", method="draft_model", num_speculative_tokens=3,
                              endpoint="http://127.0.0.1:9")
        reg.upsert_deployment("kube-prod", platform="kubernetes", status="running", target_ref="tiny@v1",
                              endpoint="http://kube-prod.serving.svc:8000", labels={"namespace": "serving"})
        reg.upsert_deployment("kube-canary", platform="kubernetes", status="running", target_ref="tiny@v1",
                              labels={"namespace": "serving", "canary_of": "kube-prod"})
    r = cli("deployment", "register", "ext", "--endpoint", engine.url, "--method", "draft_model")
    assert r.returncode == 0, r.stderr
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"def f{i}(x):\n    return"}) + "\n" for i in range(12)))
    return {"engine": engine, "prompts": str(prompts), "target": str(tiny_models["target-v1"]),
            "draft": str(tiny_models["draft-v1"])}


def _statuses(cli) -> dict[str, str]:
    r = cli("deployment", "list", "-o", "json")
    assert r.returncode == 0, r.stderr
    return {d["name"]: d["status"] for d in json.loads(r.stdout)}


# --- the table: (command, kind) -> what the fix must say, and how following it is checked -------------

def test_stop_and_restart_on_an_adopted_engine_say_do_it_where_it_runs_and_remove_takes_it_off_the_watch(cli, fleet):
    restart = _fix(cli("restart", "ext"))
    assert "where it runs" in restart and "specops deploy SPEC" not in restart
    fix = _fix(cli("stop", "ext"))
    assert "kubectl" not in fix and "rollback" not in fix and "where it runs" in fix
    (remove,) = _commands(fix)
    assert remove == ["deployment", "remove", "ext"]
    assert cli(*remove).returncode == 0
    assert _statuses(cli).get("ext", "gone") in ("gone", "stopped")  # off the watch (history kept)


@pytest.mark.parametrize("command", ["stop", "restart"])
def test_stop_and_restart_on_kubernetes_name_kubectl_in_its_namespace_or_the_canary_rollback(cli, fleet, command):
    fix = _fix(cli(command, "kube-prod"))
    verb = "rollout restart" if command == "restart" else "scale"
    assert f"kubectl {verb} deployment/kube-prod -n serving" in fix, fix
    canary = _fix(cli(command, "kube-canary"))
    assert _commands(canary)[0] == ["rollback", "kube-canary"], canary


def test_logs_of_an_unknown_name_says_unknown_deployment_and_the_listing_it_suggests_works(cli, fleet):
    r = cli("logs", "nope")
    fix = _fix(r)
    assert 'unknown deployment "nope"' in r.stderr and "has no engine log" not in r.stderr, r.stderr
    (listing,) = _commands(fix)
    assert listing == ["deployment", "list"]
    out = cli(*listing, env={"COLUMNS": "200"})
    assert out.returncode == 0 and "local-tiny" in out.stdout and "ext" in out.stdout


def test_logs_fit_the_kind_adopted_kubernetes_and_a_local_deployment_without_a_log(cli, fleet):
    adopted = _fix(cli("logs", "ext"))
    assert "where the engine" in adopted and fleet["engine"].url.split("//")[1] in adopted
    assert "kubectl logs deployment/kube-prod -n serving" in _fix(cli("logs", "kube-prod"))
    local = _fix(cli("logs", "local-tiny"))
    assert _commands(local) == [["deploy", "SPEC"]], local  # no saved spec here: deploy it again


def test_promote_on_a_local_deployment_points_to_heal_and_its_dry_run_works(cli, fleet):
    r = cli("promote", "local-tiny")
    fix = _fix(r)
    assert "credentials" not in r.stderr and "local process" in r.stderr
    (heal,) = _commands(fix)
    assert heal[:3] == ["heal", "--deployment", "local-tiny"]
    follow = cli(*[fleet["prompts"] if a == "FILE" else a for a in heal], "--dry-run")
    assert follow.returncode == 0, follow.stderr
    assert "dry run: heal of local-tiny" in follow.stdout and "tiny@v1" in follow.stdout
    # the control row: a Kubernetes canary goes to the cluster (here: no credentials), not to these fixes
    r = cli("promote", "kube-canary", env={"KUBECONFIG": "/nonexistent/kubeconfig"})
    assert r.returncode == 2 and "local process" not in r.stderr and "adopted" not in r.stderr, r.stderr


def test_promote_and_rollback_on_an_adopted_engine_point_to_register_and_it_works(cli, fleet):
    for command in ("promote", "rollback"):
        r = cli(command, "ext")
        fix = _fix(r)
        assert "credentials" not in r.stderr and "adopted" in r.stderr
    (register,) = _commands(fix)
    assert register[:3] == ["deployment", "register", "ext"]
    argv = [fleet["engine"].url if a == "URL" else "tiny-draft@v1" if a == "NAME@VERSION" else a for a in register]
    assert cli(*argv).returncode == 0
    shown = json.loads(cli("deployment", "show", "ext", "-o", "json").stdout)
    assert shown["draft_ref"] == "tiny-draft@v1"


def test_retrain_on_an_adopted_engine_without_a_target_points_to_register_target_and_draft_and_it_works(cli, fleet):
    r = cli("retrain", "--deployment", "ext", "--data", fleet["prompts"], "--dry-run")
    fix = _fix(r)
    assert "deploy it from a spec" not in fix and "--target NAME@VERSION --draft NAME@VERSION" in fix, fix
    register_target, register = _commands(fix)
    assert register_target == ["lineage", "register-target", "PATH"]
    # the target is already registered in this registry (tiny@v1); registering the folder again is a no-op
    assert cli("lineage", "register-target", fleet["target"], "--name", "tiny").returncode == 0
    argv = [a for a in register]
    argv[argv.index("--target") + 1] = "tiny@v1"
    argv[argv.index("--draft") + 1] = "tiny-draft@v1"
    assert cli(*argv).returncode == 0
    follow = cli("retrain", "--deployment", "ext", "--data", fleet["prompts"], "--dry-run")
    assert follow.returncode == 0, follow.stderr
    assert "retraining of ext against tiny@v1" in follow.stdout


def test_heal_on_an_adopted_engine_points_to_retrain_not_kubernetes(cli, fleet):
    fix = _fix(cli("heal", "--deployment", "ext", "--data", fleet["prompts"], "--dry-run"))
    assert "Kubernetes" not in fix and "canary-of" not in fix
    (retrain,) = _commands(fix)
    assert retrain[:3] == ["retrain", "--deployment", "ext"]
    # the control row: a stopped local deployment stops fine (nothing to do), no refusal
    r = cli("stop", "local-tiny")
    assert r.returncode == 0 and "local-tiny: not running" in r.stdout, r.stderr
