#!/usr/bin/env bash
# Stops the local cluster started by hack/cluster-up.sh and removes its state.
#
# Usage: hack/cluster-down.sh [DIR]
#   DIR defaults to $PORTICO_CLUSTER_DIR, else _output/cluster in the repo.
#   DIR itself is removed too unless it is not ours (no marker file).
#   kwokctl (of the binaries hack/cluster-up.sh recorded in DIR/binaries,
#   else $PORTICO_KUBE_BINARIES) stops the components.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=kwok/lib.sh
source "$ROOT/hack/kwok/lib.sh"

DIR=${1:-${PORTICO_CLUSTER_DIR:-$ROOT/_output/cluster}}
log() { echo "cluster-down: $*" >&2; }

if [ ! -d "$DIR" ]; then
  log "no cluster in $DIR"
  exit 0
fi
DIR=$(cd "$DIR" && pwd)
if [ ! -f "$DIR/$CLUSTER_MARKER" ]; then
  if [ -z "$(ls -A "$DIR")" ]; then
    rmdir "$DIR"
    exit 0
  fi
  log "$DIR is not a Portico cluster directory (no $CLUSTER_MARKER); leaving it alone"
  exit 1
fi

stop_cluster "$DIR" "$(cat "$DIR/binaries" 2>/dev/null || echo "${PORTICO_KUBE_BINARIES:-}")"
wipe_cluster "$DIR"
rmdir "$DIR" 2>/dev/null || true
log "stopped; removed $DIR"
