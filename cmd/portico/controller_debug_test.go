package main

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/portico-dev/portico/internal/testenv"
)

var controllerListeningRE = regexp.MustCompile(`xDS on (\S+), admin on (\S+), debug on (\S+), Lease`)

// `portico controller --debug-address :PORT` (every interface) serves
// /debug over HTTPS and only to a bearer token whose user may get the
// path (a real API server: envtest); /debug stays off the admin address.
func TestControllerDebugOffLoopbackAuthenticates(t *testing.T) {
	cfg, kubeconfig := testenv.StartAPIServer(t)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	reader, nobody := saToken(t, ctx, cs, "debug-reader"), saToken(t, ctx, cs, "nobody")
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "debug-reader"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/debug/*"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "debug-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "debug-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: "debug-reader"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ClusterRoleBinding to take effect", func() bool {
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:default:debug-reader", NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/debug/leader", Verb: "get"},
		}}, metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed
	})

	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	cctx, stop := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	go func() {
		exited <- runContext(cctx, []string{"controller", "--kubeconfig", kubeconfig, "--namespace", "default", "--identity", "test",
			"--xds-address", "127.0.0.1:0", "--admin-address", "127.0.0.1:0", "--debug-address", ":0",
			"--provision=false", "--xds-tls=false"}, stdout, stderr)
	}()
	t.Cleanup(func() {
		stop()
		select {
		case code := <-exited:
			if code != exitOK {
				t.Errorf("controller exited %d\n%s", code, stderr)
			}
		case <-time.After(deadline):
			t.Error("controller did not stop")
		}
		if t.Failed() {
			t.Logf("controller stderr:\n%s", stderr)
		}
	})
	eventually(t, "the listening line", func() bool { return controllerListeningRE.MatchString(stdout.String()) })
	m := controllerListeningRE.FindStringSubmatch(stdout.String())
	admin := m[2]
	_, port, err := net.SplitHostPort(m[3])
	if err != nil {
		t.Fatalf("debug address %q: %v", m[3], err)
	}
	debug := "127.0.0.1:" + port

	// The certificate is made at start; this checks that the transport is
	// TLS, not who signed it.
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer client.CloseIdleConnections()
	get := func(scheme, token string) (int, string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+debug+"/debug/leader", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	eventually(t, "the debug server", func() bool { _, _, err := get("https", ""); return err == nil })
	for _, tc := range []struct {
		who, token string
		want       int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a ServiceAccount without the role", nobody, http.StatusForbidden},
		{"the ServiceAccount with the role", reader, http.StatusOK},
	} {
		code, body, err := get("https", tc.token)
		if err != nil || code != tc.want {
			t.Errorf("GET /debug/leader with %s = %d %q %v, want %d", tc.who, code, body, err, tc.want)
		}
		if tc.want == http.StatusOK && !strings.Contains(body, `"identity":"test"`) {
			t.Errorf("GET /debug/leader = %q", body)
		}
	}
	if code, body, err := get("http", reader); err == nil && code == http.StatusOK {
		t.Errorf("plain HTTP answered %d %q: the token crossed in clear text", code, body)
	}
	if code, _ := getFrom(t, admin, "/debug/leader"); code != http.StatusNotFound {
		t.Errorf("admin /debug/leader = %d, want 404", code)
	}
}
