"""Real vLLM engines on CPU, started and stopped through the `specops` CLI (no mocks).

One successful start of their own (≈60 s on 2 shared cores with --enforce-eager, ≈170 s without): the
n-gram deploy, float32; the lossless comparison (draft_model against no speculation, float32 so that greedy
outputs can be compared exactly: bf16 batched verification can flip an argmax) is the session pool's two
engines (tests/engines/pool.py, read only). Plus one engine that dies while loading its (corrupt) weights.
vLLM's pre-launch check runs nowhere here: tests/engines/test_vllm_check.py has the launch it accepts and
those it rejects. The n-gram engine is
also timed against the pool's baseline: speculation must be faster, not only counted (issue 35).
"""

from __future__ import annotations

import json
import shutil
import socket
import sqlite3
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.engine

PROMPTS = [
    "def fibonacci(n):\n    ",
    "import os\nimport sys\n\n\ndef main():\n",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n",
    "    for key, value in sorted(mapping.items()):\n        if key",
    "# Copyright (C) 2001 Python Software Foundation\n\"\"\"Utilities for",
]
MAX_TOKENS = 32
START_TIMEOUT = 900
# Speculation must be faster where the tune run shows it (docs/results/tune-full-run.txt, c=1: n-gram γ=2-3
# 187-193 tok/s against 136-140 without speculation, +33-37%; draft_model γ=3 is not faster there, so it
# is not asserted). Both engines measured in this test, alternating, on the same prompts.
# The margin from this test's own rounds (2026-12-03, load average 13-22): n-gram 1.45, 1.34, 1.34 (median
# 1.34); the same test with the deploy's speculation removed 0.99, 1.11, 0.93 (median 0.99): halfway. Five rounds
# since 2026-12-03 evening: with part 1 of `make test` beside it (now also the service tests) one run of three
# rounds gave 1.08, 1.41, 1.04 (median 1.08, failed); two other fresh-clone runs passed. Since 2026-12-03, 21:10:
# fast's best pass over base's best pass, after a fresh-clone `make test` beside a helper's benches (load > 3) gave
# per-round ratios 1.08, 1.18, 1.00, 1.04, 0.68 (median 1.04, failed): the rounds measured the neighbours. (Tokens per
# CPU second of each engine's processes was tried and is no measure: the n-gram engine uses more CPU than wall time
# for its proposer's threads, 0.86x per CPU second while 1.43x per wall second.) Alone, best over best: 1.48 with
# n-gram, 0.98 with the deploy's speculation removed (the bound 1.15 fails it).
SPEED_ROUNDS = 5
SPEED_MAX_TOKENS = 64
MIN_SPEEDUP = 1.15


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_spec(tmp_path: Path, name: str, target: Path, *, method: str = "none", draft: Path | None = None,
                port: int, api_key_env: str | None = None, extra: str = "") -> Path:
    lines = [f"name: {name}", f"target: {{model: {target}}}"]
    if draft:
        lines.append(f"draft: {{model: {draft}}}")
    if method == "ngram":
        lines.append("speculative: {method: ngram, num_speculative_tokens: 3, prompt_lookup_max: 3}")
    elif method != "none":
        lines.append(f"speculative: {{method: {method}, num_speculative_tokens: 3}}")
    lines.append("engine: {max_model_len: 512, dtype: float32, max_num_seqs: 8, enforce_eager: true}")
    serve = f"port: {port}" + (f", api_key: {{env: {api_key_env}}}" if api_key_env else "")
    lines.append(f"serve: {{{serve}}}")
    lines.append(f"local: {{startup_timeout_s: {START_TIMEOUT}}}")
    p = tmp_path / f"{name}.yaml"
    p.write_text("\n".join(lines) + "\n" + extra)
    return p


def _complete(endpoint: str, served: str, key: str | None = None) -> list[str]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    out = []
    for prompt in PROMPTS:
        r = httpx.post(endpoint + "/v1/completions", headers=headers, timeout=300,
                       json={"model": served, "prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0,
                             "ignore_eos": True})
        assert r.status_code == 200, r.text
        out.append(r.json()["choices"][0]["text"])
    return out


def _tokens_per_s(endpoint: str, served: str, key: str | None = None) -> float:
    """Greedy completions of PROMPTS one after the other (concurrency 1): generated tokens per wall second."""
    import time

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    tokens, t0 = 0, time.perf_counter()
    for prompt in PROMPTS:
        r = httpx.post(endpoint + "/v1/completions", headers=headers, timeout=300,
                       json={"model": served, "prompt": prompt, "max_tokens": SPEED_MAX_TOKENS, "temperature": 0,
                             "ignore_eos": True})
        assert r.status_code == 200, r.text
        tokens += r.json()["usage"]["completion_tokens"]
    return tokens / (time.perf_counter() - t0)


def speedup_over(fast: tuple[str, str, str | None], base: tuple[str, str, str | None],
                 rounds: int = SPEED_ROUNDS) -> tuple[float, list[float]]:
    """(fast's best pass over base's best pass, the per-round ratios) in tokens/s. Each round is fast, base, base,
    fast, so both engines are measured through the same stretches of load. A neighbour's load only ever slows a
    pass, so each engine's fastest of its 2 × rounds passes is the nearest to its own speed (the estimator
    timeit uses); a round's ratio swings with whatever else runs in those seconds. One warm-up pass each first."""
    _tokens_per_s(*fast), _tokens_per_s(*base)
    ratios, fs, bs = [], [], []
    for _ in range(rounds):
        f1, b1, b2, f2 = _tokens_per_s(*fast), _tokens_per_s(*base), _tokens_per_s(*base), _tokens_per_s(*fast)
        ratios.append((f1 + f2) / (b1 + b2))
        fs += [f1, f2]
        bs += [b1, b2]
    return max(fs) / max(bs), ratios


def _counters(endpoint: str, served: str) -> dict:
    from specops.engines.manage import live_acceptance

    return live_acceptance(endpoint, served)


def _engine_pids(home: Path) -> list[int]:
    """Every process whose environment points VLLM_CACHE_ROOT into this test's SPECOPS_HOME."""
    marker = f"VLLM_CACHE_ROOT={home}/cache/".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "environ").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def _deploy(cli, spec: Path, env: dict | None = None):
    """Deploy through the CLI, without vLLM's own pre-launch check (10-40 s; tests/engines/test_vllm_check.py)."""
    r = cli("deploy", str(spec), "--no-check", env=env, timeout=START_TIMEOUT + 120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def _stop(cli, name: str, home: Path) -> None:
    r = cli("stop", name, timeout=120)
    assert r.returncode == 0, r.stderr
    assert _engine_pids(home) == [], "engine processes survived `specops stop`"


def test_ngram_engine_serves_counts_speculation_and_stops_with_no_orphans(cli, tiny_models, engine_pool,
                                                                         engine_lock, tmp_path, specops_home):
    """Also: n-gram γ=3 is faster than the pool's engine without speculation (same target, dtype, length,
    eager) on the same prompts, measured here, both engines alternating."""
    port = _free_port()
    spec = _write_spec(tmp_path, "tiny-ngram", tiny_models["target-v1"], method="ngram", port=port,
                       api_key_env="TINY_NGRAM_KEY")
    env = {"TINY_NGRAM_KEY": "sk-tiny-secret"}
    r = _deploy(cli, spec, env)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        assert "registered target target-v1@" in r.stdout
        assert httpx.post(endpoint + "/v1/completions", json={"model": "tiny-ngram", "prompt": "x"},
                          timeout=60).status_code == 401  # the key reached vLLM through VLLM_API_KEY
        base = engine_pool.base
        speedup, ratios = speedup_over((endpoint, "tiny-ngram", "sk-tiny-secret"), (base.url, base.served_name, None))
        print(f"\nn-gram γ=3 over no speculation: best pass over best pass {speedup:.2f}; tokens/s ratio per round "
              f"{[round(x, 2) for x in ratios]}")
        assert speedup >= MIN_SPEEDUP, (
            f"n-gram speculation was not faster than none: best pass over best pass {speedup:.2f} < {MIN_SPEEDUP} "
            f"(per round {ratios})")
        before = _counters(endpoint, "tiny-ngram")
        texts = _complete(endpoint, "tiny-ngram", key="sk-tiny-secret")
        after = _counters(endpoint, "tiny-ngram")
        assert all(t for t in texts)
        for c in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
            assert after[c] > before.get(c, 0), (c, before, after)
        assert sum(after["accepted_per_pos"]) == after["num_accepted_tokens"] and len(after["accepted_per_pos"]) == 3
        st = cli("status", "tiny-ngram", "-o", "json")
        row = json.loads(st.stdout)[0]
        assert row["process"] == "running" and row["health"] == "ok" and row["uptime_s"] > 0
        assert 0 < row["acceptance_rate"] <= 1 and row["method"] == "ngram"
        logs = cli("logs", "tiny-ngram", "-n", "200")
        assert logs.returncode == 0 and "sk-tiny-secret" not in logs.stdout
        db = sqlite3.connect(specops_home / "specops.db")
        argv, status = db.execute("select argv_redacted, status from deployment where name='tiny-ngram'").fetchone()
        assert status == "running" and "sk-tiny-secret" not in argv
    finally:
        _stop(cli, "tiny-ngram", specops_home)
    assert json.loads(cli("status", "tiny-ngram", "-o", "json").stdout)[0]["status"] == "stopped"


def test_draft_model_speculation_is_lossless_against_no_speculation(engine_pool, engine_lock):
    """The session pool's two engines (tests/engines/pool.py): draft_model γ=3 (target-v1 + draft-v1) against
    the same target without speculation, both float32, max_model_len 512, eager: greedy outputs must be
    identical. The speculative engine used to be a `specops deploy` of this test's own (one engine start);
    the draft_model deploy's registration is tests/engines/test_deploy_gate.py's, a CLI deploy that starts and
    stops an engine is the n-gram test's above. Counters are deltas around this test's own traffic."""
    spec, base = engine_pool.spec, engine_pool.base
    before = _counters(spec.url, spec.served_name)
    with_spec = _complete(spec.url, spec.served_name)
    c = _counters(spec.url, spec.served_name)
    drafts = c["num_drafts"] - before.get("num_drafts", 0)
    draft_tokens = c["num_draft_tokens"] - before.get("num_draft_tokens", 0)
    accepted = c["num_accepted_tokens"] - before.get("num_accepted_tokens", 0)
    assert drafts > 0 and draft_tokens == 3 * drafts
    assert 0 < accepted <= draft_tokens
    print(f"\ndraft_model γ=3 acceptance on {len(PROMPTS)} code prompts: {accepted / draft_tokens:.3f}")
    without = _complete(base.url, base.served_name)
    assert "no spec_decode counters" in _counters(base.url, base.served_name)["note"]
    assert with_spec == without


def test_engine_that_dies_while_loading_reports_its_log_and_leaves_nothing_running(cli, tiny_models, engine_lock,
                                                                                  tmp_path, specops_home, monkeypatch):
    """The user's launch as is: without the suite's SPECOPS_TEST_ENGINE_ENV (tests/conftest.py), so vLLM's
    worker is its own process under the EngineCore (API server, EngineCore, worker), and the whole tree is
    gone after the failed start."""
    monkeypatch.setenv("SPECOPS_TEST_ENGINE_ENV", "")
    broken = tmp_path / "broken-target"
    shutil.copytree(tiny_models["target-v1"], broken)
    weights = next(broken.glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:4096])  # truncated: the header promises more than is there
    spec = _write_spec(tmp_path, "tiny-broken", broken, port=_free_port())
    # --no-check: vLLM's pre-launch check reads no weights, so it passes here; it is not what is tested
    r = cli("deploy", str(spec), "--no-check", timeout=START_TIMEOUT + 120)
    assert r.returncode == 2, r.stdout + r.stderr
    err = r.stderr.strip().splitlines()[-1]
    assert err.startswith("error: ") and "exited during start-up" in err and "To fix:" in err
    assert "last log lines" in err
    assert _engine_pids(specops_home) == []
    from specops.engines.local import tmpdir_for

    tmp_link = tmpdir_for(specops_home / "deployments" / "tiny-broken")
    assert not tmp_link.is_symlink() or tmp_link == specops_home / "deployments" / "tiny-broken" / "tmp"
    written = {p.relative_to(specops_home).parts[0] for p in specops_home.rglob("*")}
    deployments = {p.name for p in (specops_home / "deployments").iterdir()}
    assert written <= {"deployments", "cache", "specops.db", "specops.db-wal", "specops.db-shm"}
    assert deployments == {"tiny-broken"}
    db = sqlite3.connect(specops_home / "specops.db")
    assert db.execute("select status, pid from deployment where name='tiny-broken'").fetchone() == ("failed", None)
