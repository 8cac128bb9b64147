package translate

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/proto"
)

// Versions are content hashes.
//
// Every resource has a hash: the sha256 of its deterministic protobuf
// encoding, except route configurations and their virtual hosts, whose
// hashes are built from the hashes of their parts (a Merkle tree) so that a
// change of one route re-encodes that route only:
//
//	hash(route)        = sha256(encoding of the Route)
//	hash(virtual host) = sha256(len ‖ encoding of the VirtualHost without routes ‖ hash(route)…)
//	hash(route config) = sha256(len ‖ encoding of the RouteConfiguration without virtual hosts ‖ hash(virtual host)…)
//
// The version of a Gateway is the sha256, cut to versionLen hex characters,
// of the type URL and the hash of each resource type of typeOrder (the
// VHDS forms of route tables are derived from Routes and left out; scoped
// routes and host-scope filters only when the Gateway has some, so that
// Gateways without scoped tables keep the versions they had before), the
// hash of a type being the sha256 of the name and
// hash of each of its resources, in name order. Equal content gives equal versions on every replica; a change of
// content changes the hash of the resource and the version.

// hash is the content hash of one resource or part of one.
type hash [sha256.Size]byte

// String is the hash in hex: the per-resource version given to delta xDS.
func (h hash) String() string {
	var b [32]byte
	hex.Encode(b[:], h[:16])
	return string(b[:])
}

var deterministic = proto.MarshalOptions{Deterministic: true}

// hasher encodes messages into a reused buffer and hashes them.
type hasher struct {
	buf []byte
}

// message is the hash of m's deterministic encoding.
func (hs *hasher) message(m proto.Message) (hash, error) {
	var err error
	hs.buf, err = deterministic.MarshalAppend(hs.buf[:0], m)
	if err != nil {
		return hash{}, fmt.Errorf("marshal %T: %w", m, err)
	}
	return sha256.Sum256(hs.buf), nil
}

// tree is the hash of shell's encoding (length-prefixed) followed by the
// hashes of its parts.
func (hs *hasher) tree(shell proto.Message, parts []hash) (hash, error) {
	var err error
	hs.buf, err = deterministic.MarshalAppend(hs.buf[:0], shell)
	if err != nil {
		return hash{}, fmt.Errorf("marshal %T: %w", shell, err)
	}
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(hs.buf)))
	h.Write(n[:])
	h.Write(hs.buf)
	for i := range parts {
		h.Write(parts[i][:])
	}
	var out hash
	h.Sum(out[:0])
	return out, nil
}

// entry is a translated resource with its hash.
type entry struct {
	name string
	res  types.Resource
	hash hash
	// version is hash.String(), computed once.
	version string
	// build, when not nil, makes res on first use (resource), guarded by
	// once: whole route tables (Resources.Routes).
	build func() types.Resource
	once  sync.Once
}

func newEntry(name string, res types.Resource, h hash) *entry {
	return &entry{name: name, res: res, hash: h, version: h.String()}
}

// newLazyEntry is an entry whose resource build makes when first asked
// for; build must depend on immutable values only.
func newLazyEntry(name string, build func() types.Resource, h hash) *entry {
	return &entry{name: name, build: build, hash: h, version: h.String()}
}

// resource returns e's resource, made now if it is lazy. Safe for
// concurrent use.
func (e *entry) resource() types.Resource {
	if e.build != nil {
		e.once.Do(func() { e.res = e.build() })
	}
	return e.res
}

// typeHash is the hash of the names and hashes of the resources of one
// type, sorted by name. Its input is written into the reused buffer and
// hashed a few kilobytes at a time (writing each name to a hash.Hash
// would allocate a copy; the whole input at once, a buffer the size of
// the type).
func (hs *hasher) typeHash(entries []*entry) hash {
	const chunk = 16 << 10
	h := sha256.New()
	b := hs.buf[:0]
	for _, e := range entries {
		b = binary.BigEndian.AppendUint64(b, uint64(len(e.name)))
		b = append(b, e.name...)
		b = append(b, e.hash[:]...)
		if len(b) >= chunk {
			h.Write(b)
			b = b[:0]
		}
	}
	h.Write(b)
	hs.buf = b
	var out hash
	h.Sum(out[:0])
	return out
}

// gatewayVersion is the version of a Gateway from the hashes of its
// resource types, in typeOrder; ents are the resources of each type.
func gatewayVersion(types *[numTypes]hash, ents *[numTypes][]*entry) string {
	h := sha256.New()
	for i, t := range typeOrder {
		if (i == scopedRouteIdx || i == extensionConfigIdx) && len(ents[i]) == 0 {
			continue
		}
		h.Write([]byte(t))
		h.Write(types[i][:])
	}
	return hex.EncodeToString(h.Sum(nil))[:versionLen]
}

// sameSlice reports whether a and b are the same slice (same elements in
// the same memory).
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
