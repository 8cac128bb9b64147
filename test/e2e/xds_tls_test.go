package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/pki"
	"github.com/portico-dev/portico/internal/proxyspec"
)

// fetchListeners opens an ADS stream to addr presenting the client
// certificate of a Secret (nil: none) as node.cluster and returns the
// listener names of the first response.
func fetchListeners(addr, cluster string, secret *corev1.Secret, serverCA []byte) ([]string, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(serverCA)
	tc := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if secret != nil {
		cert, err := tls.X509KeyPair(secret.Data["tls.crt"], secret.Data["tls.key"])
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return nil, err
	}
	// A stream the server already ended (it refused the client) makes Send
	// return io.EOF; the refusal's status is then what Recv returns.
	if err := stream.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "e2e", Cluster: cluster}, TypeUrl: resourcev3.ListenerType}); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	resp, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, r := range resp.Resources {
		names = append(names, r.TypeUrl)
	}
	return names, nil
}

// The Envoy pods of a Gateway get a client certificate naming it; with it a
// proxy gets its Gateway's config over mTLS, asking as another Gateway is
// refused, and a client without a certificate is refused.
func TestXDSClientCertificates(t *testing.T) {
	w := newWorld(t)
	r := startReplica(t, w, "solo")
	a := createGateway(t, w, "alpha")
	createGateway(t, w, "beta")
	ctx := ctxT(t)
	var secret corev1.Secret
	eventually(t, 60*time.Second, "client certificate Secret of alpha", func() error {
		return kubeClient().Get(ctx, types.NamespacedName{Namespace: w.ns, Name: proxyspec.ClientCertSecretName(a.Name)}, &secret)
	})
	eventually(t, 30*time.Second, "alpha's config over mTLS", func() error {
		names, err := fetchListeners(r.xds, w.ns+"/alpha", &secret, secret.Data["ca.crt"])
		if err != nil {
			return err
		}
		if len(names) != 1 {
			return fmt.Errorf("%d listeners", len(names))
		}
		return nil
	})
	_, err := fetchListeners(r.xds, w.ns+"/beta", &secret, secret.Data["ca.crt"])
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("asking as beta with alpha's certificate: %v, want PermissionDenied", err)
	}
	_, err = fetchListeners(r.xds, w.ns+"/alpha", nil, secret.Data["ca.crt"])
	if err == nil {
		t.Error("a client without a certificate got config")
	} else if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("no-certificate client hung instead of being refused: %v", err)
	}
}

// A Gateway deleted and re-created under the same name has a new UID: the
// client certificate of the old one (kept by someone who copied it) is
// refused, and the new Gateway's proxies get a certificate naming the new
// UID, with which they are served.
func TestXDSCertificateOfRecreatedGatewayRefused(t *testing.T) {
	w := newWorld(t)
	r := startReplica(t, w, "solo")
	a := createGateway(t, w, "alpha")
	ctx := ctxT(t)
	key := types.NamespacedName{Namespace: w.ns, Name: proxyspec.ClientCertSecretName(a.Name)}
	var old corev1.Secret
	eventually(t, 60*time.Second, "client certificate Secret of alpha", func() error {
		return kubeClient().Get(ctx, key, &old)
	})
	eventually(t, 30*time.Second, "alpha's config over mTLS", func() error {
		_, err := fetchListeners(r.xds, w.ns+"/alpha", &old, old.Data["ca.crt"])
		return err
	})

	var gw gwv1.Gateway
	if err := kubeClient().Get(ctx, types.NamespacedName{Namespace: w.ns, Name: "alpha"}, &gw); err != nil {
		t.Fatal(err)
	}
	if err := kubeClient().Delete(ctx, &gw); err != nil {
		t.Fatal(err)
	}
	again := gw.DeepCopy()
	again.ObjectMeta = metav1.ObjectMeta{Namespace: gw.Namespace, Name: gw.Name, Labels: gw.Labels, Annotations: gw.Annotations}
	again.Status = gwv1.GatewayStatus{}
	eventually(t, 30*time.Second, "alpha re-created", func() error { return kubeClient().Create(ctx, again) })
	if again.UID == gw.UID {
		t.Fatal("re-created Gateway has the old UID")
	}

	var fresh corev1.Secret
	eventually(t, 60*time.Second, "a client certificate naming the new UID", func() error {
		if err := kubeClient().Get(ctx, key, &fresh); err != nil {
			return err
		}
		if !strings.Contains(string(leafURI(t, fresh.Data["tls.crt"])), string(again.UID)) {
			return fmt.Errorf("certificate identity %s", leafURI(t, fresh.Data["tls.crt"]))
		}
		return nil
	})
	eventually(t, 30*time.Second, "the new certificate served", func() error {
		_, err := fetchListeners(r.xds, w.ns+"/alpha", &fresh, fresh.Data["ca.crt"])
		return err
	})
	_, err := fetchListeners(r.xds, w.ns+"/alpha", &old, old.Data["ca.crt"])
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("the deleted Gateway's certificate: %v, want Unauthenticated", err)
	}
}

// leafURI is the first URI SAN of the first certificate of certPEM.
func leafURI(t *testing.T, certPEM []byte) string {
	t.Helper()
	certs, err := pki.ParseCertificates(certPEM)
	if err != nil || len(certs[0].URIs) == 0 {
		t.Fatalf("certificate: %v", err)
	}
	return certs[0].URIs[0].String()
}
