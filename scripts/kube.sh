#!/usr/bin/env bash
# A real kube-apiserver for the `kube_apiserver` tests (used by `make test-kube` and CI).
#
#   bash scripts/kube.sh build   # build kube-apiserver v1.20.2 once per machine
#   bash scripts/kube.sh bin     # print the folder that holds the binary (builds when missing)
#
# Kubernetes v1.20.2 is built from Debian bookworm's `kubernetes` source package with Debian's Go
# (no registry ships a prebuilt kube-apiserver that this machine can reach); etcd is Debian's
# etcd-server. The binary is cached OUTSIDE the work tree, in $SPECOPS_KUBE_CACHE (default
# /var/cache/specops-kube as root, else ${XDG_CACHE_HOME:-~/.cache}/specops-kube), so only a fresh
# machine pays the build. The tests start and stop their own etcd + apiserver on free loopback ports
# (tests/k8s/apiserver.py); nothing starts kube-controller-manager, the scheduler or a kubelet, so only
# kube-apiserver is built. Cache layout: $CACHE/build.lock (one build per machine), $CACHE/v1.20.2/bin/
# kube-apiserver (an older cache may also hold kube-controller-manager: unused, harmless). The recipe and
# the 1.20 quirks: docs/kubernetes-testing.md.
set -euo pipefail

VERSION=v1.20.2
DEB_VERSION="1.20.5+really1.20.2-1.1+deb12u1"
ORIG="kubernetes_1.20.5+really1.20.2.orig.tar.gz"
if [ -n "${SPECOPS_KUBE_CACHE:-}" ]; then CACHE="$SPECOPS_KUBE_CACHE"
elif [ "$(id -u)" = 0 ]; then CACHE=/var/cache/specops-kube
else CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/specops-kube"; fi
BIN="$CACHE/$VERSION/bin"

log() { echo "kube.sh: $*" >&2; }

install_packages() {
  local need=()
  command -v go >/dev/null 2>&1 || need+=(golang-go)
  [ -d /usr/share/gocode/src/github.com/modern-go/reflect2 ] || need+=(golang-github-modern-go-reflect2-dev)
  command -v rsync >/dev/null 2>&1 || need+=(rsync)
  command -v make >/dev/null 2>&1 || need+=(make)
  command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
  command -v openssl >/dev/null 2>&1 || need+=(openssl)
  command -v curl >/dev/null 2>&1 || need+=(curl)
  [ ${#need[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ]; then
    log "missing ${need[*]} and not root. To fix: sudo apt-get install ${need[*]}"; exit 2
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

add_deb_src() {
  # A deb-src twin of the machine's own Debian source list (same mirror and suites).
  local src=/etc/apt/sources.list.d/debian.sources twin=/etc/apt/sources.list.d/specops-deb-src.sources
  [ -f "$twin" ] && return 0
  if [ ! -f "$src" ]; then
    log "no $src to copy a deb-src entry from. To fix: add a deb-src line for bookworm main"; exit 2
  fi
  sed 's/^Types: deb$/Types: deb-src/' "$src" >"$twin"
}

build() {
  if [ -x "$BIN/kube-apiserver" ]; then
    log "cached: $BIN"; return 0
  fi
  if [ "$(id -u)" != 0 ] && ! command -v go >/dev/null 2>&1; then
    log "Go is missing and not root. To fix: sudo apt-get install golang-go etcd-server"; exit 2
  fi
  mkdir -p "$CACHE"
  exec 9>"$CACHE/build.lock"
  flock 9                      # one build per machine even when several checkouts ask at once
  if [ -x "$BIN/kube-apiserver" ]; then
    log "cached: $BIN"; return 0
  fi
  local start=$SECONDS
  if [ "$(id -u)" = 0 ]; then
    add_deb_src
    apt-get update -qq >/dev/null
  fi
  install_packages
  local work="$CACHE/build"
  rm -rf "$work"; mkdir -p "$work"
  (cd "$work" && apt-get source -qq --download-only "kubernetes=$DEB_VERSION" >/dev/null)
  mkdir "$work/src"
  tar -xzf "$work/$ORIG" -C "$work/src" --strip-components=1
  cd "$work/src"
  # The vendored reflect2 v1.0.1 segfaults under Go >= 1.18 (runtime.mapiterinit): use Debian's 1.0.2.
  rm -f vendor/github.com/modern-go/reflect2/*.go vendor/github.com/modern-go/reflect2/*.s
  cp /usr/share/gocode/src/github.com/modern-go/reflect2/*.go vendor/github.com/modern-go/reflect2/
  cp /usr/share/gocode/src/github.com/modern-go/reflect2/*.s vendor/github.com/modern-go/reflect2/ 2>/dev/null || true
  # GOPATH mode as Debian's rules build it (module mode fails: "updates to go.mod needed").
  mkdir -p .go/src/k8s.io && ln -sfn ../../.. .go/src/k8s.io/kubernetes
  export GOPATH="$PWD/.go" KUBE_GIT_VERSION="$VERSION" KUBE_GIT_TREE_STATE=archive GOTOOLCHAIN=local
  export GOCACHE="$work/go-build"
  make WHAT=cmd/kube-apiserver >"$work/make-apiserver.log" 2>&1 || {
    log "building kube-apiserver failed; last lines of $work/make-apiserver.log:"; tail -30 "$work/make-apiserver.log" >&2; exit 1; }
  mkdir -p "$BIN.tmp"
  cp _output/bin/kube-apiserver "$BIN.tmp/"
  rm -rf "$BIN"; mv "$BIN.tmp" "$BIN"
  cd "$CACHE"; rm -rf "$work"          # ≈ 1.8 GB of sources and objects; the binary is what we keep
  log "built $VERSION in $((SECONDS - start)) s: $BIN"
}

case "${1:-}" in
  build) build ;;
  bin) build; echo "$BIN" ;;
  *) echo "usage: bash scripts/kube.sh build|bin" >&2; exit 2 ;;
esac
