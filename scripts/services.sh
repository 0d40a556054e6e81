#!/usr/bin/env bash
# Install (if missing) the real services the tests use: Prometheus and PostgreSQL (Debian packages),
# and headless Chromium for the HTML report screenshot.
# The tests start and stop their own server instances on loopback.
set -euo pipefail
need=()
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /usr/lib/postgresql ] || need+=(postgresql)
command -v chromium >/dev/null 2>&1 || need+=(chromium)   # HTML report screenshot test
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "services.sh: missing ${need[*]} and not root; tests that need them will fail" >&2
  fi
fi
