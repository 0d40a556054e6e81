#!/usr/bin/env bash
# The test suite: starts the services the tests need (Debian's Prometheus and PostgreSQL; installs
# them when missing), then runs pytest in two parts:
#   1. every test that needs no vLLM engine or vLLM package (the fast selection, and the Prometheus, promtool,
#      PostgreSQL and slow tests), on SPECOPS_TEST_WORKERS pytest-xdist workers (default 0: one process; 2
#      measured slower on the shared box, docs/development.md), in a random order whose seed is printed
#      (SPECOPS_TEST_SHUFFLE=N repeats one; every test must pass whatever ran before it);
#   2. the real-engine and vLLM tests in one process, in file order: the session's engine pool
#      (tests/engines/pool.py) starts once there, and the engine lock serialises their starts, so part 2 is
#      make test's critical path: the service and slow tests without an engine (≈ 150 s) ride in part 1.
# The tests against a real kube-apiserver (marker kube_apiserver) are deselected here: `make test-kube`
# runs them; so are the real-engine runs of several minutes (marker long): `make test-long` runs them.
# The two parts run concurrently, each printed whole when it ends (the seed first, before either).
# Extra arguments go to both parts. Exits non-zero when either part fails (both always run).
set -euo pipefail
cd "$(dirname "$0")/.."
NOENGINE="not engine and not vllm and not kube_apiserver and not long"
ENGINE="(engine or vllm) and not kube_apiserver and not long"
SEED="${SPECOPS_TEST_SHUFFLE:-random}"
if [[ $SEED == random ]]; then SEED=$((RANDOM * 32768 + RANDOM)); fi
# scripts/test_budget.py records a tier with PYTEST_ADDOPTS=--junitxml=OUT/TIER.xml: each part writes its
# own OUT/TIER.<part>.xml (a later --junitxml wins), which the budget reads together.
junit() { if [[ ${PYTEST_ADDOPTS:-} =~ --junitxml=([^ ]+)\.xml ]]; then echo "--junitxml=${BASH_REMATCH[1]}.$1.xml"; fi; }
bash scripts/services.sh
# The two parts run side by side (part 1 is one Python process on one core; part 2 mostly waits for its
# engine children), each into its own log, printed whole when that part ends so the output stays readable.
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/specops-test.XXXXXX")
trap 'kill -- $(jobs -p) 2>/dev/null || true; rm -rf "$LOGS"' EXIT
echo "make test, part 1: every test without an engine on ${SPECOPS_TEST_WORKERS:-0} workers, shuffled with seed $SEED" \
     "(repeat: SPECOPS_TEST_SHUFFLE=$SEED make test)"
echo "make test, part 2: the engine and vLLM tests in one process (beside part 1)"
START=$SECONDS
.venv/bin/python -m pytest -q -p no:cacheprovider -n "${SPECOPS_TEST_WORKERS:-0}" -m "$NOENGINE" --shuffle="$SEED" \
    $(junit fast) "$@" >"$LOGS/1" 2>&1 &
declare -A PART=([$!]=1)
.venv/bin/python -m pytest -q -m "$ENGINE" $(junit rest) "$@" >"$LOGS/2" 2>&1 &
PART[$!]=2
rc=0
while ((${#PART[@]})); do
    st=0
    wait -n -p done "${!PART[@]}" || st=$?
    n=${PART[$done]}
    unset "PART[$done]"
    echo "== make test, part $n ended (exit $st) after $((SECONDS - START)) s; its output:"
    cat "$LOGS/$n"
    if ((st && !rc)); then rc=$st; fi
done
exit "$rc"
