#!/usr/bin/env bash
# Renders Portico's install manifests.
#
#   hack/render-install.sh           copy the CRDs into charts/portico/crds/ and
#                                    write install.yaml
#   hack/render-install.sh --stdout  print install.yaml as the chart renders it
#                                    now (nothing is written; test/install uses it)
#
# CRDs: the Gateway API standard-channel CRDs of the pinned
# sigs.k8s.io/gateway-api module and Portico's own (config/crd). The module's
# ValidatingAdmissionPolicy "safe-upgrades" (gateway.networking.k8s.io_vap_*)
# is left out: it is not a CRD (Helm's crds/ holds CRDs only) but a
# cluster-wide policy over every CRD write, which belongs to whoever manages
# the Gateway API CRDs of the cluster, not to one of its implementations.
#
# The helm binary is $HELM, or hack/tools.sh helm.
set -euo pipefail
export GOTOOLCHAIN=go1.27.3 # go.mod needs Go 1.27: fetched from the Go module proxy
cd "$(dirname "$0")/.."

NAMESPACE=portico-system
CRDS=charts/portico/crds

mode=write
case "${1:-}" in
  "") ;;
  --stdout) mode=stdout ;;
  *) echo "usage: hack/render-install.sh [--stdout]" >&2; exit 2 ;;
esac

HELM=${HELM:-$(hack/tools.sh helm)}

sync_crds() {
  local gwapi
  gwapi=$(go list -m -f '{{.Dir}}' sigs.k8s.io/gateway-api)
  rm -f "$CRDS"/*.yaml
  mkdir -p "$CRDS"
  for f in "$gwapi"/config/crd/standard/*.yaml; do
    case "$(basename "$f")" in
      *_vap_*) continue ;;
    esac
    install -m 0644 "$f" "$CRDS/$(basename "$f")"
  done
  for f in config/crd/*.yaml; do
    install -m 0644 "$f" "$CRDS/$(basename "$f")"
  done
}

render() {
  cat <<HEADER
# Portico install manifests, rendered from charts/portico by
# hack/render-install.sh (make manifests). Do not edit.
#
#   kubectl apply --server-side -f install.yaml
#
# Server-side: the HTTPRoute CRD is too large for client-side apply's
# last-applied annotation. The GatewayClass and ProxyConfig need their CRDs
# established first: if kubectl reports "ensure CRDs are installed first",
# run it once more.
---
apiVersion: v1
kind: Namespace
metadata:
  name: $NAMESPACE
  labels:
    app.kubernetes.io/name: portico
HEADER
  "$HELM" template portico charts/portico --namespace "$NAMESPACE" --include-crds
}

if [ "$mode" = stdout ]; then
  render
  exit 0
fi
sync_crds
render > install.yaml.tmp
mv install.yaml.tmp install.yaml
echo "wrote $CRDS/ and install.yaml" >&2
