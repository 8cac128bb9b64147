# shellcheck shell=bash
# Functions shared by hack/cluster-up.sh and hack/cluster-down.sh.
#
# A cluster directory DIR is kwokctl's work directory (KWOK_WORKDIR): the
# cluster itself is DIR/clusters/portico (kwokctl's layout: kwok.yaml,
# kubeconfig.yaml, pki/, etcd/, bin/, pids/, logs/). DIR also holds our
# marker file (.portico-cluster), the watchdog's pid file, kwokctl's own
# output (kwokctl.log) and links DIR/kubeconfig, DIR/pids and DIR/logs
# into the cluster, where the suites find the components (test/faults
# restarts kube-apiserver from its pid file; test/bench reads the
# components' CPU time). kwokctl starts every component in its own session
# with paths under DIR on its command line, so a pid file is only trusted
# when its process is running, is not a zombie, and names DIR.

CLUSTER_MARKER=.portico-cluster
CLUSTER_NAME=portico
# kwokctl's component names (and so its pid and log file names).
CLUSTER_COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok-controller)

# run_kwokctl DIR BINS ARGS...: kwokctl on the cluster in DIR with the
# binaries of BINS, its output appended to DIR/kwokctl.log. kwokctl looks
# kubectl up in PATH before it would download one: BINS comes first. The
# components it starts inherit its open files: only stdio, and not fd 9
# (hack/cluster-up.sh's lock).
run_kwokctl() {
  local dir=$1 bins=$2
  shift 2
  KWOK_WORKDIR=$dir KWOK_KUBECTL_BINARY=$bins/kubectl PATH=$bins:$PATH \
    "$bins/kwokctl" --name="$CLUSTER_NAME" "$@" </dev/null >>"$dir/kwokctl.log" 2>&1 9<&-
}

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

# pid_of DIR FILE: prints the pid in FILE if that process is running and
# names DIR in its arguments (not a reused pid); fails otherwise.
pid_of() {
  local dir=$1 file=$2 pid
  [ -f "$file" ] && pid=$(tr -d '[:space:]' <"$file") || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  process_running "$pid" || return 1
  if [ -r "/proc/$pid/cmdline" ]; then
    tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$dir/" || return 1
  fi
  echo "$pid"
}

# component_pid DIR NAME: pid_of the component NAME of the cluster in DIR.
component_pid() {
  pid_of "$1" "$1/clusters/$CLUSTER_NAME/pids/$2.pid"
}

# stop_cluster DIR BINS: stops the watchdog and every component of the
# cluster in DIR, and returns once none is left. kwokctl (of BINS) stops
# them, with SIGKILL; without kwokctl, or for a component kwokctl missed,
# the SIGKILL is sent here.
stop_cluster() {
  local dir=$1 bins=$2 f pid pids=()
  if pid=$(pid_of "$dir" "$dir/watchdog.pid"); then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  fi
  rm -f "$dir/watchdog.pid"
  # DIR/pids links to the cluster's pid files (a cluster directory of the
  # harness before kwokctl has them there itself, and no kwok.yaml: its
  # processes get the SIGKILL below).
  for f in "$dir"/pids/*.pid; do
    [ -f "$f" ] || continue
    pid=$(pid_of "$dir" "$f") || continue
    pids+=("$pid")
    # kwokctl reads a pid file as a bare number: one rewritten by another
    # tool (test/faults restarts kube-apiserver) may end with a newline.
    printf %s "$pid" >"$f"
  done
  if [ -f "$dir/clusters/$CLUSTER_NAME/kwok.yaml" ] && [ -x "$bins/kwokctl" ]; then
    run_kwokctl "$dir" "$bins" stop cluster || echo "cluster: kwokctl stop cluster failed (see $dir/kwokctl.log)" >&2
  else
    for pid in ${pids[@]+"${pids[@]}"}; do kill -KILL "$pid" 2>/dev/null || true; done
  fi
  wait_gone 10 ${pids[@]+"${pids[@]}"} && return 0
  for pid in "${pids[@]}"; do
    process_running "$pid" || continue
    echo "cluster: pid $pid still running; sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
  done
  wait_gone 5 "${pids[@]}" && return 0
  echo "cluster: a component is still running after SIGKILL" >&2
  return 1
}

# wait_gone SECONDS PID...: true once none of the PIDs is running, false
# if one still is after SECONDS.
wait_gone() {
  local deadline=$((SECONDS + $1)) pid
  shift
  for pid in "$@"; do
    while process_running "$pid"; do
      [ $SECONDS -lt $deadline ] || return 1
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
