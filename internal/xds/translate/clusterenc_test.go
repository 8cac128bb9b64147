package translate

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/ir"
)

// A cluster encoded from its template is byte for byte the deterministic
// encoding of its message, for every protocol and for settings of the
// proxy (timeouts, circuit breakers) other than the defaults.
func TestClusterTemplateEncoding(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	connect, seven, nine := 250*time.Millisecond, uint32(7), uint32(9)
	settings := []*ir.ProxySettings{nil, {
		Timeouts:        ir.Timeouts{UpstreamConnect: &connect},
		CircuitBreakers: ir.CircuitBreakers{MaxConnections: &seven, MaxRequests: &nine},
	}}
	for si, ps := range settings {
		tr, err := newTestTranslator(ps)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 500 {
			protocol := []ir.UpstreamProtocol{ir.UpstreamHTTP1, "", ir.UpstreamHTTP2, ir.UpstreamTCP, ir.UpstreamUDP}[i%5]
			name := fmt.Sprintf("ns-%d/svc-%d/%d", r.IntN(1000), i, r.IntN(65536))
			if i%7 == 0 {
				name = fmt.Sprintf("ñs-%d/sérvice/%d", i, i) // not ASCII
			}
			e, err := tr.clusterEntry(&ir.Cluster{Name: name, Protocol: protocol})
			if err != nil {
				t.Fatal(err)
			}
			want, err := deterministic.Marshal(e.res)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(tr.hs.buf, want) {
				t.Fatalf("settings %d, %s %s: encoded\n%x\nwant\n%x", si, name, protocol, tr.hs.buf, want)
			}
			if e.hash != sha256.Sum256(want) {
				t.Fatalf("%s: the hash is not that of the encoding", name)
			}
			if err := validated(e.res, name); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Names validation would refuse, or the encoding could not carry, are
// refused.
func TestClusterTemplateRefusesBadNames(t *testing.T) {
	tr, err := newTestTranslator(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", "bad\xffname"} {
		if _, err := tr.clusterEntry(&ir.Cluster{Name: name, Protocol: ir.UpstreamHTTP1}); err == nil {
			t.Errorf("cluster %q was made", name)
		}
	}
}

// newTestTranslator is a translator of the proxy settings ps.
func newTestTranslator(ps *ir.ProxySettings) (*translator, error) {
	s, err := newSettings(ps)
	if err != nil {
		return nil, err
	}
	return &translator{settings: s}, nil
}
