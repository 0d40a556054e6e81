#!/usr/bin/env bash
# The test suite: starts the services the tests need (Debian's Prometheus and PostgreSQL; installs
# them when missing), then runs pytest. Used by `make test` and CI. The tests against a real
# kube-apiserver (marker kube_apiserver) are deselected here: `make test-kube` runs them; so are the
# real-engine runs of several minutes (marker long): `make test-long` runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/services.sh
exec .venv/bin/python -m pytest -q -m "not kube_apiserver and not long" "$@"
