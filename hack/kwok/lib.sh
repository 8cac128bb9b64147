# shellcheck shell=bash
# Functions shared by hack/cluster-up.sh and hack/cluster-down.sh.
#
# A cluster directory holds a marker file (.portico-cluster), pid files in
# pids/, logs in logs/, the PKI in pki/, etcd's data in etcd/ and the
# kubeconfig. Every process is started in its own session (setsid) with the
# directory on its command line, so a pid file is only trusted when the
# process is still running, is not a zombie, and names this directory.

CLUSTER_MARKER=.portico-cluster
CLUSTER_COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

# process_running PID: true when PID exists and is not a zombie.
process_running() {
  local pid=$1 stat
  kill -0 "$pid" 2>/dev/null || return 1
  if [ -r "/proc/$pid/stat" ]; then
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [ "${stat%% *}" != Z ] || return 1
  fi
  return 0
}

# cluster_pid DIR NAME: prints the pid of component NAME of the cluster in DIR
# if it is running; fails otherwise.
cluster_pid() {
  local dir=$1 name=$2 pid
  [ -f "$dir/pids/$name.pid" ] || return 1
  pid=$(cat "$dir/pids/$name.pid" 2>/dev/null) || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  process_running "$pid" || return 1
  # Guard against pid reuse: our processes carry DIR in their arguments.
  if [ -r "/proc/$pid/cmdline" ]; then
    tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$dir/" || return 1
  fi
  echo "$pid"
}

# signal_pid SIG PID: signals PID's process group (each component leads its
# own, see start_component), or PID alone when it leads none.
signal_pid() {
  kill "-$1" -- "-$2" 2>/dev/null || kill "-$1" "$2" 2>/dev/null || true
}

# stop_cluster DIR: stops every process of the cluster in DIR and waits
# until none is left. Clients go first, then kube-apiserver, then etcd: an
# apiserver whose etcd is gone takes many seconds to shut down.
stop_cluster() {
  local dir=$1 rc=0
  stop_components "$dir" watchdog kwok kube-scheduler kube-controller-manager || rc=1
  stop_components "$dir" kube-apiserver || rc=1
  stop_components "$dir" etcd || rc=1
  return $rc
}

# stop_components DIR NAME...: SIGTERM to the named components, SIGKILL to
# those still running after PORTICO_CLUSTER_STOP_TIMEOUT seconds (default
# 15); returns once all are gone.
stop_components() {
  local dir=$1 name pid pids=() left deadline
  shift
  for name in "$@"; do
    pid=$(cluster_pid "$dir" "$name") || continue
    signal_pid TERM "$pid"
    pids+=("$pid")
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  deadline=$((SECONDS + ${PORTICO_CLUSTER_STOP_TIMEOUT:-15}))
  while :; do
    left=()
    for pid in "${pids[@]}"; do
      if process_running "$pid"; then left+=("$pid"); fi
    done
    [ ${#left[@]} -gt 0 ] || return 0
    [ $SECONDS -lt $deadline ] || break
    sleep 0.05
  done
  for pid in "${left[@]}"; do
    echo "cluster: pid $pid ignored SIGTERM; sending SIGKILL" >&2
    signal_pid KILL "$pid"
  done
  deadline=$((SECONDS + 5))
  for pid in "${left[@]}"; do
    while process_running "$pid"; do
      if [ $SECONDS -ge $deadline ]; then
        echo "cluster: pid $pid still running after SIGKILL" >&2
        return 1
      fi
      sleep 0.05
    done
  done
}

# wipe_cluster DIR: removes the contents of DIR (not DIR itself, which may
# belong to the caller, e.g. a test's temporary directory).
wipe_cluster() {
  local dir=$1
  [ -f "$dir/$CLUSTER_MARKER" ] || return 0
  rm -rf -- "${dir:?}"/* "${dir:?}/$CLUSTER_MARKER"
}
