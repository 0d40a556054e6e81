"""Issue 35 item 5 (and issue 27): the monitor's actions fired by a REAL acceptance drop on one real
CPU engine (tiny models, direct /metrics, the real registry, ``EngineExecutor`` as `specops monitor`
wires it through ``drift.service.Watcher``), decided by the real policy rules
(playbooks/policies/default.yaml), the real γ predictor (``api.monitor.gamma_predictor`` with the
cpu-tiny profile, as `specops monitor --profile cpu-tiny` builds it) and the profile's real floors and
break-even. Nothing is forced: no floor is set by hand and no predictor is made free.

One deployment ``act`` (eight engine starts; marker ``long``, `make test-long`):

0. deploy target-v1 with ``tiny-draft@0``, an untrained draft (random weights, seed 0; start 1). heal's
   canary with ``tiny-draft@1`` = ``draft-live``, a copy of the trained draft-v1, wins on the two engines'
   own counters (canary start 2); heal's default hand-over ``promote_local(handover="restart")`` restarts
   ``act`` on its port with it (start 3): same URL, new process, its argv naming draft-live, acceptance up
   on the next traffic. A canary with the untrained draft then loses (canary start 4) and
   ``rollback_local`` stops it: the incumbent serves on in the same process, the registry holds a
   ``heal.rollback`` event and a failed ``heal/canary`` validation run. (These are heal's own functions,
   the steps ``specops heal`` runs after retraining; tests/heal/ covers the retraining.)
1. ``act`` now serves the trained copy; healthy windows, the baseline is recorded from them;
2. the real predictor, on the tiny pair's measured per-position acceptance and the profile's draft
   cost, proposes another γ than 3 (a shorter one on this pair); the rule applies it: ``retune_gamma`` (start 5);
3. behind the monitor's back ``draft-live``'s weights are replaced by an untrained draft of the same
   architecture (random weights, seed 0; what scripts/record_traces.py's draft-swap scenario did) and
   `specops restart act` restarts the engine with the same argv (start 6), which loads them;
4. the collapse detector flags ``ACCEPTANCE_COLLAPSE`` within two windows with
   ``stale_draft_weights`` suspected; the policy's collapse rule runs ``restart_probe`` (start 7),
   which cannot bring acceptance back (the weights on disk are the bad ones);
5. acceptance stays below the profile's break-even: ``BELOW_BREAK_EVEN`` -> ``disable_speculation``
   (start 8).

Test settings, not decisions: the policy's windows are shortened for a test (floor_windows 4,
min_drafts 30, γ evaluated every window with min_gain 0 and confirmed twice), and the deployment
allows restart probes (its ``restart_allowed`` label).

One run (2026-12-03, 2 shared cores under load): 502 s, not counting the wait for the engine lock;
the predictor proposed γ 3 -> 1 (α 0.52, conditional acceptance 0.72, 0.15; predicted speedup
1.21 -> 1.44), the collapse was flagged on the second window after the restart (τ − 1 = 0.000 against
0.938, stale_draft_weights suspected), the probe ran in that cycle, and BELOW_BREAK_EVEN (α 0.10 <
0.20 at γ 1) switched speculation off two windows later.

``SPECOPS_TEST_ACTIONS_NO_SWAP=1`` skips the weight swap (step 3 restarts the same trained draft):
then step 4's collapse, and every action after it, must not happen, and the test fails there.

``SPECOPS_TEST_ACTIONS_NO_ROLLBACK=1`` leaves out step 0's ``rollback_local``: the test must fail there
(it did, 2026-12-03: the canary still ``running`` at the rollback assertion).

With step 0 (2026-12-03, the box shared with other engineers' engine and planner tests): 1243 s; the
canary of the trained draft measured acceptance 0.313 against the untrained incumbent's 0.000 and was
promoted, the restarted engine then measured 0.313 on the next traffic; the untrained canary (0.000 vs
0.313) was rolled back with the incumbent still serving.
"""

from __future__ import annotations

import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from specops.engines.local import free_port
from specops.registry import open_registry
from tests.helpers.cli import CODE_PROMPTS, ok

pytestmark = [pytest.mark.engine, pytest.mark.slow, pytest.mark.long]

NAME = "act"
NO_SWAP = os.environ.get("SPECOPS_TEST_ACTIONS_NO_SWAP") == "1"  # the drop is not there: the test must fail


def _traffic(endpoint: str, rounds: int = 3) -> None:
    """``rounds`` passes over the code prompts, four clients at a time (≈ 100+ drafts per pass)."""
    def one(p: str) -> None:
        r = httpx.post(endpoint + "/v1/completions", timeout=300,
                       json={"model": "tiny", "prompt": p, "max_tokens": 32, "temperature": 0, "ignore_eos": True})
        assert r.status_code == 200, r.text

    with ThreadPoolExecutor(4) as ex:
        list(ex.map(one, CODE_PROMPTS * rounds))


def _metrics(endpoint: str) -> dict[str, float]:
    """Sums of the engine's vllm:* samples by name; per-position acceptance by ``pos:<position>``."""
    out: dict[str, float] = {}
    for line in httpx.get(endpoint + "/metrics", timeout=30).text.splitlines():
        if not line.startswith("vllm:"):
            continue
        head, _, value = line.rpartition(" ")
        name = head.split("{", 1)[0]
        out[name] = out.get(name, 0.0) + float(value)
        if name == "vllm:spec_decode_num_accepted_tokens_per_pos_total" and 'position="' in head:
            pos = head.split('position="', 1)[1].split('"', 1)[0]
            out[f"pos:{pos}"] = out.get(f"pos:{pos}", 0.0) + float(value)
    return out


def _argv(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").decode().split("\0")


def _spec_config(argv: list[str]) -> dict | None:
    return json.loads(argv[argv.index("--speculative-config") + 1]) if "--speculative-config" in argv else None


def _row():
    from specops.engines import local

    with open_registry() as reg:
        row = reg.get_deployment(NAME)
    assert row.status == "running" and local.alive(row.pid, row.pid_start_time), row
    return row


def _untrain(folder: Path) -> None:
    """Replace the draft's weights in ``folder`` by an untrained model of the same config (seed 0)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder))
    for f in folder.glob("*.safetensors"):
        f.unlink()
    model.save_pretrained(folder, safe_serialization=True)


def _policy(tmp_path: Path) -> str:
    """The default policy's rules, its windows shortened for a test and γ changes applied."""
    import yaml

    from specops.playbooks import playbook_path

    pol = yaml.safe_load((playbook_path("policies") / "default.yaml").read_text())
    pol["name"] = "act-test"
    pol["detection"].update({"min_drafts": 30, "floor_windows": 4})
    pol["gamma"].update({"mode": "apply", "kind": "gamma", "min_gain": 0.0, "min_dwell_minutes": 0,
                         "evaluate_every_windows": 1, "confirm_evaluations": 2, "min_drafts": 30})
    pol["rules"].append({"name": "apply-gamma", "when": ["GAMMA_CHANGE_PROPOSED"], "actions": [{"kind": "retune_gamma"}]})
    path = tmp_path / "act-test.yaml"
    path.write_text(yaml.safe_dump(pol, sort_keys=False))
    return str(path)


def _watcher(policy: str):
    """`specops monitor --profile cpu-tiny --policy POLICY -d act`'s Watcher, warmed from stored windows."""
    from specops.api.monitor import gamma_predictor
    from specops.drift.service import MonitorOptions, Watcher

    reg = open_registry()
    opts = MonitorOptions(policy=policy, interval_s=60, deployments=[NAME], profile="cpu-tiny")
    w = Watcher(reg, opts, predictor=gamma_predictor("cpu-tiny"))
    w.warm()
    return w


def _cycles(w, endpoint: str, n: int, *, until=None, record_baseline: bool = False) -> list:
    """Up to ``n`` windows of traffic, one monitor cycle after each; stops after the first report for
    which ``until(report)`` holds. Returns the reports."""
    reports = []
    for _ in range(n):
        _traffic(endpoint)
        w.options = w.options.model_copy(update={"record_baseline": record_baseline})
        r = w.cycle()
        print(r.model_dump_json(include={"outcome", "unseen", "findings", "actions", "notes"}))
        reports.append(r)
        if until is not None and until(r):
            break
    return reports


def _codes(reports) -> list[list[str]]:
    return [[f.code for f in r.findings] for r in reports]


def _done(reports, action: str) -> bool:
    return any(a.action == action and a.outcome == "done" for r in reports for a in r.actions)


def _events(kind: str) -> list:
    with open_registry() as reg:
        return [e for e in reg.events(subject=NAME, limit=500) if e.kind == kind]


def _heal_handover_and_rollback(tiny_models, live: Path, endpoint: str, deployed) -> None:
    """Heal's canary / promote / rollback functions (what `specops heal` runs after its retraining step)
    on the deployment as first deployed, with the untrained draft ``tiny-draft@0``:

    - the canary with the trained ``tiny-draft@1`` (``draft-live``) wins on the engines' own counters
      (canary start), and heal's default hand-over ``promote_local(handover="restart")`` restarts ``act``
      on its own port with it (start);
    - a canary with the untrained draft loses (canary start); ``rollback_local`` stops it and the
      incumbent keeps serving ``tiny-draft@1`` in the same process, the registry saying rollback.

    ``SPECOPS_TEST_ACTIONS_NO_ROLLBACK=1`` leaves the rollback out: the test must fail there."""
    from specops.heal.canary import canary_local
    from specops.heal.promote import promote_local, rollback_local

    with open_registry() as reg:
        won = canary_local(NAME, "tiny-draft@1", CODE_PROMPTS * 2, registry=reg, max_tokens=32, min_gain=0.05)
        print("canary (trained draft):", won.decision.model_dump_json())
        inc, cand = won.incumbent.acceptance, won.candidate_run.acceptance
        assert inc.num_draft_tokens > 0 and cand.num_draft_tokens > 0
        assert won.decision.action == "promote" and cand.acceptance_rate > inc.acceptance_rate + 0.05, won.decision
        promoted = promote_local(NAME, won, registry=reg)  # handover="restart", heal's default
        assert reg.get_deployment(f"{NAME}-canary").status == "stopped"
        ev = [e for e in reg.events(subject=NAME, limit=200) if e.kind == "heal.promoted"]
        assert ev and ev[0].data["handover"] == "restart" and ev[0].data["to"] == "tiny-draft@1", ev
    row = _row()
    # what a user checks: the same URL, a new engine process, launched with the promoted draft
    assert promoted.draft_ref == row.draft_ref == "tiny-draft@1" and row.endpoint == endpoint
    assert row.pid != deployed.pid and _spec_config(_argv(row.pid))["model"] == str(live)
    before = _metrics(endpoint)
    _traffic(endpoint, rounds=1)
    after = _metrics(endpoint)
    served = ((after["vllm:spec_decode_num_accepted_tokens_total"] - before.get("vllm:spec_decode_num_accepted_tokens_total", 0))
              / (after["vllm:spec_decode_num_draft_tokens_total"] - before.get("vllm:spec_decode_num_draft_tokens_total", 0)))
    print(f"after the hand-over: acceptance {served:.3f} (canary: incumbent {inc.acceptance_rate:.3f}, "
          f"candidate {cand.acceptance_rate:.3f})")
    assert served > inc.acceptance_rate + 0.05  # the engine on the URL now drafts with the trained weights

    incumbent_pid = row.pid
    with open_registry() as reg:
        lost = canary_local(NAME, "tiny-draft@0", CODE_PROMPTS * 2, registry=reg, max_tokens=32, min_gain=0.05)
        print("canary (untrained draft):", lost.decision.model_dump_json())
        assert lost.decision.action == "rollback", lost.decision
        assert lost.candidate_run.acceptance.acceptance_rate < lost.incumbent.acceptance.acceptance_rate
        if os.environ.get("SPECOPS_TEST_ACTIONS_NO_ROLLBACK") != "1":
            how = rollback_local(NAME, registry=reg, canary=lost.canary, reason=f"canary: {lost.decision.reason}")
            assert how == "serving"
        canary_row = reg.get_deployment(f"{NAME}-canary")
        rb = [e for e in reg.events(subject=NAME, limit=200) if e.kind == "heal.rollback"]
        runs = [v for v in reg.validation_runs(NAME) if v.checklist == "heal/canary"]
    from specops.engines import local

    # what a user checks: the canary is gone, the incumbent serves on, the registry says rollback
    assert canary_row.status == "stopped" and not local.alive(canary_row.pid, canary_row.pid_start_time), canary_row
    assert rb and rb[0].data["draft"] == "tiny-draft@1" and rb[0].data["canary"] == f"{NAME}-canary", rb
    assert runs and runs[0].passed is False, runs
    row = _row()
    assert row.pid == incumbent_pid and row.draft_ref == "tiny-draft@1"
    assert _spec_config(_argv(row.pid))["model"] == str(live)


def test_monitor_actions_fire_on_a_real_acceptance_drop(cli, tmp_path, tiny_models, engine_lock):
    live = tmp_path / "draft-live"
    shutil.copytree(tiny_models["draft-v1"], live)
    bad = tmp_path / "draft-untrained"
    shutil.copytree(tiny_models["draft-v1"], bad)
    _untrain(bad)
    with open_registry() as reg:
        reg.register_target(str(tiny_models["target-v1"]), name="tiny", version="1")
        reg.register_draft(str(bad), target="tiny@1", name="tiny-draft", version="0", method="draft_model")
        reg.register_draft(str(live), target="tiny@1", name="tiny-draft", version="1", method="draft_model")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    spec = tmp_path / "act.yaml"
    spec.write_text(f"name: {NAME}\ntarget: {{model: {tiny_models['target-v1']}, ref: tiny@1}}\n"
                    f"draft: {{model: {bad}, ref: tiny-draft@0}}\n"
                    "speculative: {method: draft_model, num_speculative_tokens: 3}\n"
                    "engine: {max_model_len: 512, dtype: bfloat16, max_num_seqs: 4}\n"
                    f"serve: {{port: {port}, served_model_name: tiny}}\nlocal: {{startup_timeout_s: 900}}\n")
    policy = _policy(tmp_path)
    try:
        # 0. deploy with the untrained draft (start 1); heal's canary hands over to the trained copy
        #    (starts 2, 3) and rolls back a losing canary (start 4); 1. the trained copy serves
        ok(cli("deploy", str(spec), "--no-check", timeout=1200))
        deployed = _row()
        assert _spec_config(_argv(deployed.pid))["model"] == str(bad)
        _heal_handover_and_rollback(tiny_models, live, endpoint, deployed)
        with open_registry() as reg:
            reg.upsert_deployment(NAME, platform="local", status="running", labels={"restart_allowed": "true"})
        first = _row()
        assert _spec_config(_argv(first.pid))["model"] == str(live)
        # 2. meanwhile the real predictor proposes another γ on the healthy pair's measured acceptance
        #    (confirmed over two evaluations); the rule applies it (start 5)
        w = _watcher(policy)
        healthy = _cycles(w, endpoint, 6, record_baseline=True, until=lambda r: _done([r], "retune_gamma"))
        assert any("baseline recorded" in n for r in healthy for n in r.notes), [r.notes for r in healthy]
        assert not any(c in codes for codes in _codes(healthy) for c in
                       ("ACCEPTANCE_COLLAPSE", "BELOW_BREAK_EVEN", "GAIN_DROP")), _codes(healthy)
        assert _done(healthy, "retune_gamma"), _codes(healthy)
        prop = next(f for r in healthy for f in r.findings if f.code == "GAMMA_CHANGE_PROPOSED")
        assert prop.evidence["score_proposed"] > prop.evidence["score_current"]  # the model's own reason
        row = _row()
        gamma = row.num_speculative_tokens
        assert row.pid != first.pid and gamma is not None and gamma not in (0, 3), row
        assert _spec_config(_argv(row.pid))["num_speculative_tokens"] == gamma
        assert _events("monitor.retune_gamma")

        # 3. the draft's weights swapped behind the monitor's back; `specops restart` (start 6)
        before_argv = _argv(row.pid)
        if not NO_SWAP:
            _untrain(live)
        ok(cli("restart", NAME, timeout=1200))
        row = _row()
        assert _argv(row.pid) == before_argv and row.endpoint == endpoint

        # 4. collapse within two windows, stale weights suspected; the collapse rule probes (start 7)
        w = _watcher(policy)
        collapsed = _cycles(w, endpoint, 2)
        hit = [i for i, codes in enumerate(_codes(collapsed)) if "ACCEPTANCE_COLLAPSE" in codes]
        assert hit and hit[0] <= 1, _codes(collapsed)
        f = next(f for f in collapsed[hit[0]].findings if f.code == "ACCEPTANCE_COLLAPSE")
        assert f.evidence["suspected"][0] == "stale_draft_weights", f.evidence["causes"]
        causes = {c["cause"]: c["status"] for c in f.evidence["causes"]}
        assert causes["method_mismatch"] == "ruled out", causes
        assert _done(collapsed, "restart_probe"), [r.actions for r in collapsed]
        probed = _row()
        assert probed.pid != row.pid and _argv(probed.pid) == before_argv  # restarted, same launch
        assert _events("monitor.restart_probe")

        # 5. the probe cannot help (the bad weights are on disk): below break-even -> fall back (start 8)
        fallback = _cycles(w, endpoint, 6, until=lambda r: _done([r], "disable_speculation"))
        assert any("ACCEPTANCE_COLLAPSE" in codes for codes in _codes(fallback)), _codes(fallback)
        be = next(f for r in fallback for f in r.findings if f.code == "BELOW_BREAK_EVEN")
        assert be.evidence["alpha_recent"] < be.evidence["break_even"], be.evidence
        assert _done(fallback, "disable_speculation"), _codes(fallback)
        row = _row()
        assert _spec_config(_argv(row.pid)) is None and "--speculative-config" not in (row.argv_redacted or [])
        assert row.method == "none" and row.draft_ref is None and row.num_speculative_tokens is None, row
        assert _events("monitor.disable_speculation")
        from specops.settings import deployment_dir

        assert (deployment_dir(NAME) / "spec.before-fallback.yaml").is_file()
        _traffic(endpoint, rounds=1)
        m = _metrics(endpoint)
        assert m.get("vllm:generation_tokens_total", 0.0) > 0
        assert m.get("vllm:spec_decode_num_drafts_total", 0.0) == 0  # it no longer speculates
    finally:
        cli("stop", f"{NAME}-canary", timeout=300)
        cli("stop", NAME, timeout=300)
