"""Every fix message fits where the deployment runs, and following it works.

One table: each day-2 command (stop, restart, logs, promote, rollback, retrain, heal) on each kind of
deployment - a local process specops deployed, a Kubernetes deployment and canary, an engine adopted with
`deployment register` - and an unknown name. The deployments are real rows in a real SQLite registry
(local and Kubernetes rows written as the deploy paths write them; the adopted one through the real
`deployment register` against a loopback HTTP peer that answers /v1/models and /metrics: the only fake,
standing in for a vLLM server). Where the fix is a specops command, the test runs it (placeholders
filled in) and checks it did what it says; where it is another tool's (kubectl), the test checks it is
that tool's and names the deployment's namespace, since no cluster runs here.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field

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


def _fill(argv: list[str], values: dict[str, str]) -> list[str]:
    """A fix's command with its placeholders (FILE, URL, NAME@VERSION, ...) replaced as a user would."""
    out, flag = [], None
    for a in argv:
        out.append(values.get(f"{flag} {a}", values.get(a, a)))
        flag = a
    return out


@pytest.fixture
def fleet(cli, peer, specops_home, tiny_models, tmp_path):
    """local-tiny (local, stopped, target and draft registered), kube-prod and kube-canary (Kubernetes,
    namespace serving), ext (adopted through the CLI, no target recorded); a prompts file."""
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
    prompts.write_text("".join(json.dumps({"prompt": f"def f{i}(x):\n    return"}) + "\n" for i in range(30)))  # heal holds out 24 (issue 45)
    return {"url": engine.url, "prompts": str(prompts), "target": str(tiny_models["target-v1"]),
            "values": {"FILE": str(prompts), "URL": engine.url, "PATH": str(tiny_models["target-v1"]),
                       "--target NAME@VERSION": "tiny@v1", "--draft NAME@VERSION": "tiny-draft@v1"}}


def _deployment(cli, name: str) -> dict:
    r = cli("deployment", "show", name, "-o", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


# --- what following each fix must achieve ---------------------------------------------------------------

def _removed(cli, fleet, r):  # `deployment remove ext`: off the watch (history kept)
    assert r.returncode == 0, r.stderr
    assert _deployment(cli, "ext")["status"] == "stopped"


def _listed(cli, fleet, r):  # `deployment list`: the names to choose from
    assert r.returncode == 0 and "local-tiny" in r.stdout and "ext" in r.stdout, r.stdout


def _heal_planned(cli, fleet, r):  # `heal --deployment local-tiny --data FILE --dry-run`
    assert r.returncode == 0, r.stderr
    assert "dry run: heal of local-tiny" in r.stdout and "tiny@v1" in r.stdout


def _draft_recorded(cli, fleet, r):  # `deployment register ext --endpoint URL --draft NAME@VERSION`
    assert r.returncode == 0, r.stderr
    assert _deployment(cli, "ext")["draft_ref"] == "tiny-draft@v1"


def _target_registered(cli, fleet, r):  # `lineage register-target PATH` (already known: the same version)
    assert r.returncode == 0, r.stderr


def _retrain_runs(cli, fleet, r):  # after `deployment register ext ... --target --draft`: retrain plans
    assert r.returncode == 0, r.stderr
    assert _deployment(cli, "ext")["target_ref"] == "tiny@v1"
    plan = cli("retrain", "--deployment", "ext", "--data", fleet["prompts"], "--dry-run")
    assert plan.returncode == 0 and "retraining of ext against tiny@v1" in plan.stdout, plan.stderr


def _retrain_planned(cli, fleet, r):  # `retrain --deployment ext --data FILE` (dry run)
    assert r.returncode == 0 and "retraining of ext against tiny@v1" in r.stdout, r.stderr


@dataclass
class Row:
    """One (command, kind) cell: what the refusal must say, what it must not, and how each specops
    command in its fix is followed (``extra`` args appended, e.g. --dry-run) and checked."""

    argv: tuple[str, ...]
    says: tuple[str, ...]
    never: tuple[str, ...] = ()
    follow: list[tuple[tuple[str, ...], object]] = field(default_factory=list)
    env: dict | None = None

    @property
    def id(self) -> str:
        return " ".join(a for a in self.argv if not a.startswith("/"))[:60]


# order matters only where a follow changes the fleet: `deployment remove ext` and the re-registrations
# of ext come last
TABLE = [
    # logs
    Row(("logs", "nope"), ('unknown deployment "nope"', "`specops deployment list`"), ("has no engine log",),
        [((), _listed)]),
    Row(("logs", "ext"), ("was adopted", "where the engine at http://127.0.0.1:"), ("specops deploy SPEC",)),
    Row(("logs", "kube-prod"), ("`kubectl logs deployment/kube-prod -n serving`",)),
    Row(("logs", "local-tiny"), ("has no engine log (stopped)", "`specops deploy SPEC`")),
    # stop / restart
    Row(("stop", "kube-prod"), ("`kubectl scale deployment/kube-prod -n serving --replicas=0`",), ("adopted",)),
    Row(("restart", "kube-prod"), ("`kubectl rollout restart deployment/kube-prod -n serving`",)),
    Row(("stop", "kube-canary"), ("canary of kube-prod", "`specops rollback kube-canary`"), ("kubectl",)),
    Row(("restart", "ext"), ("was adopted", "restart it where it runs"), ("kubectl", "specops deploy SPEC")),
    # promote / rollback
    Row(("promote", "local-tiny"), ("a local process, not a Kubernetes canary",), ("credentials",),
        [(("--dry-run",), _heal_planned)]),
    Row(("rollback", "local-tiny"), ("a local process",), ("credentials",), [(("--dry-run",), _heal_planned)]),
    Row(("promote", "kube-canary"), (), ("local process", "adopted"), env={"KUBECONFIG": "/nonexistent/kubeconfig"}),
    # heal / retrain
    Row(("heal", "--deployment", "kube-prod", "--data", "FILE", "--dry-run"),
        ("runs on kubernetes", "--platform kubernetes --canary-of kube-prod"), ("adopted",)),
    Row(("promote", "ext"), ("an adopted engine", "--draft NAME@VERSION"), ("credentials",),
        [((), _draft_recorded)]),
    Row(("retrain", "--deployment", "ext", "--data", "FILE", "--dry-run"),
        ("(adopted) records no target", "--target NAME@VERSION --draft NAME@VERSION"), ("deploy it from a spec",),
        [((), _target_registered), ((), _retrain_runs)]),
    Row(("heal", "--deployment", "ext", "--data", "FILE", "--dry-run"), ("was adopted",), ("Kubernetes", "canary-of"),
        [(("--dry-run",), _retrain_planned)]),  # after the retrain row: ext has a target to retrain against
    Row(("stop", "ext"), ("was adopted", "stop it where it runs"), ("kubectl", "rollback"), [((), _removed)]),
]


def test_every_fix_fits_the_deployment_and_following_it_works(cli, fleet):
    """The table above, in order, on one fleet; each failure names its row."""
    for row in TABLE:
        argv = [fleet["prompts"] if a == "FILE" else a for a in row.argv]
        r = cli(*argv, env=row.env)
        if not row.says:  # a Kubernetes canary: the cluster is asked (here: no credentials), not these fixes
            assert r.returncode == 2 and not any(w in r.stderr for w in row.never), (row.id, r.stderr)
            continue
        fix = _fix(r)
        for words in row.says:
            assert words in r.stderr, (row.id, words, r.stderr)
        for words in row.never:
            assert words not in r.stderr, (row.id, words, r.stderr)
        commands = _commands(fix)
        assert len(commands) >= len(row.follow), (row.id, fix)
        for i, (extra, check) in enumerate(row.follow):
            follow = _fill(commands[i], fleet["values"]) + [a for a in extra if a not in commands[i]]
            check(cli, fleet, cli(*follow, env={"COLUMNS": "200"}))


def test_the_local_control_row_stops_without_a_refusal(cli, fleet):
    r = cli("stop", "local-tiny")
    assert r.returncode == 0 and "local-tiny: not running" in r.stdout, r.stderr
