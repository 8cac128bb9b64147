package admin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/portico-dev/portico/internal/testenv"
)

// The authenticated debug server against a real kube-apiserver (envtest):
// a ServiceAccount token whose user a ClusterRole allows get on
// nonResourceURLs ["/debug/*"] gets 200, another ServiceAccount's token
// 403, a token the API server did not issue and no token 401. The server
// listens on every interface with TLS (the configuration that requires
// authentication). Without the binaries of hack/kube-binaries.sh the test
// skips, except in CI.
func TestKubernetesAuth(t *testing.T) {
	assets, err := testenv.BinaryDir()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (CI=true: failing instead of skipping)", err)
		}
		t.Skipf("no kube-apiserver: %v (run hack/kube-binaries.sh)", err)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting kube-apiserver and etcd: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const ns = "debug-auth"
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}))
	token := func(sa string) string {
		t.Helper()
		must(cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}))
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("token of %s: %v", sa, err)
		}
		return tr.Status.Token
	}
	allowed, denied := token("operator"), token("intruder")
	must(cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "portico-debug-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/debug/*"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}))
	must(cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "portico-debug-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "portico-debug-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "operator"}},
	}, metav1.CreateOptions{}))
	// RBAC takes effect asynchronously; wait for it with the API server's
	// own answer, so that the filter does not cache an early denial.
	operator := "system:serviceaccount:" + ns + ":operator"
	deadline := time.Now().Add(30 * time.Second)
	for {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: operator, NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/debug/xds", Verb: "get"},
		}}, metav1.CreateOptions{})
		if err == nil && sar.Status.Allowed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ClusterRoleBinding did not take effect: %v %+v", err, sar)
		}
		time.Sleep(50 * time.Millisecond)
	}

	auth, err := KubernetesAuth(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := newFake()
	tlsConfig, caPEM, err := SelfSignedTLS()
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	d := NewDebug(DebugOptions{Source: src, Auth: auth, TLS: tlsConfig})
	d.Handle("GET /debug/leader", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "leader") }))
	lis, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	addr := serveDebug(t, d, lis)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	t.Cleanup(client.CloseIdleConnections)
	get := func(path, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/debug/xds?gateway=ns/gw", "/debug/status", "/debug/leader"} {
		for _, tc := range []struct {
			who, token string
			want       int
		}{
			{"no token", "", http.StatusUnauthorized},
			{"a token the API server did not issue", "not-a-token", http.StatusUnauthorized},
			{"a ServiceAccount without the role", denied, http.StatusForbidden},
			{"the ServiceAccount with the role", allowed, http.StatusOK},
		} {
			code, body := get(path, tc.token)
			if code != tc.want {
				t.Errorf("GET %s with %s = %d %q, want %d", path, tc.who, code, body, tc.want)
			}
			if code != http.StatusOK && (body == string(src.xds["ns/gw"].(doc)) || body == "leader") {
				t.Errorf("GET %s with %s answered the view", path, tc.who)
			}
		}
	}
	if code, body := get("/debug/xds?gateway=ns/gw", allowed); body != string(src.xds["ns/gw"].(doc)) {
		t.Errorf("allowed: %d %q, want the document", code, body)
	}
}
