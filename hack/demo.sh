#!/usr/bin/env bash
# make demo: traffic through a real Envoy on this machine, with no cluster.
#
#   echo backends  app-v1 :9001, app-v2 :9002, api :9003 (the conformance
#                  suite's echo server: it answers with a JSON account of
#                  the request and the name of the backend, "pod")
#   portico        standalone on examples/quickstart: xDS over mutual TLS on
#                  127.0.0.1:18000 (certificates from `portico certs` in
#                  _output/demo/certs), admin on 127.0.0.1:19000
#   envoy          booted from `portico bootstrap --gateway default/quickstart`
#                  with its client certificate: listeners :8080 (HTTP) and
#                  :8443 (HTTPS, its certificate by SDS), admin 127.0.0.1:9901
#
# Envoy is the pinned one hack/envoy.sh installs. Logs go to _output/demo/.
# It runs until Ctrl-C and then stops everything it started. With
# DEMO_CHECK=1 it sends the requests it shows, checks the answers and exits
# (the test in test/envoy runs it so).
set -euo pipefail
export GOTOOLCHAIN=go1.27.3 # go.mod needs Go 1.27: fetched from the Go module proxy
cd "$(dirname "$0")/.."
OUT=_output/demo
BIN=_output/bin
mkdir -p "$OUT" "$BIN"
log() { echo "demo: $*" >&2; }

ENVOY=$(hack/envoy.sh)
log "building portico and the echo backend"
go build -o "$BIN/portico" ./cmd/portico
go build -o "$BIN/echo-basic" sigs.k8s.io/gateway-api-conformance-images/echo-basic

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_for WHAT CMD...: retry CMD for up to 30 s.
wait_for() {
  local what=$1; shift
  for _ in $(seq 300); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  log "timed out waiting for $what; logs in $OUT/"
  tail -n 20 "$OUT"/*.log >&2 || true
  return 1
}

for b in app-v1:9001 app-v2:9002 api:9003; do
  name=${b%%:*} port=${b##*:}
  POD_NAME=$name NAMESPACE=default HTTP_PORT=$port H2C_PORT=0 "$BIN/echo-basic" >"$OUT/$name.log" 2>&1 &
  pids+=($!)
done
# Mutual TLS on xDS: Envoy proves it is the quickstart Gateway's proxy, so
# Portico sends it the HTTPS listener's private key (without TLS it would
# withhold it).
CERTS=$OUT/certs
"$BIN/portico" certs --dir "$CERTS" --gateway default/quickstart --server-name 127.0.0.1 >/dev/null
"$BIN/portico" standalone --resources examples/quickstart --xds-address 127.0.0.1:18000 \
  --xds-tls-cert "$CERTS/server.crt" --xds-tls-key "$CERTS/server.key" --xds-client-ca "$CERTS/ca.crt" \
  --admin-address 127.0.0.1:19000 >"$OUT/portico.log" 2>&1 &
pids+=($!)
for port in 9001 9002 9003; do wait_for "backend :$port" curl -sf "http://127.0.0.1:$port/health"; done
wait_for "portico" curl -sf http://127.0.0.1:19000/readyz

"$BIN/portico" bootstrap --gateway default/quickstart --xds-address 127.0.0.1:18000 \
  --xds-ca "$CERTS/ca.crt" --xds-client-cert "$CERTS/default_quickstart.crt" --xds-client-key "$CERTS/default_quickstart.key" \
  --admin-address 127.0.0.1:9901 --node-id demo-envoy >"$OUT/envoy-bootstrap.json"
"$ENVOY" --config-path "$OUT/envoy-bootstrap.json" --log-path "$OUT/envoy.log" >"$OUT/envoy.out" 2>&1 &
pids+=($!)
wait_for "envoy to get its configuration" curl -sf http://127.0.0.1:9901/ready
log "Envoy $("$ENVOY" --version | sed -n 's/.*version: [^/]*\/\([^/]*\)\/.*/\1/p') is serving the quickstart"

if [ "${DEMO_CHECK:-}" = 1 ]; then
  fail=0
  check() { # check DESCRIPTION WANT CURL-ARGS...
    local what=$1 want=$2; shift 2
    local got
    got=$(curl -s "$@" 2>&1) || true
    if [[ "$got" == *"$want"* ]]; then log "ok: $what"; else log "FAIL: $what: want \"$want\" in: $got"; fail=1; fi
  }
  check "/ through Envoy answers from app-v1 or app-v2" '"pod": "app-v' -H 'Host: localhost' http://127.0.0.1:8080/
  check "/api gets X-Gateway and reaches api" '"pod": "api"' http://localhost:8080/api/
  check "/old redirects" 'location: http://localhost:8080/new' -i -H 'Host: localhost' http://127.0.0.1:8080/old
  check "HTTPS by SNI" '"pod": "api"' -k --resolve localhost:8443:127.0.0.1 https://localhost:8443/api/
  exit $fail
fi

cat <<TXT

Traffic flows through Envoy to the local backends. Try:

  curl -s http://localhost:8080/                       # app-v1 (90%) or app-v2 (10%): see "pod"
  curl -s http://localhost:8080/api/items              # api, with the X-Gateway header the route adds
  curl -si http://localhost:8080/old                   # 301 to /new
  curl -s -H 'X-Beta: 1' http://localhost:8080/beta/x  # app-v2, prefix rewritten to /x
  curl -sk https://localhost:8443/api/                 # HTTPS, certificate served by SDS

  curl -s http://127.0.0.1:9901/config_dump            # what Envoy got
  curl -s 'http://127.0.0.1:19001/debug/xds?gateway=default/quickstart'   # what Portico serves

Edit a file in examples/quickstart/ and Envoy follows. Logs: $OUT/. Ctrl-C stops everything.
TXT
wait
