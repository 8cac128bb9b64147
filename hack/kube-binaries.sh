#!/usr/bin/env bash
# Builds the Kubernetes binaries Portico's tests run against, from the Go
# module proxy (no download site is needed):
#   kube-apiserver, kube-controller-manager, kube-scheduler,
#   kubectl                                                  (k8s.io/kubernetes v1.37.2)
#   etcd                                                     (go.etcd.io/etcd/server/v3, the version k8s requires)
#   kwok, kwokctl                                            (sigs.k8s.io/kwok v0.8.0)
# kwokctl runs the local cluster (hack/cluster-up.sh) from the others;
# it calls kubectl for its own readiness probes and would download one from
# dl.k8s.io if none were given, hence kubectl here.
# Binaries are cached outside the repository so a fresh clone reuses them:
#   ${PORTICO_CACHE:-$HOME/.cache/portico}/k8s-v1.37.2/
# A cold build takes 10-20 minutes on 2 cores; a warm run takes seconds.
#
# Usage: hack/kube-binaries.sh [--print-dir] [binary ...]
#   With no binary names it builds all of them. --print-dir prints the
#   directory (for KUBEBUILDER_ASSETS) and nothing else on stdout.
set -euo pipefail
export GOTOOLCHAIN=go1.27.3 # go.mod needs Go 1.27: fetched from the Go module proxy

K8S_VERSION=v1.37.2
STAGING_VERSION=v0.37.2
KWOK_VERSION=v0.8.0
CACHE=${PORTICO_CACHE:-$HOME/.cache/portico}
OUT=$CACHE/k8s-$K8S_VERSION
WORK=$CACHE/build-k8s-$K8S_VERSION

print_dir=0
want=()
for a in "$@"; do
  case "$a" in
    --print-dir) print_dir=1 ;;
    *) want+=("$a") ;;
  esac
done
[ ${#want[@]} -gt 0 ] || want=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok kwokctl)

log() { echo "kube-binaries: $*" >&2; }

cached() {
  missing=()
  for b in "${want[@]}"; do
    [ -x "$OUT/$b" ] || missing+=("$b")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    [ $print_dir = 1 ] && echo "$OUT"
    log "cached in $OUT: ${want[*]}"
    exit 0
  fi
}
cached
# One build at a time per cache: two (CI and a test run, say) would share
# the build module and the output names. The second waits, then finds
# what the first built.
mkdir -p "$CACHE"
exec 9>"$CACHE/kube-binaries.lock"
if ! flock -n 9; then
  log "another build holds $CACHE/kube-binaries.lock; waiting for it"
  flock 9
  cached
fi

mkdir -p "$OUT" "$WORK/k8s" "$WORK/kwok"
log "building ${missing[*]} into $OUT"
log "a first (cold) build takes 10-20 minutes on 2 cores; later runs reuse the cache"

# The wrapper module for the Kubernetes binaries and etcd. k8s.io/kubernetes
# replaces its staging modules with local paths, which a dependent module
# cannot use, so we replace each with its published version.
k8s_mod() {
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
  {
    echo "module portico.local/kubebins"
    echo
    echo "go 1.26.0"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    grep -E '^\s+k8s\.io/[a-z0-9-]+ => \./staging/' "$gomod" |
      awk -v v="$STAGING_VERSION" '{print "replace " $1 " => " $1 " " v}'
  } >"$WORK/k8s/go.mod"
  rm -f "$WORK/k8s/go.sum"
  # etcd at exactly the version k8s.io/kubernetes requires.
  etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2; exit}' "$gomod")
  log "etcd: go.etcd.io/etcd/server/v3 $etcd_version (required by k8s.io/kubernetes $K8S_VERSION)"
  mkdir -p "$WORK/k8s/etcd"
  cat >"$WORK/k8s/etcd/main.go" <<'GO'
// Command etcd runs the etcd server at the version k8s.io/kubernetes requires.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  # go get (not tidy: no Go file here imports the commands) records the
  # packages we build and their checksums.
  (cd "$WORK/k8s" && go get \
    "k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION" \
    "k8s.io/kubernetes/cmd/kube-controller-manager@$K8S_VERSION" \
    "k8s.io/kubernetes/cmd/kube-scheduler@$K8S_VERSION" \
    "k8s.io/kubernetes/cmd/kubectl@$K8S_VERSION" \
    "go.etcd.io/etcd/server/v3/etcdmain@$etcd_version" >&2)
}

build_k8s() {
  local b=$1 pkg start
  case "$b" in
    etcd) pkg=./etcd ;;
    *) pkg=k8s.io/kubernetes/cmd/$b ;;
  esac
  start=$(date +%s)
  log "[$b] building $pkg ..."
  # Stamp the version the way Kubernetes' own build does, so /version and
  # --version report v1.37.2 rather than v0.0.0-master.
  local minor=${K8S_VERSION#v1.}
  minor=${minor%%.*}
  local ldflags="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags="$ldflags -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  (cd "$WORK/k8s" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags="$ldflags" -o "$OUT/$b.tmp" "$pkg")
  mv "$OUT/$b.tmp" "$OUT/$b"
  log "[$b] done in $(( $(date +%s) - start ))s"
}

# build_kwok NAME: sigs.k8s.io/kwok/cmd/NAME (kwok or kwokctl).
build_kwok() {
  local b=$1 start
  start=$(date +%s)
  log "[$b] building sigs.k8s.io/kwok/cmd/$b@$KWOK_VERSION ..."
  (cd "$WORK/kwok" && GOBIN="$OUT" CGO_ENABLED=0 go install -trimpath -ldflags='-s -w' "sigs.k8s.io/kwok/cmd/$b@$KWOK_VERSION")
  if [ "$b" = kwok ]; then
    # The stage definitions kwok needs (node/fast, pod/fast) ship in the module.
    local dir
    dir=$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
    mkdir -p "$OUT/kwok-stages"
    cp "$dir"/kustomize/stage/node/fast/*.yaml "$dir"/kustomize/stage/pod/fast/*.yaml "$OUT/kwok-stages/" 2>/dev/null || true
    chmod -R u+w "$OUT/kwok-stages"
  fi
  log "[$b] done in $(( $(date +%s) - start ))s"
}

need_k8s=0
for b in "${missing[@]}"; do case "$b" in kwok | kwokctl) ;; *) need_k8s=1 ;; esac; done
[ $need_k8s = 1 ] && k8s_mod
i=0
for b in "${missing[@]}"; do
  i=$((i + 1))
  log "progress: binary $i of ${#missing[@]}"
  case "$b" in
    kwok | kwokctl) build_kwok "$b" ;;
    *) build_k8s "$b" ;;
  esac
done
log "all built in $OUT"
[ $print_dir = 1 ] && echo "$OUT"
exit 0
