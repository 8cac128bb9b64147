package certstore_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/portico-dev/portico/internal/pki"
	"github.com/portico-dev/portico/internal/pki/certstore"
	"github.com/portico-dev/portico/internal/xds/server"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runSource runs a ServingSource for w's namespace until the test ends.
func runSource(t *testing.T, w *world, logs *syncBuffer) *certstore.ServingSource {
	t.Helper()
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	src := certstore.NewServingSource(cs, w.ns, slog.New(slog.NewTextHandler(logs, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ServingSource.Run: %v", err)
			}
		case <-time.After(waitTimeout):
			t.Error("ServingSource.Run did not return after cancel")
		}
	})
	return src
}

// serveXDS serves one cluster to gateway ns/gw over mTLS from src.
func serveXDS(t *testing.T, src *certstore.ServingSource, gateway string) string {
	t.Helper()
	srv := server.New(nil, nil)
	srv.TLS = server.TLSConfig(src)
	res := &translate.Resources{Gateway: gateway, Version: "v1", Clusters: []types.Resource{&clusterv3.Cluster{
		Name:                 gateway + "/backend",
		ConnectTimeout:       durationpb.New(time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
	}}}
	if err := srv.Update(context.Background(), []*translate.Resources{res}); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return lis.Addr().String()
}

// clientTLS is what a proxy of the Gateway whose client secret is s uses.
func clientTLS(t *testing.T, s *corev1.Secret, serverName string) *tls.Config {
	t.Helper()
	kp, err := tls.X509KeyPair(s.Data["tls.crt"], s.Data["tls.key"])
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pki.Pool(s.Data["ca.crt"])
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{kp}, RootCAs: pool, ServerName: serverName}
}

// servedCert handshakes with addr and returns the server's certificate.
func servedCert(cfg *tls.Config, addr string) (*x509.Certificate, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: waitTimeout}, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// fetchClusters opens an ADS stream as cluster and returns the names of the
// first CDS response, or the error ending the stream.
func fetchClusters(cfg *tls.Config, addr, cluster string) ([]string, error) {
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "p", Cluster: cluster}, TypeUrl: resourcev3.ClusterType}); err != nil {
		_, err = s.Recv()
		return nil, err
	}
	r, err := s.Recv()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, a := range r.GetResources() {
		var c clusterv3.Cluster
		if err := a.UnmarshalTo(&c); err != nil {
			return nil, err
		}
		names = append(names, c.GetName())
	}
	return names, nil
}

func TestServingSourceFollowsSecret(t *testing.T) {
	w := newWorld(t, func(c *certstore.Config) { c.ServerValidity = 3 * time.Hour })
	logs := &syncBuffer{}
	src := runSource(t, w, logs)
	gateway := w.ns + "/web"
	addr := serveXDS(t, src, gateway)
	sni := "portico-xds." + w.ns + ".svc"

	// No serving secret yet: not ready, every handshake fails.
	if src.Ready() {
		t.Fatal("ready without a serving secret")
	}
	if _, _, err := src.Current(); !errors.Is(err, certstore.ErrNotReady) {
		t.Fatalf("Current before the secret: %v", err)
	}
	w.gateway("web")
	if err := w.m.EnsureClientCert(w.ctx, w.ns, "web"); err != nil {
		t.Fatal(err)
	}
	if _, err := fetchClusters(clientTLS(t, w.clientSecret("web"), sni), addr, gateway); grpcstatus.Code(err) != codes.Unavailable {
		t.Fatalf("xDS before the serving secret: %v, want Unavailable", err)
	}

	// The leader writes it: the replica loads it without restarting.
	w.ensure()
	first := w.servingSecret()
	eventually(t, "serving certificate loaded", func() bool { return src.Version() == first.ResourceVersion })
	cfg := clientTLS(t, w.clientSecret("web"), sni)
	cfg.Time = w.clock.Now // the renewed certificate is valid from the test clock's now
	names, err := fetchClusters(cfg, addr, gateway)
	if err != nil || len(names) != 1 || names[0] != gateway+"/backend" {
		t.Fatalf("xDS with the gateway's certificate: %v, %v", names, err)
	}
	if _, err := fetchClusters(cfg, addr, w.ns+"/other"); grpcstatus.Code(err) != codes.PermissionDenied {
		t.Errorf("xDS as another gateway: %v, want PermissionDenied", err)
	}
	leaf, err := servedCert(cfg, addr)
	if err != nil || !bytes.Equal(pki.EncodeCertificates([]*x509.Certificate{leaf}), first.Data["tls.crt"]) {
		t.Fatalf("served certificate is not the secret's: %v", err)
	}

	// Renewal: new handshakes get the new certificate.
	w.clock.Set(pki.RenewalTime(leaf).Add(time.Minute))
	w.ensure()
	renewed := w.servingSecret()
	if renewed.ResourceVersion == first.ResourceVersion {
		t.Fatal("serving certificate not renewed")
	}
	eventually(t, "renewed certificate served", func() bool {
		leaf, err := servedCert(cfg, addr)
		return err == nil && bytes.Equal(pki.EncodeCertificates([]*x509.Certificate{leaf}), renewed.Data["tls.crt"])
	})
	if names, err := fetchClusters(cfg, addr, gateway); err != nil || len(names) != 1 {
		t.Errorf("xDS after renewal: %v, %v", names, err)
	}

	// A damaged secret does not replace the loaded certificate.
	renewed.Data["tls.key"] = []byte("junk")
	if err := k8s.Update(w.ctx, renewed); err != nil {
		t.Fatal(err)
	}
	eventually(t, "damaged secret seen", func() bool { return strings.Contains(logs.String(), "unusable") })
	if !src.Ready() || src.Version() == renewed.ResourceVersion {
		t.Error("damaged secret replaced the loaded certificate")
	}
	if names, err := fetchClusters(cfg, addr, gateway); err != nil || len(names) != 1 {
		t.Errorf("xDS with a damaged secret: %v, %v", names, err)
	}
	// The leader repairs it, and the repaired one is loaded.
	w.ensure()
	repaired := w.servingSecret()
	eventually(t, "repaired certificate loaded", func() bool { return src.Version() == repaired.ResourceVersion })
}

func TestServingSourceRunLeavesNoGoroutines(t *testing.T) {
	w := newWorld(t, nil)
	w.ensure()
	ignore := goleak.IgnoreCurrent()

	// A client of its own, whose idle connections can be closed at the end.
	httpClient, err := rest.HTTPClientFor(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfigAndClient(restCfg, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	src := certstore.NewServingSource(cs, w.ns, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	eventually(t, "serving certificate loaded", src.Ready)
	if err := src.Run(ctx); err == nil {
		t.Error("second Run accepted")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return after cancel")
	}
	httpClient.CloseIdleConnections()
	goleak.VerifyNone(t, ignore)
}
