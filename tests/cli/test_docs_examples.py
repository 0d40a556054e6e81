"""Every `specops ...` command in a fenced block of docs/*.md runs as written (tests/cli/docexamples.py
extracts them), or is listed here with the reason it cannot run on this machine.

Each doc's runnable examples run in order, as a reader would type them, in a fresh working folder (with
``tests`` linked in, for the commands that name the tiny models) and a fresh SPECOPS_HOME; each is checked
for its exit code and one key output (stdout and stderr, or the file it redirects into). They run through
the in-process CLI runner (tests/cli/inproc.py) with the argv bash would pass:
``test_bash_passes_each_example_the_argv_the_in_process_run_gets`` has bash itself word-split every
example, and deploy.md's examples (a redirect into a file the next one reads) also run through bash and
``python -m specops``, as does the engine block of that page. The folders a doc assumes (``./llama``, ``./models/...``) are the committed tiny
models; nothing else is faked. A synopsis (``[--opt]``, ``A | B``, ``NAME``) is not an example: its
command is checked to exist (``--help`` exits 0). A new example that is in no table fails
``test_every_documented_example_is_accounted_for``."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.docexamples import Example, examples
from tests.cli.inproc import run_inprocess
from tests.conftest import REPO

TINY = REPO / "tests" / "assets" / "tiny-models"

# command as written -> (exit code, regex that must be found, file that holds the output or None)
RUNS: dict[str, tuple[int, str, str | None]] = {
    # demo.md
    "specops recommend --model tests/assets/tiny-models/target-v1 --gpu cpu --task code --draft "
    "tests/assets/tiny-models/draft-v1 --method draft_model --num-speculative-tokens 3 --vllm-version 0.32.0 "
    "--context-len 256 --output-len 128 --output deployment": (0, r"method: draft_model", None),
    # deploy.md (the rest of its block starts an engine: ENGINE below)
    "specops recommend --model ./llama --gpu cpu --task code --context-len 256 --name tiny --output deployment "
    "> deploy.yaml": (0, r"(?m)^name: tiny$", "deploy.yaml"),
    "specops deploy deploy.yaml --dry-run        # the exact argv and environment; starts nothing":
        (0, r"--max-model-len 512", None),
    # install.md
    "specops --version": (0, r"^specops \d+\.\d+\.\d+", None),
    "specops config show                     # setting | value | source | flag": (0, r"│ vllm_version +│ 0\.\d+\.\d+ +│ default", None),
    "specops completion zsh                 # prints the script for zsh (bash, zsh, fish, powershell, pwsh)":
        (0, r"compdef _specops_completion specops", None),
    # kubernetes.md: deploy.yaml is the 70B EAGLE-3 spec the page describes (tests/k8s/llama70b-eagle31.yaml)
    "specops deploy deploy.yaml --platform kubernetes --dry-run     # render + validate + write manifests/<name>/":
        (0, r"wrote manifests/llama70b-eagle31/ \(\d+ files\)", None),
    # lineage.md
    "specops lineage register-target ./models/llama-8b --name llama-8b --version 2024-07":
        (0, r"registered target llama-8b@2024-07 \(f1:", None),
    "specops lineage register-target meta-llama/Llama-3.1-8B@0e9e39f249a16976918f6564b8830bc894c89659":
        (0, r"registered target meta-llama/Llama-3.1-8B@0e9e39f2", None),
    'specops lineage register-draft ./models/llama-8b-eagle3 --target llama-8b@2024-07 --trained-on "sharegpt 50k" '
    '--trainer-cmd "speculators train ..."': (0, r"registered draft_model draft llama-8b-eagle3@v1 for llama-8b@2024-07",
                                              None),
    "specops lineage register-draft ngram --target llama-8b --method ngram":
        (0, r"registered ngram draft ngram@v1 for llama-8b@2024-07", None),
    "specops lineage list": (0, r"llama-8b-eagle3", None),
    'specops lineage list --output json      # {"targets": [...], "drafts": [... "target": "name@version", '
    '"method": ...]}': (0, r'"target": "llama-8b@2024-07"', None),
    "specops lineage show llama-8b           # every version, every recorded fact":
        (0, r"target llama-8b@2024-07[\s\S]*tokenizer_hash +│ t1:[\s\S]*weights_fingerprint +│ w1:", None),
    "specops lineage tree                    # targets -> drafts -> deployments": (0, r"llama-8b-eagle3", None),
    "specops lineage check --target llama-8b@2024-07 --draft llama-8b-eagle3 --vllm-version 0.33.0":
        (0, r"llama-8b-eagle3@v1 on llama-8b@2024-07 \(draft_model, vLLM 0.33.0\): compatible", None),
    "specops lineage export --file registry.json                # events only with --with-events":
        (0, r'"llama-8b-eagle3"', "registry.json"),
    "specops lineage prune --raw 7d --hourly 30d --horizon 365d": (0, r"^would delete 0 measurements", None),
    "specops lineage prune --raw 7d --hourly 30d --horizon 365d --apply": (0, r"^did delete 0 measurements", None),
    # monitor.md
    "specops monitor --once --record-baseline                                 # ... and record baselines":
        (2, r"cycle idle: 0 seen", None),  # this home's registry is empty: nothing watched is not a success
    "specops runbook list": (0, r"acceptance-drop", None),
    "specops runbook show acceptance-drop": (0, r"otherwise: No single cause found", None),
    # performance-model.md
    "specops recommend --model meta-llama/Llama-3.1-8B-Instruct --gpu H100":
        (0, r"(?m)^pick: eagle3 γ=\d+, KV auto, draft yuhuili/EAGLE3-LLaMA3\.1-Instruct-8B$", None),
    "specops recommend --model meta-llama/Llama-3.1-8B-Instruct --gpu H100 --batch-size 256":
        (0, r"pick: no speculation[\s\S]*why: [\s\S]*no candidate has P\(gain\)", None),
    "specops recommend --model meta-llama/Llama-3.1-8B-Instruct --gpu H100 --batch-size 256 --allow-uncertain":
        (0, r"may be slower than no speculation", None),
    # recommend.md: the pick's worked example
    "specops recommend --model openai/gpt-oss-120b --gpu B200 --batch-size 8 -o json   # eagle3 γ=1, predicted.evidence_rows "
    "names PR #32887": (0, r'"method": "eagle3",[^}]*?"num_speculative_tokens": 1,[\s\S]*"evidence_rows": \[\s*'
                           r'"eagle3 1\.25x at batch 8 on B200, vllm PR #32887"', None),
    # recommend.md
    "specops recommend --model llama-3.1-8b-instruct --gpu H100 --method eagle3 --adaptive-verification -o json":
        (0, r'"enable_adaptive_verification": true', None),
    "specops recommend --model meta-llama/Llama-3.3-70B-Instruct --gpu A100-80GB --gpus 4 --tpot-ms 30 --task code":
        (0, r"--tensor-parallel-size 4 .*EAGLE3-LLaMA3.3-Instruct-70B", None),
    "specops recommend --model llama-3.1-8b-instruct --gpu H100 --batch-size 64 --context-len 256 --output-len 256 -o json":
        (0, r'"model": "meta-llama/Llama-3\.1-8B-Instruct"[\s\S]*"method": "[a-z0-9_]+"[\s\S]*"effective_batch": 64,',
         None),
    "specops recommend --model llama-3.1-8b-instruct --gpu H100 --context-len 100000": (0, r"--max-model-len 100256", None),
    "specops recommend --model llama-3.1-8b-instruct --gpu T4 --quantization awq": (0, r'"method":"ngram"', None),
    # recommend.md: predicted, not launched (the prediction is about the configuration, the launch about artifacts)
    "specops recommend --model meta-llama/Llama-2-7b-chat-hf --params-b 6.74 --gpu H100 --method eagle   # predicted; "
    "launch: withheld": (0, r"(?m)^launch: withheld: no eagle draft is known[\s\S]*To fix:\s+pass\s+--draft", None),
    "specops recommend --model meta-llama/Llama-2-7b-chat-hf --params-b 6.74 --gpu H100 --method eagle --draft "
    "yuhuili/EAGLE-llama2-chat-7B   # the fix: the launch names it":
        (0, r"(?m)^launch: vllm serve meta-llama/Llama-2-7b-chat-hf .*yuhuili/EAGLE-llama2-chat-7B", None),
    "specops recommend --model deepseek-ai/DeepSeek-V3 --quantization nvfp4 --gpu B200 --gpus 8 --method mtp -o json   # "
    '"withheld": [{"artifact": "checkpoint", ...}]': (0, r'"argv": \[\],[\s\S]*"artifact": "checkpoint"', None),
    "specops recommend --model meta-llama/Llama-3.1-8B-Instruct --gpu A100-80GB --sweep batch=1,8,64,256":
        (0, r"swept over 4", None),
    "specops recommend --model org/my-moe --params-b 30 --active-params-b 3 --gpu H100 --explain   # unknown MoE":
        (0, r"moe: 3B active", None),
    "specops recommend --model llama-3.1-8b-instruct --gpu H100 --method eagle3 --num-speculative-tokens 7   # what-if":
        (0, r'"method":"eagle3".*"num_speculative_tokens":7', None),
    "specops recommend --model vicuna-7b --gpu A100-80GB --context-len 1024 --method medusa --vllm-version 0.32.0":
        (0, r'"method":"medusa"', None),
    "specops recommend --model llama-3.1-8b-instruct --gpu H100 --output deployment --name chat-8b > chat-8b.yaml":
        (0, r"(?m)^name: chat-8b$", "chat-8b.yaml"),
    "specops recommend --model llama-3.1-8b-instruct --gpu A100-80GB --context-len 256 --batch-size 64 --allow-uncertain -o json":
        (0, r'"num_speculative_tokens_per_batch_size":\s*\[\s*\[\s*1,', None),
    "specops recommend --model llama-3.1-8b-instruct --gpu H100 --context-len 256 --batch-size 64 --allow-uncertain   # no "
    "schedule: its cost outweighs it": (0, r"no schedule", None),
    "specops recommend --model llama-3.1-8b-instruct --gpu H100 --parallel-drafting -o json":
        (0, r'"parallel_drafting": true', None),
    "specops recommend --model llama-3.1-8b-instruct --gpu H100 --batch-size 128 --context-len 8192 --kv-cache-dtype fp8":
        (0, r"KV fp8", None),
    "specops recommend --model llama-3.1-8b-instruct --gpu H100 --context-len 4096 --qps 2   # load: prefill share, "
    "TPOT under load": (0, r"prefills take \d+% of the GPU", None),
    "specops recommend --model openai/gpt-oss-120b --gpu B200 --batch-size 64 --method eagle3 -o json   # MoE regime "
    "in the path": (0, r"MoE regime expert-saturated", None),
    "specops recommend --model Qwen/Qwen3.5-9B --gpu H100   # hybrid: recurrent state, MTP with "
    "--no-enable-prefix-caching": (0, r"--no-enable-prefix-caching", None),
    "specops recommend --model Qwen/Qwen3.5-27B --gpu H100 --context-len 32768 --explain   # 48 GDN layers: 64 KiB of KV "
    "per token": (0, r"KV is 64\s+KiB per\s+token[\s\S]*launch: vllm serve Qwen/Qwen3\.5-27B .*--no-enable-prefix-caching",
                  None),
    "specops tune --list                 # the calibrations this installation has: none in a fresh SPECOPS_HOME":
        (0, r"calibrations \(newest revision\)", None),
    "specops recommend --model tests/assets/tiny-models/target-v1 --gpu cpu --task code --batch-size 4 --context-len 64 "
    '--output-len 64 --vllm-version 0.32.0 -o json      # no calibration yet: "learned_from": []':
        (0, r'"learned_from": \[\]', None),
    "specops recommend --model meta-llama/Llama-3.1-8B-Instruct --gpu A100-80GB --sweep batch=1,8,64,256 --plot "
    "speedup.svg": (0, r"batch 256: no speculation picked over eagle3[\s\S]*plot: speedup.svg", None),
    "specops gate --spec chat-8b.yaml   # names every <pin> and every registration the spec lacks, in one run":
        (1, r"placeholder[\s\S]*gate\.lineage[\s\S]*register-target[\s\S]*register-draft", None),
    "specops recommend --model llama-3.1-8b-instruct --gpu H100 --batch-size 8 --explain":
        (0, r"decision path:\n  - model_size", None),
    'specops recommend --model llama-3.1-8b-instruct --gpu "NVIDIA H100 NVL" --tp 2 --sweep context=1024,8192,32768':
        (0, r"on 2× H100-NVL: --context-len swept over 3", None),
    # tune.md
    "specops tune --list                                         # stored runs and calibrations":
        (0, r"tune runs[\s\S]*run id[\s\S]*calibrations \(newest revision\)", None),
    # capacity.md (issue 44)
    "specops recommend --model meta-llama/Llama-3.1-8B-Instruct --gpu H100 --gpus-available 16 --qps 40 --tpot-slo 40 "
    "--ttft-slo 2000 --output-len 512": (0, r"chosen: 9 replicas × 1 GPUs[\s\S]*without speculation: 12 GPUs", None),
    "specops recommend --model meta-llama/Llama-3.1-70B-Instruct --gpu H100 --gpus-available 16 --qps 40 --tpot-slo 40 "
    "--ttft-slo 2000 --output-len 512": (2, r"needs more than 16 GPUs[\s\S]*To fix: use --gpus-available 84 \(21 replicas of 4 GPUs", None),
    "specops recommend --model meta-llama/Llama-3.1-8B-Instruct --gpu H100 --gpus-available 2 --qps 8 --tpot-slo 40 "
    "--output-len 512 -o deployment --name chat-8b > chat-8b.yaml":
        (0, r"(?m)^  autoscaling:[\s\S]*^capacity:[\s\S]*by_acceptance:", "chat-8b.yaml"),
}

# the deploy.md block past its dry run, on a real CPU engine (after the two RUNS lines of that block)
ENGINE: dict[str, tuple[int, str]] = {
    "specops deploy deploy.yaml                  # check, gate, start, wait for /health, record":
        (0, r"(?m)^tiny: running at http://127\.0\.0\.1:\d+ \(pid \d+, ready in \d+s, vLLM 0\.\d+"),
    "specops status tiny                         # health, uptime, live acceptance from /metrics":
        (0, r"│ tiny +│ running +│ ok +│ \d+m\d\ds +│ ngram +│ [1-9] +│ (?:\d\.\d{3}|-) +│"),  # - until traffic
    "specops logs tiny -n 50                     # the engine log (-f to follow)":
        (0, r'"GET /(?:health|metrics) HTTP/1\.1" 200 OK'),  # the probes deploy and status sent
    "specops restart tiny                        # stop + start from the saved spec (warm compile cache)":
        (0, r"(?m)^tiny: running at http://127\.0\.0\.1:\d+ \(pid \d+, ready in \d+s"),
    "specops stop tiny                           # SIGTERM the process group, SIGKILL after --grace":
        (0, r"(?m)^tiny: (?:stopped|killed)$"),
}

# examples that cannot run here as written, and why (the tests that cover the same code instead)
ELSEWHERE: dict[str, str] = {
    "specops runbook run acceptance-collapse --deployment chat-eagle":
        "needs a deployment named chat-eagle whose acceptance collapsed (the collapse steps: tests/drift)",
    "specops completion bash --install      # writes ~/.bash_completions/specops.sh and sources it from ~/.bashrc":
        "would change the reader's own ~/.bashrc (tests/cli/test_completion.py installs it in a scratch HOME)",
    "specops --install-completion           # typer's form: installs it for the shell you are in (detected)":
        "would change the reader's own shell start-up file (tests/cli/test_completion.py, in a scratch HOME)",
    "specops deploy deploy.yaml --platform kubernetes --server-dry-run   # ... + the API server checks every object, "
    "stores none": "needs a Kubernetes API server (tests/k8s/test_real_apiserver.py, kube_apiserver)",
    "specops deploy deploy.yaml --platform kubernetes --force-conflicts  # ... taking over fields another manager "
    "changed": "needs a Kubernetes API server (tests/k8s/test_real_apiserver.py, kube_apiserver)",
    "specops deploy deploy.yaml --platform kubernetes":
        "needs a Kubernetes API server (tests/k8s/test_real_apiserver.py, kube_apiserver)",
    "specops deploy deploy.yaml --platform kubernetes --force-conflicts    # specops owns .spec.replicas again":
        "needs a Kubernetes API server with the conflict (tests/k8s/test_real_apiserver.py, kube_apiserver)",
    "specops deployment show llama70b-eagle31          # method none / the new γ, the argv":
        "needs the deployment the monitor fell back on a cluster (tests/k8s/test_real_apiserver.py, kube_apiserver)",
    "specops deploy deploy.yaml --platform kubernetes               # ... + server-side apply + wait + record":
        "needs a Kubernetes cluster (tests/k8s: emulated API)",
    "specops deploy canary.yaml --platform kubernetes --canary-of llama70b-eagle31 --replicas 1":
        "needs a Kubernetes cluster running llama70b-eagle31 (tests/k8s)",
    "specops promote llama70b-eagle31-k5      # the canary's config becomes the stable's; canary deleted":
        "needs a Kubernetes cluster with the canary (tests/k8s)",
    "specops rollback llama70b-eagle31-k5     # canary deleted; the stable serves everything":
        "needs a Kubernetes cluster with the canary (tests/k8s)",
    "specops canary watch llama70b-eagle31-k5 -n llm --prometheus-url http://prometheus.monitoring:9090":
        "needs a Kubernetes cluster with the canary and a Prometheus scraping both arms (tests/k8s/test_canary_watch.py)",
    "specops lineage import registry.json --db postgresql+psycopg://user@db/specops":
        "needs a PostgreSQL server named db (tests/registry under the postgres marker)",
    "specops monitor --once --prometheus-url http://prometheus:9090          # one cycle (cron, CronJob)":
        "needs a Prometheus reachable as http://prometheus:9090 (tests/drift, tests/metrics under prometheus)",
    "specops monitor --interval 60 --metrics-port 9108 --policy default       # the control loop":
        "runs until stopped (the loop: tests/drift with a fake clock)",
    "specops monitor --once --dry-run --deployment chat -o json               # decide, record, do nothing":
        "needs a running deployment named chat (tests/heal/test_closed_loop_engine.py, engine, long)",
    "specops tune --spec deploy.yaml --workload code --methods ngram,draft_model --gammas 1,2,3,4,6 --concurrency 1,4 "
    "--budget-minutes 60 --name tiny-cpu": "a 60-minute grid of CPU engines (tests/tune/test_engine_tune.py: 3 engines)",
    "specops tune --resume 20260101-120000-ab12                  # continue an interrupted run":
        "the reader's own run id (resume: tests/tune/test_engine_tune.py)",
    "specops tune --resume 20260101-120000-ab12 --refit          # fit + report stored points, measure nothing":
        "the reader's own run id (refit: tests/tune/test_runner.py)",
    "specops tune --model ./target --draft ./draft --dtype float32 --enforce-eager --cpus 1 --html tune.html      "
    "                                  # pinned CPU engine, plotted report":
        "a full grid of CPU engines, tens of minutes (tests/tune/test_engine_tune.py, tests/tune/test_html.py)",
    "specops tune --endpoint-for none=http://a:8000 --endpoint-for ngram-g2=http://b:8000 --methods ngram --gammas 2"
    "                              # remote engines: tune only, no redeploy":
        "needs engines at hosts a and b (tests/tune/test_remote_tune.py, engine)",
    "specops validate --checklist deploy --deployment tiny --profile cpu-tiny --window 10s":
        "needs a running deployment named tiny (a --window sample of a live /metrics: tests/cli/test_progress.py)",
    'specops gate --spec "$spec" --profile gpu-default --junit "junit/$(basename "$spec" .yaml).xml"':
        "a line of the CI workflow's loop: $spec is set by the loop, against the team's registry",
}

ALL = examples()
BY_DOC: dict[str, list[Example]] = {}
for _e in ALL:
    if not _e.synopsis and _e.command in RUNS:
        BY_DOC.setdefault(_e.doc, []).append(_e)


def _world(tmp_path: Path, doc: str) -> Path:
    """The working folder a reader of ``doc`` has: the repo's tests (tiny models) and the folders the doc names."""
    cwd = tmp_path / "work"
    cwd.mkdir()
    (cwd / "tests").symlink_to(REPO / "tests")
    shutil.copytree(TINY / "target-v1", cwd / "llama")
    (cwd / "models").mkdir()
    shutil.copytree(TINY / "target-v1", cwd / "models" / "llama-8b")
    shutil.copytree(TINY / "draft-v1", cwd / "models" / "llama-8b-eagle3")
    if doc == "kubernetes.md":
        shutil.copy(REPO / "tests" / "k8s" / "llama70b-eagle31.yaml", cwd / "deploy.yaml")
    return cwd


def _run(command: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """``command`` through bash as written, ``specops`` being this checkout's CLI."""
    script = f'specops() {{ "{sys.executable}" -m specops "$@"; }}\n{command}\n'
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
               COLUMNS="200")
    return subprocess.run(["bash", "-c", script], cwd=str(cwd), env=env, capture_output=True, text=True,
                          timeout=timeout)


def _argv(command: str) -> tuple[list[str], str | None]:
    """``command``'s arguments after ``specops`` as bash splits them (quotes, ``#`` comments), and the file
    a trailing ``> FILE`` sends its stdout to (None without one)."""
    words = shlex.split(command, comments=True)
    assert words[0] == "specops", command
    out = None
    if ">" in words:
        i = words.index(">")
        out, words = words[i + 1], words[:i] + words[i + 2:]
    return words[1:], out


def _run_inprocess(command: str, cwd: Path) -> subprocess.CompletedProcess:
    """``command`` in this process (the real entry point, tests/cli/inproc.py) in ``cwd``, with the argv and
    the stdout redirect bash would give it (``_argv``; the bash check below keeps the two the same)."""
    args, out = _argv(command)
    r = run_inprocess(*args, env={"COLUMNS": "200"}, cwd=cwd, timeout=300)
    if out is not None:
        (cwd / out).write_text(r.stdout)
        r = subprocess.CompletedProcess(r.args, r.returncode, "", r.stderr)
    return r


def _check(e: Example, r: subprocess.CompletedProcess, rc: int, pattern: str, out: str | None, cwd: Path) -> str:
    text = (cwd / out).read_text() if out and (cwd / out).is_file() else r.stdout + r.stderr
    if r.returncode != rc or not re.search(pattern, text):
        return f"{e.id}: `{e.command}` exited {r.returncode} (want {rc}), /{pattern}/ in:\n{(r.stdout + r.stderr)[-1500:]}"
    return ""


def test_every_documented_example_is_accounted_for():
    runnable = [e for e in ALL if not e.synopsis]
    unknown = [f"{e.id}: {e.command}" for e in runnable if e.command not in RUNS | ENGINE | ELSEWHERE]
    assert unknown == [], "add each to RUNS (fast), ENGINE or ELSEWHERE (with the reason)"
    stale = [c for c in RUNS | ENGINE | ELSEWHERE if c not in {e.command for e in runnable}]
    assert stale == [], "these are no longer in docs/"
    assert len(runnable) >= 40 and len(RUNS) >= 25


@pytest.mark.parametrize("doc", sorted(BY_DOC))
def test_the_examples_of_each_doc_run_as_written(doc, tmp_path):
    cwd = _world(tmp_path, doc)
    failures = []
    for e in BY_DOC[doc]:
        failures.append(_check(e, _run_inprocess(e.command, cwd), *RUNS[e.command], cwd))
    assert [f for f in failures if f] == []


@pytest.mark.costly  # bash and python -m specops
def test_deploy_pages_examples_run_through_bash_and_the_console_entry_point(tmp_path):
    """The same checks as above for deploy.md's two fast examples, but as a reader's shell runs them: bash,
    a ``> deploy.yaml`` redirect, then ``python -m specops`` reading that file."""
    cwd = _world(tmp_path, "deploy.md")
    failures = [_check(e, _run(e.command, cwd), *RUNS[e.command], cwd) for e in BY_DOC["deploy.md"]]
    assert len(BY_DOC["deploy.md"]) == 2 and [f for f in failures if f] == []


def test_bash_passes_each_example_the_argv_the_in_process_run_gets(tmp_path):
    """One bash runs every example above with ``specops`` defined as a function that records its arguments:
    the in-process runs get exactly those (``_argv``) and redirect into the files bash would. (A synopsis is no
    bash; its check runs ``specops WORDS --help`` with the plain words of its command.)"""
    log = tmp_path / "argv.log"
    cases = [e for d in sorted(BY_DOC) for e in BY_DOC[d]]
    script = f'specops() {{ printf "%s\\0" "$@" >> {shlex.quote(str(log))}; printf "\\1\\0" >> {shlex.quote(str(log))}; }}\n'
    script += "\n".join(e.command for e in cases) + "\n"
    cwd = tmp_path / "work"
    cwd.mkdir()
    r = subprocess.run(["bash", "-c", script], cwd=str(cwd), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    calls = log.read_text().split("\1\0")[:-1]
    bash = [c.split("\0")[:-1] for c in calls]
    assert len(bash) == len(cases)
    assert [(e.id, b) for e, b in zip(cases, bash, strict=True)] == [(e.id, _argv(e.command)[0]) for e in cases]
    redirected = sorted({out for e in cases if (out := _argv(e.command)[1])})
    assert redirected and sorted(p.name for p in cwd.iterdir()) == redirected


@pytest.mark.parametrize("e", [e for e in ALL if e.synopsis], ids=lambda e: e.id)
def test_every_synopsis_names_a_real_command(e, tmp_path):
    words = []
    for w in e.command.split()[1:]:
        if not re.fullmatch(r"[a-z][a-z-]*", w):
            break
        words.append(w)
    r = _run_inprocess(f"specops {' '.join(words)} --help", tmp_path)
    assert r.returncode == 0 and "Usage" in r.stdout, r.stdout + r.stderr


@pytest.mark.engine
@pytest.mark.slow
def test_the_deploy_page_block_runs_on_a_real_engine(tmp_path, engine_lock, skip_vllm_check):
    """deploy.md's block top to bottom: recommend, dry run, deploy (a real vLLM CPU engine on the spec's
    port), status, logs, restart, stop. The deploy's vLLM pre-launch check is skipped (skip_vllm_check):
    tests/engines/test_vllm_check.py is where vLLM accepts and rejects launches."""
    cwd = _world(tmp_path, "deploy.md")
    block = [e for e in ALL if e.doc == "deploy.md" and e.command in RUNS | ENGINE]
    assert [e.command in ENGINE for e in block] == [False, False] + [True] * len(ENGINE)
    failures = []
    try:
        for e in block:
            rc, pattern, out = RUNS[e.command] if e.command in RUNS else (*ENGINE[e.command], None)
            failures.append(_check(e, _run(e.command, cwd, timeout=1200), rc, pattern, out, cwd))
    finally:
        _run("specops stop tiny", cwd)
    assert [f for f in failures if f] == []
