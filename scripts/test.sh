#!/usr/bin/env bash
# The test suite: starts the services the tests need (Debian's Prometheus and PostgreSQL; installs
# them when missing), then runs pytest in two parts:
#   1. the fast selection (no engine, vLLM, service or slow test), on SPECOPS_TEST_WORKERS pytest-xdist
#      workers (default 0: one process; 2 measured slower on the shared box, docs/development.md), in a random order whose seed is printed
#      (SPECOPS_TEST_SHUFFLE=N repeats one; every test must pass whatever ran before it);
#   2. the rest (real engines, vLLM, Prometheus, promtool, PostgreSQL, slow) in one process, in file
#      order: the session's engine pool (tests/engines/pool.py) starts once there.
# The tests against a real kube-apiserver (marker kube_apiserver) are deselected here: `make test-kube`
# runs them; so are the real-engine runs of several minutes (marker long): `make test-long` runs them.
# Extra arguments go to both parts. Exits non-zero when either part fails (both always run).
set -euo pipefail
cd "$(dirname "$0")/.."
FAST="not engine and not vllm and not prometheus and not promtool and not postgres and not slow and not kube_apiserver and not long"
REST="(engine or vllm or prometheus or promtool or postgres or slow) and not kube_apiserver and not long"
SEED="${SPECOPS_TEST_SHUFFLE:-random}"
if [[ $SEED == random ]]; then SEED=$((RANDOM * 32768 + RANDOM)); fi
# scripts/test_budget.py records a tier with PYTEST_ADDOPTS=--junitxml=OUT/TIER.xml: each part writes its
# own OUT/TIER.<part>.xml (a later --junitxml wins), which the budget reads together.
junit() { if [[ ${PYTEST_ADDOPTS:-} =~ --junitxml=([^ ]+)\.xml ]]; then echo "--junitxml=${BASH_REMATCH[1]}.$1.xml"; fi; }
bash scripts/services.sh
echo "make test, part 1: the fast selection on ${SPECOPS_TEST_WORKERS:-0} workers, shuffled with seed $SEED" \
     "(repeat: SPECOPS_TEST_SHUFFLE=$SEED make test)"
rc=0
.venv/bin/python -m pytest -q -p no:cacheprovider -n "${SPECOPS_TEST_WORKERS:-0}" -m "$FAST" --shuffle="$SEED" \
    $(junit fast) "$@" || rc=$?
echo "make test, part 2: engines, vLLM, services and slow tests in one process"
.venv/bin/python -m pytest -q -m "$REST" $(junit rest) "$@" || rc=$((rc ? rc : $?))
exit "$rc"
