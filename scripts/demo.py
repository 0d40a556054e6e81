#!/usr/bin/env python
"""`make demo`: the main job end to end on this CPU machine, with tiny real models.

recommend -> a deployment spec -> `specops deploy` (a real vLLM CPU engine, draft_model speculation)
-> one completion -> `specops status` (live acceptance from /metrics) -> `specops stop`.

Everything runs in a throw-away SPECOPS_HOME (printed at the start) unless SPECOPS_HOME is set.
Each step prints the command it runs. Takes 2-5 minutes on 2 cores once the venv exists.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
MODELS = REPO / "tests" / "assets" / "tiny-models"
NAME = "tiny-demo"


def step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def run(*args: str, check: bool = True, timeout: float = 1200, capture: bool = False,
        quiet: bool = False) -> subprocess.CompletedProcess:
    """Run `specops ARGS`. Its output is streamed as it comes, progress (stderr) and results (stdout) in the order
    they are written, so a step's progress never shows after its result; ``capture`` keeps stdout apart (the
    caller parses it) and shows stderr first; ``quiet`` shows nothing unless it fails."""
    print("$ specops " + " ".join(args), flush=True)
    argv = [str(BIN / "specops"), *args]
    if capture or quiet:
        r = subprocess.run(argv, text=True, capture_output=True, timeout=timeout, cwd=str(REPO))
        if not quiet or r.returncode != 0:
            sys.stdout.write(r.stderr)
            sys.stdout.write(r.stdout if not capture or r.returncode != 0 else "")
    else:
        with subprocess.Popen(argv, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=str(REPO)) as p:
            out = []
            deadline = time.monotonic() + timeout
            assert p.stdout is not None
            for line in p.stdout:  # each line as the command writes it
                sys.stdout.write(line)
                sys.stdout.flush()
                out.append(line)
                if time.monotonic() > deadline:
                    p.kill()
                    break
            p.wait()
        r = subprocess.CompletedProcess(argv, p.returncode, "".join(out), "")
    if check and r.returncode != 0:
        sys.exit(f"demo failed at `specops {' '.join(args)}` (exit {r.returncode})")
    return r


def pin_note(pinned: dict, unpinned: dict) -> str | None:
    """One line when the demo's pinned plan is predicted slower than no speculation: why it is pinned anyway,
    and what recommend picks unpinned (``pinned``/``unpinned``: `recommend -o json` plans). None when it wins."""
    p = pinned["predicted"]
    if p["speedup"] >= 1.0:
        return None
    rng = f", range {p['speedup_low']:.2f}-{p['speedup_high']:.2f}x" if p.get("speedup_low") is not None else ""
    best = unpinned["method"] if unpinned["method"] == "none" else \
        f"{unpinned['method']} γ={unpinned['num_speculative_tokens']} at {unpinned['predicted']['speedup']:.2f}x"
    return (f"note: the demo pins {pinned['method']} to show a draft's lineage check and live acceptance; recommend "
            f"predicts {p['speedup']:.2f}x for it here{rng}: on a CPU the draft's steps cost about what its accepted "
            f"tokens save; unpinned it picks {best}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ensure_models() -> None:
    if all((MODELS / n / "config.json").is_file() for n in ("target-v1", "draft-v1")):
        return
    step("building the tiny models (seeded, fixed-step; about 10 CPU-minutes)")
    subprocess.run([sys.executable, str(REPO / "scripts" / "build_tiny_models.py"), "--out", str(MODELS)],
                   check=True)


def recommended_spec() -> dict:
    import yaml

    step("1. recommend (CPU, code task, the tiny target and its draft)")
    common = ("--model", str(MODELS / "target-v1"), "--gpu", "cpu", "--task", "code", "--vllm-version", "0.32.0",
              "--context-len", "256", "--output-len", "128")
    pinned = ("--draft", str(MODELS / "draft-v1"), "--method", "draft_model", "--num-speculative-tokens", "3")
    best = json.loads(run("recommend", *common, "-o", "json", quiet=True).stdout)
    plan = json.loads(run("recommend", *common, *pinned, "-o", "json", quiet=True).stdout)
    note = pin_note(plan, best)
    if note:
        print(note, flush=True)
    r = run("recommend", *common, *pinned, "--output", "deployment", capture=True)
    print(r.stdout)
    # (a failing recommend stops the demo in run(): its message is printed, never replaced by a hand-written spec)
    try:
        spec = yaml.safe_load(r.stdout)
    except yaml.YAMLError as exc:
        sys.exit(f"demo failed at step 1: `specops recommend --output deployment` printed no valid YAML ({exc})")
    if not isinstance(spec, dict):
        sys.exit(f"demo failed at step 1: `specops recommend --output deployment` printed {type(spec).__name__}, "
                 "not a DeploymentSpec mapping")
    for role in ("target", "draft"):  # the spec file lives elsewhere: make model folders absolute
        if isinstance(spec.get(role), dict) and not str(spec[role]["model"]).startswith("/"):
            spec[role]["model"] = str((REPO / spec[role]["model"]).resolve())
    # What a CPU box needs on top of the recommendation: a small context, float32 (no AVX512-BF16
    # needed; exact greedy comparisons), a free port, a generous start-up timeout.
    spec["name"] = NAME
    spec.setdefault("engine", {}).update({"max_model_len": 512, "dtype": "float32", "max_num_seqs": 8,
                                         "enforce_eager": True})
    spec["engine"].pop("vllm_version", None)
    spec["engine"].pop("gpu_memory_utilization", None)
    spec["engine"].pop("kv_cache_dtype", None)
    spec.setdefault("serve", {})["port"] = free_port()
    spec.setdefault("local", {})["startup_timeout_s"] = 900
    spec["platform"] = "local"
    return spec


def main() -> int:
    t0 = time.monotonic()
    if "SPECOPS_HOME" not in os.environ:
        os.environ["SPECOPS_HOME"] = tempfile.mkdtemp(prefix="specops-demo-")
    print(f"SPECOPS_HOME={os.environ['SPECOPS_HOME']}")
    ensure_models()
    import yaml

    spec = recommended_spec()
    spec_path = Path(os.environ["SPECOPS_HOME"]) / "deploy.yaml"
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    step(f"2. the deployment spec ({spec_path})")
    print(spec_path.read_text())
    step("3. the exact launch (dry run)")
    run("deploy", str(spec_path), "--dry-run", "--no-check")
    step("4. deploy locally on CPU (a real vLLM engine)")
    run("deploy", str(spec_path))
    try:
        import httpx

        port = spec["serve"]["port"]
        step("5. one completion request")
        body = {"model": NAME, "prompt": "def fibonacci(n):\n    ", "max_tokens": 48, "temperature": 0}
        print(f"$ POST http://127.0.0.1:{port}/v1/completions {json.dumps(body)}")
        resp = httpx.post(f"http://127.0.0.1:{port}/v1/completions", json=body, timeout=300)
        print(resp.json()["choices"][0]["text"])
        step("6. status with live acceptance")
        run("status", NAME)
    finally:
        step("7. stop")
        run("stop", NAME)
    print(f"\ndemo finished in {time.monotonic() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
