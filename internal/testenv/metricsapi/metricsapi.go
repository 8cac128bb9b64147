// Package metricsapi is a test's resource metrics API: it serves
// metrics.k8s.io/v1beta1 (the API metrics-server serves and the
// HorizontalPodAutoscaler controller reads) from a function the test
// controls, and registers itself in the cluster as the APIService
// v1beta1.metrics.k8s.io. With it the real HPA controller of the kwok
// cluster (hack/cluster-up.sh turns on the aggregation layer) scales on the
// load a test decides.
//
// Why not metrics-server: it scrapes kubelets, and the local data plane's
// Pods have no kubelet endpoint; what the HPA needs is the API, which
// this serves with the upstream types (k8s.io/metrics). Only Pod metrics
// are served (the HPA reads no Node metrics): a list, by namespace and
// label selector, of the Running Pods, each container's usage given by
// Usage.
package metricsapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Usage is a container's usage (cpu, memory) now; nil: no metrics for it.
type Usage func(pod *corev1.Pod, container string) corev1.ResourceList

// Server serves the API until Close.
type Server struct {
	srv *http.Server
	cs  kubernetes.Interface
	c   client.Client
	ns  string

	mu    sync.Mutex
	usage Usage
}

// Namespace-scoped names of the registration.
const serviceName = "portico-test-metrics"

// Start serves on addr (an address the API server reaches: the data
// plane's gateway address) and registers the APIService, backed by a
// Service of namespace ns without selector whose Endpoints name addr.
func Start(ctx context.Context, c client.Client, cs kubernetes.Interface, ns string, addr netip.Addr, usage Usage) (*Server, error) {
	cert, err := selfSigned(addr)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		return nil, err
	}
	s := &Server{cs: cs, c: c, ns: ns, usage: usage}
	s.srv = &http.Server{Handler: s.handler(), TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.ServeTLS(l, "", "") }()
	port := int32(l.Addr().(*net.TCPAddr).Port)
	if err := s.register(ctx, addr, port); err != nil {
		_ = s.srv.Close()
		return nil, err
	}
	return s, nil
}

// SetUsage replaces the usage function.
func (s *Server) SetUsage(u Usage) {
	s.mu.Lock()
	s.usage = u
	s.mu.Unlock()
}

// Close unregisters the APIService and stops serving.
func (s *Server) Close() error {
	ctx := context.Background()
	err := client.IgnoreNotFound(s.c.Delete(ctx, apiService()))
	return errors.Join(err, s.srv.Close())
}

func (s *Server) register(ctx context.Context, addr netip.Addr, port int32) error {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: serviceName}, Spec: corev1.ServiceSpec{
		Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(port)}},
	}}
	eps := &corev1.Endpoints{ //nolint:staticcheck // the aggregator resolves a selector-less Service through its endpoints
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: serviceName},
		Subsets: []corev1.EndpointSubset{{ //nolint:staticcheck
			Addresses: []corev1.EndpointAddress{{IP: addr.String()}},
			Ports:     []corev1.EndpointPort{{Name: "https", Port: port}}, //nolint:staticcheck
		}},
	}
	apisvc := apiService()
	apisvc.Object["spec"] = map[string]any{
		"service":               map[string]any{"namespace": s.ns, "name": serviceName, "port": int64(443)},
		"group":                 "metrics.k8s.io",
		"version":               "v1beta1",
		"insecureSkipTLSVerify": true,
		"groupPriorityMinimum":  int64(100),
		"versionPriority":       int64(100),
	}
	for _, obj := range []client.Object{svc, eps, apisvc} {
		if err := s.c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("metricsapi: creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	// Available once the aggregator reaches us.
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := apiService()
		err := s.c.Get(ctx, client.ObjectKeyFromObject(got), got)
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Available" && m["status"] == "True" {
					return nil
				}
			}
			err = fmt.Errorf("not Available: %v", conds)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("metricsapi: APIService v1beta1.metrics.k8s.io: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// apiService is the APIService object (apiregistration.k8s.io/v1,
// unstructured: no need for the aggregator's module).
func apiService() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apiregistration.k8s.io/v1")
	u.SetKind("APIService")
	u.SetName("v1beta1.metrics.k8s.io")
	return u
}

const prefix = "/apis/metrics.k8s.io/v1beta1"

func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+prefix, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, &metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: metricsv1beta1.SchemeGroupVersion.String(),
			APIResources: []metav1.APIResource{{Name: "pods", Namespaced: true, Kind: "PodMetrics", Verbs: []string{"get", "list"}}},
		})
	})
	mux.HandleFunc("GET "+prefix+"/namespaces/{ns}/pods", func(w http.ResponseWriter, r *http.Request) {
		s.list(w, r, r.PathValue("ns"), "")
	})
	mux.HandleFunc("GET "+prefix+"/namespaces/{ns}/pods/{name}", func(w http.ResponseWriter, r *http.Request) {
		s.list(w, r, r.PathValue("ns"), r.PathValue("name"))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	return mux
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, ns, name string) {
	pods, err := s.cs.CoreV1().Pods(ns).List(r.Context(), metav1.ListOptions{LabelSelector: r.URL.Query().Get("labelSelector")})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.mu.Lock()
	usage := s.usage
	s.mu.Unlock()
	now := metav1.Now()
	out := &metricsv1beta1.PodMetricsList{TypeMeta: metav1.TypeMeta{Kind: "PodMetricsList", APIVersion: metricsv1beta1.SchemeGroupVersion.String()}}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase != corev1.PodRunning || (name != "" && p.Name != name) {
			continue
		}
		pm := metricsv1beta1.PodMetrics{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels},
			Timestamp:  now,
			Window:     metav1.Duration{Duration: 15 * time.Second},
		}
		for _, c := range p.Spec.Containers {
			if u := usage(p, c.Name); u != nil {
				pm.Containers = append(pm.Containers, metricsv1beta1.ContainerMetrics{Name: c.Name, Usage: u})
			}
		}
		out.Items = append(out.Items, pm)
	}
	if name != "" {
		if len(out.Items) == 0 {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		pm := out.Items[0]
		pm.TypeMeta = metav1.TypeMeta{Kind: "PodMetrics", APIVersion: metricsv1beta1.SchemeGroupVersion.String()}
		writeJSON(w, &pm)
		return
	}
	writeJSON(w, out)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// selfSigned is a serving certificate for addr (the APIService skips
// verification: its caBundle would be this).
func selfSigned(addr netip.Addr) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "portico-test-metrics"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP(addr.String())},
		DNSNames:     []string{serviceName},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
