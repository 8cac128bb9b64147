#!/usr/bin/env bash
# Builds the developer tools Portico's make targets use, from the Go module
# proxy, into ${PORTICO_CACHE:-$HOME/.cache/portico}/tools/ (outside the
# repository, so fresh clones reuse them). Prints the tool's path.
#
# Usage: hack/tools.sh controller-gen|helm
set -euo pipefail
export GOTOOLCHAIN=go1.27.3 # go.mod needs Go 1.27: fetched from the Go module proxy
CACHE=${PORTICO_CACHE:-$HOME/.cache/portico}
DIR=$CACHE/tools
CONTROLLER_TOOLS_VERSION=v0.23.0
HELM_VERSION=v3.22.0

tool=${1:?usage: hack/tools.sh controller-gen|helm}
case "$tool" in
  controller-gen) pkg=sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_TOOLS_VERSION; v=$CONTROLLER_TOOLS_VERSION ;;
  helm) pkg=helm.sh/helm/v3/cmd/helm@$HELM_VERSION; v=$HELM_VERSION ;;
  *) echo "unknown tool $tool" >&2; exit 2 ;;
esac
bin=$DIR/$tool-$v
if [ ! -x "$bin" ]; then
  mkdir -p "$DIR/tmp-$tool"
  echo "tools: building $pkg (first time only)" >&2
  GOBIN="$DIR/tmp-$tool" CGO_ENABLED=0 go install "$pkg"
  mv "$DIR/tmp-$tool/$tool" "$bin"
  rmdir "$DIR/tmp-$tool"
fi
echo "$bin"
