// Package layers holds no code: its test checks that the packages' layers
// point one way, on the import graph that `go list -deps` reports (run
// with testenv.GoCommand, the toolchain of the test), so that a wrong
// import fails a test rather than waiting for a review. A failure names
// the import chain that leads to the forbidden package.
//
// The rules (layers_test.go) are the edges that must not exist, directly
// or through other packages:
//
//   - the Gateway API semantics (internal/gatewayapi) and what they share
//     with the proxies' reconciler (internal/proxyspec) import no
//     controller code: neither internal/infra nor controller-runtime (nor,
//     for proxyspec, client-go);
//   - the semantics do not import the incremental engine
//     (internal/incremental), which calls them; the engine imports neither
//     internal/infra, controller-runtime nor internal/xds;
//   - the certificates (internal/pki), every package of the xDS server and
//     translator (internal/xds/...) and every package of the semantics
//     (internal/gatewayapi/...) import nothing that imports client-go or
//     controller-runtime: they run alike in the controller and in
//     `portico standalone`, and what reads and writes the certificates'
//     Secrets is internal/pki/certstore (not under the rule);
//   - the translation loop (internal/pipeline) imports no renderer
//     (internal/render): it hands out its Results, and internal/admin
//     renders the debug views from them;
//   - the IR (internal/ir) imports nothing of Portico's;
//   - no product package (cmd/..., internal/... but internal/testenv/...)
//     imports test support (internal/testenv: the workload generator,
//     the test clusters, Envoy).
//
// Only the packages proper are checked, not their tests: a test may well
// check across layers (gatewayapi's tests render what the translator
// accepts with infra.Render).
//
// architecture_test.go holds the map to the same graph: the package table
// of docs/architecture.md must have one row for every package of the
// module under internal/, cmd/ and api/, none for anything else, and in
// each row's last column exactly the package's direct imports of the
// module's packages (non-test files, for the platform the test runs on),
// named below internal/ ("xds/translate") or else by their path in the
// module ("api/v1alpha1"), "—" for none, in any order. A row names one
// package (no grouping: the parser stays small and each row can be
// checked). A failure prints each wrong or missing row as it should be,
// ready to paste, with "…" where a new row must say what it owns.
package layers
