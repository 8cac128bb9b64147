#!/usr/bin/env bash
# Starts a local Kubernetes cluster without containers, on loopback only:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok,
# which simulates the kubelet of fake Nodes (Pods get scheduled, marked
# Running/Ready and given IPs; EndpointSlices follow) and serves their
# kubelet API on loopback (Pod logs from the files that kwok Logs objects
# name). Binaries come from hack/kube-binaries.sh (built once into
# $HOME/.cache/portico).
#
# Usage: hack/cluster-up.sh [DIR]
#   DIR (default $PORTICO_CLUSTER_DIR, else _output/cluster in the repo) holds
#   pki/, etcd/, logs/, pids/ and DIR/kubeconfig (cluster-admin). The
#   kubeconfig path is the only thing printed on stdout.
#   Running it again while the cluster is up does nothing; if a component
#   has died the cluster is restarted from scratch. A failed start stops
#   whatever it started and removes the state, keeping the components' logs
#   in $PORTICO_CLUSTER_FAILED_LOGS (default _output/cluster-failed in the
#   repo)/<time>-<pid>/. Stop with hack/cluster-down.sh.
#
# Environment:
#   PORTICO_APISERVER_PORT, PORTICO_ETCD_PORT, PORTICO_ETCD_PEER_PORT,
#   PORTICO_KUBELET_PORT     fixed ports (default: free ports picked at start);
#                            the last is kwok's kubelet server (127.0.0.1)
#   PORTICO_KWOK_NODES       number of fake Nodes (default 1): kwok-node-0, ...
#   PORTICO_KWOK_NODE_IP     their InternalIP (default 127.0.0.1, where kwok's
#                            kubelet server listens; Pods get IPs from
#                            10.244.0.0/16, Services 10.96.0.0/16)
#   PORTICO_CLUSTER_TIMEOUT  seconds to wait for readiness (default 120)
#   PORTICO_KUBE_BINARIES    binary directory (default: hack/kube-binaries.sh --print-dir)
#   PORTICO_APISERVER_EXTRA_ARGS
#                            extra kube-apiserver flags, split on whitespace
#                            (e.g. the audit log flags of test/bench)
#   PORTICO_CLUSTER_OWNER_PID
#                            if set, a watchdog runs hack/cluster-down.sh DIR
#                            once that process is gone (used by test/e2e so
#                            a killed test run leaves nothing behind)
set -euo pipefail
export GOTOOLCHAIN=go1.27.3 # go.mod needs Go 1.27: fetched from the Go module proxy

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=kwok/lib.sh
source "$ROOT/hack/kwok/lib.sh"

DIR=${1:-${PORTICO_CLUSTER_DIR:-$ROOT/_output/cluster}}
TIMEOUT=${PORTICO_CLUSTER_TIMEOUT:-120}
NODES=${PORTICO_KWOK_NODES:-1}
# The fake Nodes' InternalIP (and the Pods' hostIP): the kube-apiserver
# reaches their kubelet (kwok's server) there for Pod logs.
NODE_IP=${PORTICO_KWOK_NODE_IP:-127.0.0.1}
log() { echo "cluster-up: $*" >&2; }
die() { log "$*"; exit 1; }

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
HELPER=$DIR/bin/portico-cluster

cluster_healthy() {
  local name
  for name in "${CLUSTER_COMPONENTS[@]}"; do
    cluster_pid "$DIR" "$name" >/dev/null || return 1
  done
  [ -x "$HELPER" ] && "$HELPER" readyz "$DIR" 2>/dev/null
}

if [ -f "$DIR/$CLUSTER_MARKER" ]; then
  if cluster_healthy; then
    log "already running in $DIR"
    echo "$DIR/kubeconfig"
    exit 0
  fi
  log "stale cluster in $DIR (a component is not running): starting afresh"
  stop_cluster "$DIR"
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
  for f in "$DIR"/logs/*.log; do
    [ -s "$f" ] || continue
    echo "----- last lines of $(basename "$f") -----" >&2
    tail -n 15 "$f" >&2
  done
  # The whole logs outlive the state (often a caller's temporary directory).
  keep=${PORTICO_CLUSTER_FAILED_LOGS:-$ROOT/_output/cluster-failed}/$(date +%Y%m%d-%H%M%S)-$$
  if compgen -G "$DIR/logs/*.log" >/dev/null && mkdir -p "$keep" && cp "$DIR"/logs/*.log "$keep"/; then
    log "the components' logs are kept in $keep"
  fi
  stop_cluster "$DIR" || true
  wipe_cluster "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

touch "$DIR/$CLUSTER_MARKER"
mkdir -p "$DIR/bin" "$DIR/pids" "$DIR/logs" "$DIR/etcd"
chmod 700 "$DIR/etcd"

BINS=${PORTICO_KUBE_BINARIES:-$("$ROOT/hack/kube-binaries.sh" --print-dir)}
for b in "${CLUSTER_COMPONENTS[@]}"; do
  [ -x "$BINS/$b" ] || die "$BINS/$b missing (run hack/kube-binaries.sh)"
done
# kwok's behaviour comes from Stage objects: node-initialize (Node Ready,
# addresses, capacity) and pod-complete (Job Pods finish) from kwok's
# module; pod-ready (scheduled Pods Running+Ready with an IP) and
# pod-delete (removes terminating Pods, as no kubelet does) from
# hack/kwok-stages, which leave the Pods annotated
# dataplane.portico.dev/kubelet to the local data plane: Running but not
# Ready until their probes pass, removed at the end of their grace period
# unless the data plane removes them first. Node heartbeats are kwok's
# node Leases.
kwok_configs=()
for s in node-initialize pod-complete; do
  [ -f "$BINS/kwok-stages/$s.yaml" ] || die "$BINS/kwok-stages/$s.yaml missing (rebuild kwok with hack/kube-binaries.sh)"
  kwok_configs+=("--config=$BINS/kwok-stages/$s.yaml")
done
for s in pod-ready pod-ready-kubelet pod-delete pod-delete-kubelet; do
  kwok_configs+=("--config=$ROOT/hack/kwok-stages/$s.yaml")
done

(cd "$ROOT" && go build -o "$HELPER" ./hack/kwok) || die "building the cluster helper (hack/kwok) failed"

read -r free1 free2 free3 free4 <<<"$("$HELPER" ports 4)"
ETCD_PORT=${PORTICO_ETCD_PORT:-$free1}
ETCD_PEER_PORT=${PORTICO_ETCD_PEER_PORT:-$free2}
API_PORT=${PORTICO_APISERVER_PORT:-$free3}
KUBELET_PORT=${PORTICO_KUBELET_PORT:-$free4}
SERVER=https://127.0.0.1:$API_PORT
"$HELPER" pki "$DIR" "$SERVER"
KUBECONFIG_PATH=$DIR/kubeconfig
PKI=$DIR/pki
cat >"$DIR/cluster.env" <<EOF
APISERVER=$SERVER
ETCD=http://127.0.0.1:$ETCD_PORT
KUBECONFIG=$KUBECONFIG_PATH
EOF

# start_component NAME BINARY ARGS...: runs it in the background in its own
# session, detached from our stdio (a caller reading our output must not
# wait for the cluster to exit).
start_component() {
  local name=$1
  shift
  if command -v setsid >/dev/null; then
    setsid "$@" </dev/null >"$DIR/logs/$name.log" 2>&1 &
  else
    "$@" </dev/null >"$DIR/logs/$name.log" 2>&1 &
  fi
  local pid=$! i
  echo "$pid" >"$DIR/pids/$name.pid"
  # Until the child has exec'd, /proc/PID/cmdline is this shell's, which
  # cluster_pid (guarding against pid reuse by looking for $DIR/ in it)
  # would take for an exited component: wait for the exec (or the exit).
  for ((i = 0; i < 200; i++)); do
    [ -r "/proc/$pid/cmdline" ] || break
    tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$DIR/" && break
    sleep 0.05
  done
}

# wait_until WHAT COMMAND...: polls COMMAND until it succeeds, failing fast
# when a started component has exited or after TIMEOUT seconds. With
# $SOFT naming a component, that one exiting makes it return 1 instead.
deadline=$((SECONDS + TIMEOUT))
SOFT=
wait_until() {
  local what=$1 name
  shift
  log "waiting for $what"
  until "$@" 2>/dev/null; do
    for name in "$DIR"/pids/*.pid; do
      name=$(basename "$name" .pid)
      cluster_pid "$DIR" "$name" >/dev/null && continue
      [ "$name" = "$SOFT" ] && return 1
      die "$name exited (see $DIR/logs/$name.log)"
    done
    [ $SECONDS -lt $deadline ] || { "$@" || true; die "timed out after ${TIMEOUT}s waiting for $what"; }
    sleep 0.2
  done
}

start_component etcd "$BINS/etcd" \
  --name=node0 \
  --data-dir="$DIR/etcd" \
  --listen-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster="node0=http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster-state=new \
  --auto-compaction-retention=1 \
  --unsafe-no-fsync \
  --log-level=warn

# The aggregation layer is on (front-proxy certificates, routing to an
# APIService's endpoints rather than its ClusterIP, which nothing routes
# here): a test registers its own metrics.k8s.io (internal/testenv/metricsapi)
# and the HorizontalPodAutoscaler controller, on a 2 s sync with a 10 s
# downscale stabilization, acts on it.
read -r -a apiserver_extra_args <<<"${PORTICO_APISERVER_EXTRA_ARGS:-}"
start_component kube-apiserver "$BINS/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --bind-address=127.0.0.1 \
  --advertise-address=127.0.0.1 \
  --endpoint-reconciler-type=none \
  --secure-port="$API_PORT" \
  --tls-cert-file="$PKI/apiserver.crt" \
  --tls-private-key-file="$PKI/apiserver.key" \
  --client-ca-file="$PKI/ca.crt" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$PKI/sa.pub" \
  --service-account-signing-key-file="$PKI/sa.key" \
  --service-cluster-ip-range=10.96.0.0/16 \
  --authorization-mode=Node,RBAC \
  --kubelet-preferred-address-types=InternalIP \
  --allow-privileged=true \
  --requestheader-client-ca-file="$PKI/front-proxy-ca.crt" \
  --requestheader-allowed-names=front-proxy-client \
  --requestheader-username-headers=X-Remote-User \
  --requestheader-group-headers=X-Remote-Group \
  --requestheader-extra-headers-prefix=X-Remote-Extra- \
  --proxy-client-cert-file="$PKI/front-proxy-client.crt" \
  --proxy-client-key-file="$PKI/front-proxy-client.key" \
  --enable-aggregator-routing=true \
  --profiling=false \
  ${apiserver_extra_args[@]+"${apiserver_extra_args[@]}"}

wait_until "kube-apiserver /readyz at $SERVER" "$HELPER" readyz "$DIR"

# One instance each, with leader election (its Lease proves it is up, see
# below) on long timings: with the defaults (renew within 10s) one renewal
# missed on a loaded machine makes it exit, leaving the cluster without
# controllers.
start_component kube-controller-manager "$BINS/kube-controller-manager" \
  --kubeconfig="$KUBECONFIG_PATH" \
  --leader-elect-lease-duration=120s --leader-elect-renew-deadline=100s --leader-elect-retry-period=2s \
  --secure-port=0 \
  --controllers='*,-serviceaccount-token' \
  --use-service-account-credentials=false \
  --service-account-private-key-file="$PKI/sa.key" \
  --root-ca-file="$PKI/ca.crt" \
  --cluster-signing-cert-file="$PKI/ca.crt" \
  --cluster-signing-key-file="$PKI/ca.key" \
  --kube-api-qps=100 --kube-api-burst=200 \
  --horizontal-pod-autoscaler-sync-period=2s \
  --horizontal-pod-autoscaler-downscale-stabilization=10s \
  --profiling=false

start_component kube-scheduler "$BINS/kube-scheduler" \
  --kubeconfig="$KUBECONFIG_PATH" \
  --leader-elect-lease-duration=120s --leader-elect-renew-deadline=100s --leader-elect-retry-period=2s \
  --secure-port=0 \
  --kube-api-qps=100 --kube-api-burst=200 \
  --profiling=false

# kwok builds its patch schemas from the apiserver's OpenAPI v3 at start
# and exits if that is not served yet; its Logs resource must be served
# before it watches it.
wait_until "the OpenAPI v3 of core/v1" "$HELPER" exists "$DIR" /openapi/v3/api/v1
"$HELPER" logs-crd "$DIR" || die "creating kwok's Logs CRD failed"
wait_until "kwok's Logs resource" "$HELPER" exists "$DIR" /apis/kwok.x-k8s.io/v1alpha1/logs

# kwok_up: true once every fake Node exists and kwok has made it Ready;
# false if kwok exits first.
kwok_up() {
  local i
  SOFT=kwok
  for ((i = 0; i < NODES; i++)); do
    wait_until "fake Node kwok-node-$i to be created" "$HELPER" node "$DIR" "kwok-node-$i" || { SOFT=; return 1; }
  done
  for ((i = 0; i < NODES; i++)); do
    wait_until "Node kwok-node-$i to be Ready (kwok)" "$HELPER" node-ready "$DIR" "kwok-node-$i" || { SOFT=; return 1; }
  done
  SOFT=
}

# kwok, with its kubelet server (Pod logs) on 127.0.0.1:KUBELET_PORT. A
# kwok that exits before its Nodes are Ready (another process took the
# port between the pick and the bind, ...) is started again on a new port,
# twice at most; each attempt's log is kept.
for ((attempt = 1; ; attempt++)); do
  start_component kwok "$BINS/kwok" \
    --kubeconfig="$KUBECONFIG_PATH" \
    "${kwok_configs[@]}" \
    --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --node-lease-duration-seconds=40 \
    --node-ip="$NODE_IP" \
    --node-port="$KUBELET_PORT" \
    --server-address="127.0.0.1:$KUBELET_PORT" \
    --enable-crds=Logs \
    --cidr=10.244.0.0/16
  kwok_up && break
  cp "$DIR/logs/kwok.log" "$DIR/logs/kwok-attempt$attempt.log"
  [ "$attempt" -lt 3 ] || die "kwok exited $attempt times (see $DIR/logs/kwok-attempt*.log)"
  log "kwok exited (attempt $attempt), last lines of its log:"
  tail -n 5 "$DIR/logs/kwok.log" >&2
  [ -n "${PORTICO_KUBELET_PORT:-}" ] || KUBELET_PORT=$("$HELPER" ports 1)
done
# Both run with leader election (the default): holding their Lease proves
# they are up and talking to the apiserver.
wait_until "kube-controller-manager" "$HELPER" exists "$DIR" \
  /apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager
wait_until "kube-scheduler" "$HELPER" exists "$DIR" \
  /apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler
wait_until "the default ServiceAccount" "$HELPER" exists "$DIR" \
  /api/v1/namespaces/default/serviceaccounts/default

if [ -n "${PORTICO_CLUSTER_OWNER_PID:-}" ]; then
  # The watchdog forgets its own pid file before it turns into
  # cluster-down, so cluster-down does not stop itself.
  # shellcheck disable=SC2016
  start_component watchdog bash -c '
    while kill -0 "$0" 2>/dev/null && [ -f "$1/pids/watchdog.pid" ]; do sleep 1; done
    [ -f "$1/pids/watchdog.pid" ] || exit 0
    echo "owner process $0 is gone: stopping the cluster"
    rm -f "$1/pids/watchdog.pid"
    exec "$2" "$1"' "$PORTICO_CLUSTER_OWNER_PID" "$DIR/" "$ROOT/hack/cluster-down.sh"
fi

ok=1
log "up in $((SECONDS - start_time))s: apiserver $SERVER, $NODES kwok node(s) (kubelet 127.0.0.1:$KUBELET_PORT), state in $DIR"
log "export KUBECONFIG=$KUBECONFIG_PATH"
echo "$KUBECONFIG_PATH"
