package translate

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/portico-dev/portico/internal/ir"
)

// InvalidBackendCluster is the cluster name that stands for a backendRef
// that could not be resolved. No cluster of that name ever exists (real
// cluster names have three "/"-separated parts), so Envoy answers the share
// of traffic routed to it with the route's cluster_not_found_response_code,
// which Portico sets to 500.
const InvalidBackendCluster = "portico/invalid-backend"

// versionLen is the number of hex characters of the content hash kept as
// the snapshot version.
const versionLen = 16

// validator is implemented by every generated Envoy message.
type validator interface {
	ValidateAll() error
}

// Translate turns the IR of one Gateway into Envoy resources. It checks each
// resource with its protoc-gen-validate rules, plus the rules Envoy enforces
// when it loads a configuration that those do not cover (unique domains,
// filter chain matches and names; RE2 syntax; modifiable headers), and
// returns an error naming the offending object if one fails.
//
// The result is deterministic: equal IR gives byte-identical resources (with
// proto.MarshalOptions{Deterministic: true}) and the same Version.
func Translate(gw *ir.Gateway) (*Resources, error) {
	if gw == nil {
		return nil, errors.New("translate: nil gateway")
	}
	t := &translator{gw: gw, key: gw.Key()}
	res, err := t.translate()
	if err != nil {
		return nil, fmt.Errorf("translate gateway %s: %w", t.key, err)
	}
	return res, nil
}

type translator struct {
	gw  *ir.Gateway
	key string
	// clusters holds the names of gw.Clusters.
	clusters map[string]bool
	// secrets holds the names of gw.Secrets.
	secrets map[string]bool
}

func (t *translator) translate() (*Resources, error) {
	res := &Resources{Gateway: t.key}
	var err error
	if res.Clusters, res.Endpoints, err = t.clustersAndEndpoints(); err != nil {
		return nil, err
	}
	if res.Secrets, err = t.secretResources(); err != nil {
		return nil, err
	}
	if res.Listeners, res.Routes, err = t.listenersAndRoutes(); err != nil {
		return nil, err
	}
	for _, s := range [][]types.Resource{res.Listeners, res.Routes, res.Clusters, res.Endpoints, res.Secrets} {
		sortByName(s)
		if err := validateAll(s); err != nil {
			return nil, err
		}
	}
	if res.Version, err = hashResources(res); err != nil {
		return nil, err
	}
	return res, nil
}

// validateAll runs the protoc-gen-validate rules of each resource.
func validateAll(rs []types.Resource) error {
	for _, r := range rs {
		v, ok := r.(validator)
		if !ok {
			return fmt.Errorf("%T %q has no validation", r, cachev3.GetResourceName(r))
		}
		if err := v.ValidateAll(); err != nil {
			return fmt.Errorf("%T %q is invalid: %w", r, cachev3.GetResourceName(r), err)
		}
	}
	return nil
}

func sortByName(rs []types.Resource) {
	sort.SliceStable(rs, func(i, j int) bool {
		return cachev3.GetResourceName(rs[i]) < cachev3.GetResourceName(rs[j])
	})
}

var deterministic = proto.MarshalOptions{Deterministic: true}

// hashResources is the hex sha256, cut to versionLen characters, of every
// resource's type URL, name and deterministic encoding, each length-prefixed.
func hashResources(r *Resources) (string, error) {
	h := sha256.New()
	var buf []byte
	var n [8]byte
	write := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	for _, t := range typeOrder {
		write([]byte(t))
		for _, res := range r.slice(t) {
			var err error
			buf, err = deterministic.MarshalAppend(buf[:0], res)
			if err != nil {
				return "", fmt.Errorf("marshal %q: %w", cachev3.GetResourceName(res), err)
			}
			write([]byte(cachev3.GetResourceName(res)))
			write(buf)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:versionLen], nil
}

// toAny validates m and packs it deterministically into an Any, so that the
// bytes of the enclosing resource (and hence the version) are stable.
// protoc-gen-validate does not look inside Any, so m is validated here.
func toAny(what string, m proto.Message) (*anypb.Any, error) {
	if v, ok := m.(validator); ok {
		if err := v.ValidateAll(); err != nil {
			return nil, fmt.Errorf("%s is invalid: %w", what, err)
		}
	}
	a := &anypb.Any{}
	if err := anypb.MarshalFrom(a, m, deterministic); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return a, nil
}

// adsConfigSource is a v3 ConfigSource delivering resources over the
// aggregated stream the proxy already has open with Portico.
func adsConfigSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}
}
