// Package resource holds the input of a translation: an immutable snapshot
// of Gateway API and core objects, the indexes the translator needs, and
// the Editor that derives a snapshot from the previous one at the cost of
// what changed. Objects and indexes are in persistent maps (Map), which a
// new version shares with the one it was made from except on the paths to
// the changed entries. Filling a snapshot from files is package
// resource/load; from a cluster, the kube provider.
//
// # One descriptor per kind
//
// Every kind a snapshot holds has a Descriptor (kinds.go): its GVK, the
// versions the loader reads, whether it is cluster-scoped and whether
// Portico writes its status, how to make an empty object and list, where
// the snapshot keeps its objects and, for a kind of route, its shared part
// (RouteView: metadata, parentRefs, hostnames, status) and the backends
// it references. The loader, the snapshot, its Editor and Diff, the kube
// provider's informers and event filter and the status writer read the
// descriptors and name no kind of route. A kind of route is one file here
// (httproute.go, grpcroute.go, tlsroute.go, tcproute.go, udproute.go, each
// calling routeKind), its constant and registry entry in kinds.go and its
// map in Snapshot; its semantics are one file of package gatewayapi. The
// descriptors' functions are written for each Go type (generics, no
// reflection), so reading through them costs an indirect call.
//
// # Immutable means no write on read
//
// Every field of a Snapshot is computed when it is made: its ID by New (or
// Build, for a zero Snapshot), its EndpointSlice index by Build or
// Editor.Snapshot. Reads (ID, EndpointSlicesFor, the maps) never assign
// anything, so any number of goroutines may read one snapshot, including
// its first reads, with no lock. A snapshot read before Build (a test
// filling one by hand) is answered correctly but without its index:
// EndpointSlicesFor then scans the EndpointSlices.
//
// # The persistent map
//
// Map stays in this package rather than one of its own: it is the type of
// every field of a Snapshot, and with the loader gone to resource/load
// what is left here is the snapshot and its maps, one responsibility.
//
// Map is a hash array mapped trie of this package's own (pmap.go), not a
// library. github.com/benbjohnson/immutable v0.4.3, the maintained generic
// Go HAMT, was measured against it (a benchmark of both on 1,000 and
// 10,000 namespace/name keys, median of 5, at issue 17; not kept, as it
// would put the library in go.mod) and is not adopted:
//
//	operation (1,000 / 10,000 entries)      pmap             immutable
//	Get                                     33 / 60 ns       44 / 50 ns
//	full iteration                          6.2 / 115 µs     16 / 201 µs
//	fill from empty                         162 µs / 2.6 ms  151 µs / 2.1 ms
//	one Set on a frozen map                 1.1 / 2.0 µs     0.6 / 1.4 µs
//	100 Sets in one edit                    34 / 107 µs      70 / 135 µs
//	diff of two versions one Set apart      0.35 / 0.52 µs   129 µs / 1.3 ms
//
// It is faster at filling and at one isolated Set, slower at iterating
// (which translation does over every kind) and at edits of many entries
// (it has no builder that starts from an existing map, so each Set copies
// its path again), and it cannot serve Map's API: its nodes are hidden, so
// DiffMaps could not skip the subtrees two versions share, and Diff of two
// 10,000-object snapshots one change apart would compare every entry
// instead of one path (the last row). Its default string hash is also an
// unseeded 31·h+c, whose collisions an input could choose; pmap hashes
// with maphash and a per-process seed. github.com/hashicorp/go-immutable-
// radix is an ordered radix tree on []byte keys: every lookup would
// encode a Key, and it has no diff either.
package resource
