#!/usr/bin/env python3
"""The closed loop end to end on this machine, with real components (vLLM CPU engine, Prometheus):

 1. deploy target-v1 + draft-v1 (`specops deploy`), send traffic, record the acceptance baseline
    (`specops monitor --once --record-baseline`, through Prometheus);
 2. push target-v2 (target-v1 fine-tuned on prose) into the served folder and restart the deployment
    (`specops stop` + `specops deploy --force`): the stale-draft case;
 3. `specops monitor --once` flags the drop (CHANGED_MODEL), `specops runbook run acceptance-drop`
    names the changed target;
 4. `specops heal --from-traffic`: the local backend distils a new draft from target-v2's own greedy
    continuations of the recorded prompts, train-stage validation, the engine canary against the
    incumbent, promotion (restart on the same port);
 5. acceptance recovers (`specops status`, `specops monitor --once`), `specops lineage tree` shows the chain.

Every step runs the real CLI in a subprocess (argv lists) and prints its wall time. Everything lives
under a fresh SPECOPS_HOME (default: a temp folder; --home to keep it). The committed tiny models are
copied, never modified. Takes ≈ 8-12 min on an idle 2-core machine.

    .venv/bin/python scripts/closed_loop.py [--home DIR] [--steps 300] [--heldout 24] [--no-prometheus]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODELS = REPO / "tests" / "assets" / "tiny-models"
CODE = ["def fibonacci(n):\n    ", "import os\nimport sys\n\n\ndef main():\n",
        "    for key, value in sorted(mapping.items()):\n        if key", "def read_config(path):\n    with open(path) as f:\n"]
T0 = time.monotonic()


def prose_prompts(n: int, offset: int, stride: int, chars: int = 160) -> list[str]:
    """License texts (Debian's common licenses, CPython's LICENSE): what target-v2 was fine-tuned on."""
    files = sorted(p for p in Path("/usr/share/common-licenses").glob("*") if p.is_file() and not p.is_symlink())[:3]
    lic = Path(sysconfig.get_paths()["stdlib"]) / "LICENSE.txt"
    text = " ".join("\n".join(p.read_text(errors="replace") for p in files + ([lic] if lic.is_file() else [])).split())
    return [text[offset + i * stride: offset + i * stride + chars] for i in range(n)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def step(title: str):
    print(f"\n=== [{time.monotonic() - T0:6.0f}s] {title}", flush=True)
    return time.monotonic()


def specops(*args: str, check: bool = True, show: bool = True) -> subprocess.CompletedProcess:
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "specops", *args], capture_output=True, text=True, cwd=str(REPO))
    print(f"$ specops {' '.join(args)}   ({time.monotonic() - t:.1f}s, exit {r.returncode})")
    if show and r.stdout.strip():
        print("\n".join("  " + line for line in r.stdout.rstrip().splitlines()))
    if check and r.returncode != 0:
        print(r.stderr[-4000:], file=sys.stderr)
        raise SystemExit(f"step failed: specops {' '.join(args)}")
    return r


def traffic(endpoint: str, prompts: list[str], log: Path | None = None) -> None:
    """What clients send; the gateway's request log (prompts.jsonl) is what --from-traffic reads."""
    import httpx

    for p in prompts:
        r = httpx.post(endpoint + "/v1/completions", timeout=300,
                       json={"model": "tiny", "prompt": p, "max_tokens": 48, "temperature": 0, "ignore_eos": True})
        r.raise_for_status()
        if log is not None:
            with log.open("a") as fh:
                fh.write(json.dumps({"prompt": p, "ts": time.time()}) + "\n")


def swap(src: Path, dst: Path) -> None:
    for p in dst.iterdir():
        p.unlink() if p.is_file() else shutil.rmtree(p)
    for p in src.iterdir():
        if p.is_file():
            shutil.copy2(p, dst / p.name)


def start_prometheus(target: str, work: Path) -> tuple[str, subprocess.Popen]:
    port = free_port()
    cfg = work / "prometheus.yml"
    cfg.write_text("global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n"
                   f"  - job_name: vllm\n    static_configs:\n      - targets: ['{target}']\n"
                   "        labels: {specops_deployment: loop}\n")
    proc = subprocess.Popen(["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={work / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    return f"http://127.0.0.1:{port}", proc


def monitor(t_window: float, prom: list[str], *extra: str) -> subprocess.CompletedProcess:
    window = str(math.ceil(time.time() - t_window + 2))
    return specops("monitor", "--once", "--interval", window, "--dry-run", "--deployment", "loop", *prom, *extra)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", help="SPECOPS_HOME to use (default: a fresh temp folder, removed at the end)")
    ap.add_argument("--steps", type=int, default=300, help="distillation steps (the reference recipe: 300)")
    ap.add_argument("--no-prometheus", action="store_true", help="scrape /metrics directly")
    ap.add_argument("--heldout", type=int, default=24, help="held-out prompts: the canary test's prompts (heal's "
                    "default: 24)")
    args = ap.parse_args()
    home = Path(args.home or tempfile.mkdtemp(prefix="specops-loop-")).resolve()
    home.mkdir(parents=True, exist_ok=True)
    os.environ["SPECOPS_HOME"] = str(home)
    work = home / "work"
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    prom_proc = None
    prom: list[str] = []
    if not args.no_prometheus and shutil.which("prometheus"):
        url, prom_proc = start_prometheus(f"127.0.0.1:{port}", home)
        prom = ["--prometheus-url", url]
    timings: dict[str, float] = {}
    try:
        t = step("setup: copy the tiny models, register them, write the spec")
        for n in ("target-v1", "draft-v1", "target-v2"):
            shutil.copytree(MODELS / n, work / n, dirs_exist_ok=True)
        served = work / "serve" / "target"
        shutil.copytree(work / "target-v1", served, dirs_exist_ok=True)
        specops("lineage", "register-target", str(served), "--name", "tiny", "--version", "1")
        specops("lineage", "register-target", str(work / "target-v2"), "--name", "tiny", "--version", "2")
        specops("lineage", "register-draft", str(work / "draft-v1"), "--target", "tiny@1", "--name", "tiny-draft",
                "--version", "1", "--method", "draft_model")
        spec = work / "loop.yaml"
        spec.write_text(f"name: loop\ntarget: {{model: {served}, ref: tiny@1}}\n"
                        f"draft: {{model: {work / 'draft-v1'}, ref: tiny-draft@1}}\n"
                        "speculative: {method: draft_model, num_speculative_tokens: 3}\n"
                        "engine: {max_model_len: 512, dtype: bfloat16, max_num_seqs: 4}\n"
                        f"serve: {{port: {port}, served_model_name: tiny}}\nlocal: {{startup_timeout_s: 900}}\n")
        log = home / "deployments" / "loop" / "prompts.jsonl"  # the gateway's request log
        live = prose_prompts(40, offset=1000, stride=600) + prose_prompts(8, offset=21000, stride=1400)
        probe = prose_prompts(6, offset=3000, stride=700) + CODE
        timings["setup"] = time.monotonic() - t

        t = step("1. deploy target-v1 + draft-v1, serve traffic, record the baseline")
        specops("deploy", str(spec))
        t_w = time.time()
        for i in range(2):
            traffic(endpoint, probe)
            time.sleep(3 if prom else 0)
            monitor(t_w, prom, *(["--record-baseline"] if i else []))
            t_w = time.time()
        specops("status", "loop")
        timings["1 deploy + baseline"] = time.monotonic() - t

        t = step("2. push target-v2 into the served folder and restart (the draft is now stale)")
        specops("stop", "loop")
        swap(work / "target-v2", served)
        specops("deploy", str(spec), "--force", "--reason", "target fine-tuned and pushed; draft not retrained")
        timings["2 swap + restart"] = time.monotonic() - t

        t = step("3. live traffic (recorded by the gateway); the monitor flags the drop, the runbook names the target")
        t_w = time.time()
        traffic(endpoint, live, log)
        traffic(endpoint, probe)
        time.sleep(3 if prom else 0)
        r = monitor(t_w, prom)
        assert "CHANGED_MODEL" in r.stdout, "the monitor did not flag the changed target"
        r = specops("runbook", "run", "acceptance-drop", "--deployment", "loop", *prom)
        assert "now holds tiny@2" in r.stdout, "the runbook did not name the changed target"
        specops("status", "loop")
        timings["3 detect + diagnose"] = time.monotonic() - t

        t = step("4. heal: distil draft v2 from target-v2's outputs, validate, canary, promote")
        r = specops("heal", "--deployment", "loop", "--from-traffic", "--params",
                    json.dumps({"steps": args.steps, "threads": 1}), "--min-gain", "0.1",
                    "--heldout", str(args.heldout),
                    "--reason", "CHANGED_MODEL: target tiny@2 serves under the draft trained for tiny@1")
        assert "loop: promoted" in r.stdout, "the heal did not promote"
        timings["4 heal"] = time.monotonic() - t

        t = step("5. acceptance recovers; the lineage shows the chain")
        t_w = time.time()
        traffic(endpoint, probe)
        time.sleep(3 if prom else 0)
        r = monitor(t_w, prom)
        assert "CHANGED_MODEL" not in r.stdout, "the monitor still sees a stale draft"
        specops("status", "loop")
        specops("lineage", "tree")
        timings["5 verify"] = time.monotonic() - t
    finally:
        specops("stop", "loop", check=False, show=False)
        specops("stop", "loop-canary", check=False, show=False)
        if prom_proc is not None:
            prom_proc.terminate()
            prom_proc.wait(timeout=30)
        if not args.home:
            shutil.rmtree(home, ignore_errors=True)
    print("\ntimings: " + ", ".join(f"{k} {v:.0f}s" for k, v in timings.items())
          + f"; total {time.monotonic() - T0:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
