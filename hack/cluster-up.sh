#!/usr/bin/env bash
# Starts a local Kubernetes cluster without containers, on loopback only:
# `kwokctl create cluster --runtime binary` (sigs.k8s.io/kwok v0.8.0) runs
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok,
# which simulates the kubelet of fake Nodes (Pods get scheduled, marked
# Running/Ready and given IPs; EndpointSlices follow) and serves their
# kubelet API on loopback (Pod logs from the files that kwok Logs objects
# name). Every binary, kwokctl and kubectl (which kwokctl calls) included,
# comes from hack/kube-binaries.sh (built once into $HOME/.cache/portico
# from the Go module proxy): kwokctl takes local paths for its binaries and
# downloads nothing. The components' flags beyond kwokctl's are in
# hack/kwok/kwokctl.yaml; kwok's Stages are listed below.
#
# Usage: hack/cluster-up.sh [DIR]
#   DIR (default $PORTICO_CLUSTER_DIR, else _output/cluster in the repo) is
#   kwokctl's work directory, the cluster being DIR/clusters/portico (see
#   hack/kwok/lib.sh); DIR/kubeconfig (cluster-admin) links to its
#   kubeconfig, and that path is the only thing printed on stdout.
#   Running it again while the cluster is up does nothing; if a component
#   has died the cluster is restarted from scratch. A failed start stops
#   whatever it started and removes the state, keeping the components' logs
#   in $PORTICO_CLUSTER_FAILED_LOGS (default _output/cluster-failed in the
#   repo)/<time>-<pid>/. Stop with hack/cluster-down.sh.
#
# Ports: free ones, picked by kwokctl (it tries 32767 and down, below the
# kernel's ephemeral range, and takes the first it can bind). Two kwokctl
# runs at once would pick the same ones, so starts are serialized with
# flock(1) on $PORTICO_CLUSTER_LOCK (default /tmp/portico-cluster-up.lock)
# until every component has bound its ports (the cluster is ready).
#
# Environment:
#   PORTICO_APISERVER_PORT, PORTICO_ETCD_PORT,
#   PORTICO_KUBELET_PORT     fixed ports (kwokctl's flags); the last is kwok's
#                            kubelet server (127.0.0.1). etcd's peer port is
#                            always kwokctl's pick: it has no flag for it.
#   PORTICO_KWOK_NODES       number of fake Nodes (default 1): kwok-node-0, ...
#   PORTICO_KWOK_NODE_IP     their InternalIP (default 127.0.0.1, where kwok's
#                            kubelet server listens; Pods get IPs from
#                            10.244.0.0/16, Services 10.96.0.0/16)
#   PORTICO_CLUSTER_TIMEOUT  seconds to wait for readiness (default 120)
#   PORTICO_KUBE_BINARIES    binary directory (default: hack/kube-binaries.sh --print-dir)
#   PORTICO_APISERVER_EXTRA_ARGS
#                            extra kube-apiserver flags (--name=value), split
#                            on whitespace (e.g. the audit log flags of
#                            test/bench)
#   PORTICO_CLUSTER_OWNER_PID
#                            if set, a watchdog runs hack/cluster-down.sh DIR
#                            once that process is gone (used by test/e2e so
#                            a killed test run leaves nothing behind)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=kwok/lib.sh
source "$ROOT/hack/kwok/lib.sh"

DIR=${1:-${PORTICO_CLUSTER_DIR:-$ROOT/_output/cluster}}
TIMEOUT=${PORTICO_CLUSTER_TIMEOUT:-120}
NODES=${PORTICO_KWOK_NODES:-1}
log() { echo "cluster-up: $*" >&2; }
die() { log "$*"; exit 1; }

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
KUBECONFIG_PATH=$DIR/kubeconfig

BINS=${PORTICO_KUBE_BINARIES:-$("$ROOT/hack/kube-binaries.sh" --print-dir)}
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kwok kwokctl kubectl; do
  [ -x "$BINS/$b" ] || die "$BINS/$b missing (run hack/kube-binaries.sh)"
done

kube() { "$BINS/kubectl" --kubeconfig="$KUBECONFIG_PATH" --request-timeout=5s "$@"; }

cluster_healthy() {
  local name
  for name in "${CLUSTER_COMPONENTS[@]}"; do
    component_pid "$DIR" "$name" >/dev/null || return 1
  done
  kube get --raw /readyz >/dev/null 2>&1
}

if [ -f "$DIR/$CLUSTER_MARKER" ]; then
  if cluster_healthy; then
    log "already running in $DIR"
    echo "$KUBECONFIG_PATH"
    exit 0
  fi
  log "stale cluster in $DIR (a component is not running): starting afresh"
  stop_cluster "$DIR" "$(cat "$DIR/binaries" 2>/dev/null || echo "$BINS")"
  wipe_cluster "$DIR"
elif [ -n "$(ls -A "$DIR")" ]; then
  die "$DIR is not empty and not a Portico cluster directory"
fi

start_time=$SECONDS
ok=0
cleanup() {
  [ $ok = 1 ] && return
  log "start failed; stopping what was started and removing $DIR's contents"
  local f keep
  [ -z "${kwokctl_pid:-}" ] || kill "$kwokctl_pid" 2>/dev/null || true
  for f in "$DIR"/logs/*.log "$DIR/kwokctl.log"; do
    [ -s "$f" ] || continue
    echo "----- last lines of $(basename "$f") -----" >&2
    tail -n 15 "$f" >&2
  done
  # The whole logs outlive the state (often a caller's temporary directory).
  keep=${PORTICO_CLUSTER_FAILED_LOGS:-$ROOT/_output/cluster-failed}/$(date +%Y%m%d-%H%M%S)-$$
  if compgen -G "$DIR/logs/*.log" >/dev/null && mkdir -p "$keep" && cp "$DIR"/logs/*.log "$keep"/; then
    cp "$DIR/kwokctl.log" "$keep"/ 2>/dev/null || true
    log "the components' logs are kept in $keep"
  fi
  stop_cluster "$DIR" "$BINS" || true
  wipe_cluster "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

touch "$DIR/$CLUSTER_MARKER"
echo "$BINS" >"$DIR/binaries" # for hack/cluster-down.sh
ln -s "clusters/$CLUSTER_NAME/kubeconfig.yaml" "$DIR/kubeconfig"
ln -s "clusters/$CLUSTER_NAME/pids" "$DIR/pids"
ln -s "clusters/$CLUSTER_NAME/logs" "$DIR/logs"

# kwok's behaviour comes from Stage objects: node-initialize (Node Ready,
# addresses, capacity) and pod-complete (Job Pods finish) from kwok's
# module; pod-ready (scheduled Pods Running+Ready with an IP) and
# pod-delete (removes terminating Pods, as no kubelet does) from
# hack/kwok-stages, which leave the Pods annotated
# dataplane.portico.dev/kubelet to the local data plane: Running but not
# Ready until their probes pass, removed at the end of their grace period
# unless the data plane removes them first. Node heartbeats are kwok's
# node Leases. kwokctl hands kwok the Stages of its --config files.
configs=(--config="$ROOT/hack/kwok/kwokctl.yaml")
for s in node-initialize pod-complete; do
  [ -f "$BINS/kwok-stages/$s.yaml" ] || die "$BINS/kwok-stages/$s.yaml missing (rebuild kwok with hack/kube-binaries.sh)"
  configs+=(--config="$BINS/kwok-stages/$s.yaml")
done
for s in pod-ready pod-ready-kubelet pod-delete pod-delete-kubelet; do
  configs+=(--config="$ROOT/hack/kwok-stages/$s.yaml")
done

create=(create cluster
  --kubeconfig= # leave ~/.kube/config alone
  --timeout="${TIMEOUT}s"
  --etcd-binary="$BINS/etcd"
  --kube-apiserver-binary="$BINS/kube-apiserver"
  --kube-controller-manager-binary="$BINS/kube-controller-manager"
  --kube-scheduler-binary="$BINS/kube-scheduler"
  --kwok-controller-binary="$BINS/kwok")
[ -z "${PORTICO_APISERVER_PORT:-}" ] || create+=(--kube-apiserver-port="$PORTICO_APISERVER_PORT")
[ -z "${PORTICO_ETCD_PORT:-}" ] || create+=(--etcd-port="$PORTICO_ETCD_PORT")
[ -z "${PORTICO_KUBELET_PORT:-}" ] || create+=(--controller-port="$PORTICO_KUBELET_PORT")
[ -z "${PORTICO_KWOK_NODE_IP:-}" ] || create+=(--extra-args="kwok-controller=node-ip=$PORTICO_KWOK_NODE_IP")
read -r -a apiserver_extra_args <<<"${PORTICO_APISERVER_EXTRA_ARGS:-}"
for a in ${apiserver_extra_args[@]+"${apiserver_extra_args[@]}"}; do
  case "$a" in
    --*=*) a=${a#--} && create+=(--extra-args="kube-apiserver=${a%%=*}=${a#*=}") ;;
    --*) create+=(--extra-args="kube-apiserver=${a#--}=true") ;;
    *) die "PORTICO_APISERVER_EXTRA_ARGS: $a is not a --name=value flag" ;;
  esac
done

lock=${PORTICO_CLUSTER_LOCK:-/tmp/portico-cluster-up.lock}
{ [ -e "$lock" ] || : >>"$lock"; } 2>/dev/null || true
if command -v flock >/dev/null && [ -r "$lock" ]; then
  exec 9<"$lock" # not inherited by kwokctl (run_kwokctl), or the components would hold the lock
  flock -w "$TIMEOUT" 9 || die "another cluster start held $lock for ${TIMEOUT}s"
else
  log "no lock on $lock (flock missing or file unusable): a concurrent start could pick the same ports"
fi

# wait_until WHAT COMMAND...: polls COMMAND until it succeeds, failing fast
# when a component kwokctl started has exited, or after TIMEOUT seconds.
deadline=$((SECONDS + TIMEOUT))
wait_until() {
  local what=$1 name
  shift
  log "waiting for $what"
  until "$@" >/dev/null 2>&1; do
    for name in "${CLUSTER_COMPONENTS[@]}"; do
      [ -f "$DIR/pids/$name.pid" ] || continue
      component_pid "$DIR" "$name" >/dev/null || die "$name exited (see $DIR/logs/$name.log)"
    done
    [ $SECONDS -lt $deadline ] || { "$@" >&2 || true; die "timed out after ${TIMEOUT}s waiting for $what"; }
    sleep 0.2
  done
}
exited() { ! process_running "$1"; }
node_ready() {
  [ "$(kube get node "$1" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

# kwokctl waits for the apiserver (up to TIMEOUT) without watching the
# components: it runs in the background while wait_until does.
run_kwokctl "$DIR" "$BINS" "${configs[@]}" "${create[@]}" &
kwokctl_pid=$!
wait_until "kwokctl create cluster (output in $DIR/kwokctl.log)" exited "$kwokctl_pid"
wait "$kwokctl_pid" || die "kwokctl create cluster failed"
kwokctl_pid=
for name in "${CLUSTER_COMPONENTS[@]}"; do
  component_pid "$DIR" "$name" >/dev/null || die "$name not running (see $DIR/logs/$name.log)"
done
wait_until "kube-apiserver /readyz" kube get --raw /readyz
# The Nodes, from the template in hack/kwok/kwokctl.yaml.
run_kwokctl "$DIR" "$BINS" "${configs[0]}" scale node kwok-node --replicas="$NODES" --serial-length=1 ||
  die "kwokctl scale node failed"
for ((i = 0; i < NODES; i++)); do
  wait_until "Node kwok-node-$i to be Ready (kwok)" node_ready "kwok-node-$i"
done
# Both run with leader election (the default): holding their Lease proves
# they are up and talking to the apiserver.
wait_until "kube-controller-manager" kube get -n kube-system lease/kube-controller-manager
wait_until "kube-scheduler" kube get -n kube-system lease/kube-scheduler
wait_until "the default ServiceAccount" kube get -n default serviceaccount/default
exec 9<&- # the ports are bound: another start may pick its own

if [ -n "${PORTICO_CLUSTER_OWNER_PID:-}" ]; then
  # The watchdog forgets its own pid file before it turns into
  # cluster-down, so cluster-down does not stop itself.
  # shellcheck disable=SC2016
  setsid bash -c '
    echo $$ >"$1/watchdog.pid"
    while kill -0 "$0" 2>/dev/null && [ -f "$1/watchdog.pid" ]; do sleep 1; done
    [ -f "$1/watchdog.pid" ] || exit 0
    echo "owner process $0 is gone: stopping the cluster"
    rm -f "$1/watchdog.pid"
    exec "$2" "$1"' "$PORTICO_CLUSTER_OWNER_PID" "$DIR/" "$ROOT/hack/cluster-down.sh" \
    </dev/null >>"$DIR/logs/watchdog.log" 2>&1 &
  wait_until "the watchdog" pid_of "$DIR" "$DIR/watchdog.pid"
fi

ok=1
server=$(kube config view -o 'jsonpath={.clusters[0].cluster.server}')
kubelet=$(kube get node kwok-node-0 -o 'jsonpath={.status.daemonEndpoints.kubeletEndpoint.Port}')
log "up in $((SECONDS - start_time))s: apiserver $server, $NODES kwok node(s) (kubelet port $kubelet), state in $DIR"
log "export KUBECONFIG=$KUBECONFIG_PATH"
echo "$KUBECONFIG_PATH"
