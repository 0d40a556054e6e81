"""Issue 27: every monitor action, `specops restart`, heal's default hand-over and a losing canary's
rollback, on one real CPU engine (tiny models, direct /metrics, the real registry). No fakes of the
engine or the executor: the monitor's actions run through ``EngineExecutor`` as `specops monitor`
wires it (``drift.service.Watcher``).

One deployment ``act`` is taken through the steps in order (each one leaves the state the next needs),
eight engine starts in all (≈ 22 min on 2 loaded cores), so this module has the marker ``long`` and
target (`make test-long`; deselected by `make test`):

1. deploy target-v1 with an *untrained* draft (random weights, same tokenizer: acceptance ≈ 0);
2. `specops restart act`: a new engine process with the same argv;
3. heal's canary with the trained draft-v1 wins on the engines' own counters, and heal's default
   hand-over (``promote_local(handover="restart")``) restarts ``act`` on its port with draft-v1;
4. heal's canary with the untrained draft loses; ``rollback_local`` stops the canary, the incumbent
   keeps serving draft-v1 in the same process;
5. monitor ``restart_probe``; 6. monitor ``retune_gamma`` (γ 3 → 4); 7. monitor
   ``disable_speculation``: each time the engine comes back changed, seen in its argv
   (/proc/PID/cmdline), its /metrics and the registry (row and ``monitor.<action>`` event).

``SPECOPS_TEST_ACTIONS_FROM=N`` (N = 5, 6 or 7; steps 2-4 run together) runs step 1 with the trained draft-v1, then steps N..7
only (N = 6: three engine starts), e.g. to see a step's asserts fail with its action disabled.

Steps 3-4 call heal's own canary / promote / rollback functions (the steps ``specops heal`` runs after
its retraining step; the retraining itself is covered by tests/heal/test_closed_loop_engine.py).
The monitor steps use test policies whose rules trigger the action on a finding the real engine
produces: a per-token floor of 0.99 (the tiny pair reaches ≈ 0.5) makes ACCEPTANCE_BELOW_FLOOR, and
for γ an injected predictor (``reference_predictor`` with no draft or verification cost, so more γ
always predicts faster, where `specops monitor`'s cpu-tiny model would propose a shorter γ for the tiny pair's α ≈ 0.5)
makes GAMMA_CHANGE_PROPOSED.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import httpx
import pytest

from specops.engines.local import free_port
from specops.registry import open_registry
from tests.helpers.cli import CODE_PROMPTS, ok

pytestmark = [pytest.mark.engine, pytest.mark.slow, pytest.mark.long]

PROMPTS = CODE_PROMPTS
NAME = "act"
FROM = int(os.environ.get("SPECOPS_TEST_ACTIONS_FROM", "1"))  # run step 1, then steps FROM..7 (module docstring)




def _traffic(endpoint: str) -> None:
    for p in PROMPTS:
        r = httpx.post(endpoint + "/v1/completions", timeout=300,
                       json={"model": "tiny", "prompt": p, "max_tokens": 32, "temperature": 0, "ignore_eos": True})
        assert r.status_code == 200, r.text


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


def _untrained_draft(like: Path, out: Path) -> Path:
    """A real draft model with draft-v1's architecture and tokenizer and random weights."""
    import torch
    from transformers import AutoConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(AutoConfig.from_pretrained(like))
    model.save_pretrained(out)
    for f in like.iterdir():
        if f.is_file() and ("token" in f.name or f.name == "special_tokens_map.json"):
            shutil.copy2(f, out / f.name)
    return out


def _policy(tmp_path: Path, name: str, rules: str, gamma: str = "mode: propose") -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\nallow_restart_probe: true\nallow_disable_speculation: true\n"
                    "detection: {min_drafts: 1, floor_windows: 1}\n"
                    f"gamma: {{{gamma}}}\nrules:\n{rules}")
    return str(path)


def _monitor_cycle(policy: str, *, floor: float | None = None, predictor=None):
    """One cycle of the real monitor (Watcher: registry rows, direct /metrics, EngineExecutor)."""
    from specops.drift.service import MonitorOptions, Watcher

    with open_registry() as reg:
        w = Watcher(reg, MonitorOptions(policy=policy, interval_s=60, deployments=[NAME]), predictor=predictor)
        if floor is not None:
            w.monitor.watches[NAME].target.alpha_floor = floor
        report = w.cycle()
        events = [e for e in reg.events(subject=NAME, limit=200) if e.kind.startswith("monitor.")]
    print(report.model_dump_json(include={"outcome", "unseen", "findings", "actions", "notes"}))
    return report, events


def test_monitor_actions_restart_and_heal_handover_on_one_engine(cli, tmp_path, tiny_models, engine_lock):
    bad = _untrained_draft(tiny_models["draft-v1"], tmp_path / "draft-untrained")
    with open_registry() as reg:
        reg.register_target(str(tiny_models["target-v1"]), name="tiny", version="1")
        reg.register_draft(str(bad), target="tiny@1", name="tiny-draft", version="0", method="draft_model")
        reg.register_draft(str(tiny_models["draft-v1"]), target="tiny@1", name="tiny-draft", version="1",
                           method="draft_model")
    first_draft = bad if FROM <= 2 else tiny_models["draft-v1"]
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    spec = tmp_path / "act.yaml"
    spec.write_text(f"name: {NAME}\ntarget: {{model: {tiny_models['target-v1']}, ref: tiny@1}}\n"
                    f"draft: {{model: {first_draft}, ref: tiny-draft@{0 if FROM <= 2 else 1}}}\n"
                    "speculative: {method: draft_model, num_speculative_tokens: 3}\n"
                    "engine: {max_model_len: 512, dtype: bfloat16, max_num_seqs: 4}\n"
                    f"serve: {{port: {port}, served_model_name: tiny}}\nlocal: {{startup_timeout_s: 900}}\n")
    heldout = PROMPTS
    try:
        # 1. deploy (engine start 1)
        ok(cli("deploy", str(spec), "--no-check", timeout=1200))
        first = _row()
        first_argv = _argv(first.pid)
        assert _spec_config(first_argv)["model"] == str(first_draft)
        if FROM <= 2:
            _steps_2_to_4(cli, tiny_models, first, first_argv, endpoint, heldout)
        if FROM <= 5:
            _step_5(tmp_path, endpoint)
        if FROM <= 6:
            _step_6(tmp_path, endpoint)
        _step_7(tmp_path, endpoint)
    finally:
        cli("stop", f"{NAME}-canary", timeout=300)
        cli("stop", NAME, timeout=300)


def _steps_2_to_4(cli, tiny_models, first, first_argv, endpoint, heldout):
    from specops.heal.canary import canary_local
    from specops.heal.promote import promote_local, rollback_local

    # 2. `specops restart` (start 2): a new process, the same launch
    r = ok(cli("restart", NAME, timeout=1200))
    print(r.stdout)
    row = _row()
    assert row.pid != first.pid and row.endpoint == endpoint
    assert _argv(row.pid) == first_argv and row.draft_ref == "tiny-draft@0"

    # 3. heal's canary: draft-v1 beats the untrained incumbent (start 3); default hand-over (start 4)
    with open_registry() as reg:
        won = canary_local(NAME, "tiny-draft@1", heldout, registry=reg, max_tokens=32, min_gain=0.05)
        print("canary 1:", won.decision.model_dump_json())
        inc, cand = won.incumbent.acceptance, won.candidate_run.acceptance
        assert inc.num_draft_tokens > 0 and cand.num_draft_tokens > 0
        assert won.decision.action == "promote" and cand.acceptance_rate > inc.acceptance_rate + 0.05
        promoted = promote_local(NAME, won, registry=reg)  # handover="restart", heal's default
        assert reg.get_deployment(f"{NAME}-canary").status == "stopped"
        assert "heal.promoted" in {e.kind for e in reg.events(subject=NAME, limit=200)}
    row = _row()
    assert promoted.draft_ref == row.draft_ref == "tiny-draft@1"
    assert row.endpoint == endpoint and row.pid != first.pid  # same port, clients keep their URL
    assert _spec_config(_argv(row.pid))["model"] == str(tiny_models["draft-v1"])
    _traffic(endpoint)
    assert _metrics(endpoint)["vllm:spec_decode_num_accepted_tokens_total"] > 0

    # 4. a losing canary (the untrained draft, start 5) is rolled back; the incumbent keeps serving
    incumbent_pid = row.pid
    with open_registry() as reg:
        lost = canary_local(NAME, "tiny-draft@0", heldout, registry=reg, max_tokens=32, min_gain=0.05)
        print("canary 2:", lost.decision.model_dump_json())
        assert lost.decision.action == "rollback"
        assert lost.candidate_run.acceptance.acceptance_rate < lost.incumbent.acceptance.acceptance_rate
        rollback_local(NAME, registry=reg, canary=lost.canary, reason=f"canary: {lost.decision.reason}")
        assert reg.get_deployment(f"{NAME}-canary").status == "stopped"
        assert "heal.rollback" in {e.kind for e in reg.events(subject=NAME, limit=200)}
    row = _row()
    assert row.pid == incumbent_pid and row.draft_ref == "tiny-draft@1"
    assert _spec_config(_argv(row.pid))["model"] == str(tiny_models["draft-v1"])


def _step_5(tmp_path, endpoint):
    # 5. monitor restart_probe (start 6)
    with open_registry() as reg:
        reg.upsert_deployment(NAME, platform="local", status="running", labels={"restart_allowed": "true"})
    _traffic(endpoint)
    before = _row()
    before_argv = _argv(before.pid)
    report, events = _monitor_cycle(_policy(tmp_path, "probe", "  - name: probe\n    when: [ACCEPTANCE_BELOW_FLOOR]\n"
                                            "    actions: [{kind: restart_probe}]\n"), floor=0.99)
    done = [(a.action, a.outcome, a.detail) for a in report.actions]
    assert ("restart_probe", "done", "") in done, done
    row = _row()
    assert row.pid != before.pid and _argv(row.pid) == before_argv  # restarted, same launch
    assert any(e.kind == "monitor.restart_probe" and e.data.get("outcome") == "done" for e in events)
    assert _metrics(endpoint).get("vllm:spec_decode_num_drafts_total", 0.0) == 0  # a fresh engine


def _step_6(tmp_path, endpoint):
    from specops.drift.gamma import reference_predictor

    # 6. monitor retune_gamma: γ 3 -> 4 (start 7)
    _traffic(endpoint)
    before = _row()
    assert _metrics(endpoint).get("pos:3") is None  # γ 3: positions 0-2 only
    gamma = ("mode: apply, kind: gamma, max_gamma: 4, min_gain: 0.0, min_dwell_minutes: 0, "
             "evaluate_every_windows: 1, confirm_evaluations: 1, min_drafts: 1")
    report, events = _monitor_cycle(_policy(tmp_path, "gamma", "  - name: apply-gamma\n    when: "
                                            "[GAMMA_CHANGE_PROPOSED]\n    actions: [{kind: retune_gamma}]\n",
                                            gamma),
                                    predictor=reference_predictor(draft_cost=0.0, overhead=0.0,
                                                                  verify_per_token_batch=0.0))
    done = [(a.action, a.outcome, a.detail) for a in report.actions]
    assert ("retune_gamma", "done", "") in done, done
    row = _row()
    assert row.pid != before.pid
    assert _spec_config(_argv(row.pid))["num_speculative_tokens"] == 4
    assert row.num_speculative_tokens == 4
    assert any(e.kind == "monitor.retune_gamma" and e.data.get("outcome") == "done" for e in events)
    _traffic(endpoint)
    m = _metrics(endpoint)
    assert "pos:3" in m and m["vllm:spec_decode_num_drafts_total"] > 0  # the engine drafts 4 tokens now


def _step_7(tmp_path, endpoint):
    # 7. monitor disable_speculation (start 8)
    _traffic(endpoint)
    before = _row()
    report, events = _monitor_cycle(_policy(tmp_path, "fallback", "  - name: fall-back\n    when: "
                                            "[ACCEPTANCE_BELOW_FLOOR]\n    actions: [{kind: disable_speculation}]\n"),
                                    floor=0.99)
    done = [(a.action, a.outcome, a.detail) for a in report.actions]
    assert ("disable_speculation", "done", "") in done, done
    row = _row()
    assert row.pid != before.pid
    assert _spec_config(_argv(row.pid)) is None and "--speculative-config" not in (row.argv_redacted or [])
    print("row after disable_speculation:", row.method, row.draft_ref, row.num_speculative_tokens)
    assert row.method == "none" and row.draft_ref is None and row.num_speculative_tokens is None, row
    assert any(e.kind == "monitor.disable_speculation" and e.data.get("outcome") == "done" for e in events)
    from specops.settings import deployment_dir

    assert (deployment_dir(NAME) / "spec.before-fallback.yaml").is_file()
    _traffic(endpoint)
    m = _metrics(endpoint)
    assert m.get("vllm:generation_tokens_total", 0.0) > 0
    assert m.get("vllm:spec_decode_num_drafts_total", 0.0) == 0  # it no longer speculates
