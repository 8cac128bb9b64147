package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	criportforward "k8s.io/cri-streaming/pkg/streaming/portforward"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/testenv"
)

const typeClusterURL = "type.googleapis.com/envoy.config.cluster.v3.Cluster"

// tokenKubeconfig writes a kubeconfig for cfg's API server with the bearer
// token of a new ServiceAccount default/name, bound to clusterRole when
// it is not empty.
func tokenKubeconfig(t *testing.T, ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, name, clusterRole string) string {
	t.Helper()
	token := saToken(t, ctx, cs, name)
	if clusterRole != "" {
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: name}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: name}
	kc.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// saToken creates the ServiceAccount default/name and returns a token of
// it.
func saToken(t *testing.T, ctx context.Context, cs kubernetes.Interface, name string) string {
	t.Helper()
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// sotwProxy opens a state-of-the-world ADS stream for the clusters of
// gateway as node and ACKs the first response.
func sotwProxy(t *testing.T, addr, node, gateway string) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); _ = conn.Close() })
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := &corev3.Node{Id: node, Cluster: gateway}
	if err := stream.Send(&discoveryv3.DiscoveryRequest{Node: n, TypeUrl: typeClusterURL}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&discoveryv3.DiscoveryRequest{Node: n, TypeUrl: typeClusterURL, VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce}); err != nil {
		t.Fatal(err)
	}
}

// `portico proxy-status --cluster` finds the controller's Pods itself,
// asks each replica for its proxies with the kubeconfig's bearer token
// (which the debug servers check with the API server) and lists the
// proxies of every replica in one table, at the Pods' IPs and through
// port-forwards of the API server (to a Node whose kubelet streaming is
// the Kubernetes project's own port-forward server); a token without the
// debug role gets each replica's refusal.
func TestProxyStatusCluster(t *testing.T) {
	cfg, kubeconfig := testenv.StartAPIServer(t)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "debug-reader"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/debug/*"}, Verbs: []string{"get"}},
			// What the chart's Role portico-debug-reader grants.
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{""}, Resources: []string{"pods/portforward"}, Verbs: []string{"create"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := gwv1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "portico"},
		Spec: gwv1.GatewayClassSpec{ControllerName: gatewayapi.DefaultControllerName}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gw"},
		Spec: gwv1.GatewaySpec{GatewayClassName: "portico", Listeners: []gwv1.Listener{{Name: "http", Port: 8080, Protocol: gwv1.HTTPProtocolType}}}}); err != nil {
		t.Fatal(err)
	}

	// A Node whose kubelet is the Kubernetes project's own port-forward
	// server (cri-streaming), forwarding to loopback: the API server
	// proxies pods/portforward to it as to a real kubelet.
	var forwarded atomic.Int64
	kubelet := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/") // portForward/<ns>/<pod>
		if len(parts) != 3 || parts[0] != "portForward" {
			http.NotFound(w, r)
			return
		}
		criportforward.ServePortForward(w, r, loopbackForwarder{&forwarded}, parts[2], "", nil, 30*time.Second, 30*time.Second, criportforward.SupportedProtocols)
	}))
	defer kubelet.Close()
	_, kport, _ := net.SplitHostPort(kubelet.Listener.Addr().String())
	kp, _ := strconv.Atoi(kport)
	node, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(kp)
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Two replicas, debug servers on every interface (HTTPS, tokens
	// checked), each with a Pod on node-1 that names its debug port.
	xds := map[string]string{}
	for _, name := range []string{"a", "b"} {
		stdout, stderr := &syncBuffer{}, &syncBuffer{}
		cctx, stop := context.WithCancel(context.Background())
		exited := make(chan int, 1)
		go func() {
			exited <- runContext(cctx, []string{"controller", "--kubeconfig", kubeconfig, "--namespace", "default", "--identity", "portico-" + name,
				"--xds-address", "127.0.0.1:0", "--admin-address", "127.0.0.1:0", "--debug-address", ":0",
				"--provision=false", "--xds-tls=false"}, stdout, stderr)
		}()
		t.Cleanup(func() {
			stop()
			select {
			case <-exited:
			case <-time.After(deadline):
				t.Errorf("controller %s did not stop", name)
			}
			if t.Failed() {
				t.Logf("controller %s stderr:\n%s", name, stderr)
			}
		})
		eventually(t, "controller "+name+" listening", func() bool { return controllerListeningRE.MatchString(stdout.String()) })
		m := controllerListeningRE.FindStringSubmatch(stdout.String())
		xds[name] = m[1]
		_, port, err := net.SplitHostPort(m[3])
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.Atoi(port)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "portico-" + name, Labels: map[string]string{"app.kubernetes.io/name": "portico"}},
			Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "portico", Image: "portico",
				Ports: []corev1.ContainerPort{{Name: "debug", ContainerPort: int32(p)}}}}}}
		pod, err = cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}}}
		if _, err := cs.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A Pod of the controller that does not run is not asked.
	if _, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "portico-pending",
		Labels: map[string]string{"app.kubernetes.io/name": "portico"}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "portico", Image: "portico"}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sotwProxy(t, xds["a"], "proxy-a", "default/gw")
	sotwProxy(t, xds["b"], "proxy-b", "default/gw")

	reader := tokenKubeconfig(t, ctx, cfg, cs, "debug-reader", "debug-reader")
	run := func(kc string, extra ...string) (int, string, string) {
		stdout, stderr := &syncBuffer{}, &syncBuffer{}
		args := append([]string{"proxy-status", "--cluster", "--kubeconfig", kc, "-n", "default", "--connect", "pod-ip"}, extra...)
		code := runContext(ctx, args, stdout, stderr)
		return code, stdout.String(), stderr.String()
	}
	var rows []proxyRow
	var last string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last proxy-status -o json:\n%s", last)
		}
	})
	eventually(t, "both replicas' proxies, their clusters acknowledged", func() bool {
		code, out, errOut := run(reader, "-o", "json")
		last = out + errOut
		rows = nil
		if code != exitOK || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 2 {
			return false
		}
		for _, r := range rows {
			if r.Types["CDS"].State != "SYNCED" {
				return false
			}
		}
		return true
	})
	for i, want := range []struct{ proxy, replica string }{{"proxy-a", "portico-a"}, {"proxy-b", "portico-b"}} {
		if r := rows[i]; r.Proxy != want.proxy || r.Replica != want.replica || r.Gateway != "default/gw" || r.Types["CDS"].Sent != r.Types["CDS"].Acked {
			t.Errorf("row %d = %+v, want %s on %s of default/gw, CDS acknowledged at the version sent", i, r, want.proxy, want.replica)
		}
	}
	code, out, errOut := run(reader)
	if code != exitOK || !strings.Contains(out, "proxy-a") || !strings.Contains(out, "proxy-b") || !strings.HasPrefix(out, "PROXY") {
		t.Errorf("table: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = run(reader, "proxy-b")
	if code != exitOK || !strings.Contains(out, "Proxy proxy-b of default/gw on portico-b") || strings.Contains(out, "proxy-a") {
		t.Errorf("proxy-b detail: exit %d\n%s\n%s", code, out, errOut)
	}

	// The default way: a port-forward through the API server to each Pod.
	eventually(t, "both replicas' proxies through port-forwards", func() bool {
		stdout, stderr := &syncBuffer{}, &syncBuffer{}
		code := runContext(ctx, []string{"proxy-status", "--cluster", "--kubeconfig", reader, "-n", "default", "-o", "json"}, stdout, stderr)
		last = stdout.String() + stderr.String()
		var pf []proxyRow
		return code == exitOK && json.Unmarshal([]byte(stdout.String()), &pf) == nil && len(pf) == 2 &&
			pf[0].Proxy == "proxy-a" && pf[1].Proxy == "proxy-b" && pf[0].Types["CDS"].State == "SYNCED" && pf[1].Types["CDS"].State == "SYNCED"
	})
	if forwarded.Load() < 2 {
		t.Errorf("the kubelet forwarded %d connections, want one per replica at least", forwarded.Load())
	}

	nobody := tokenKubeconfig(t, ctx, cfg, cs, "nobody", "")
	// nobody may not even list the Pods.
	if code, _, errOut := run(nobody); code == exitOK || !strings.Contains(errOut, "listing the controller's Pods") {
		t.Errorf("a token that may not list Pods: exit %d, %s", code, errOut)
	}
	// A token that may list the Pods but not read /debug is refused by
	// every replica.
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "pod-lister"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lister := tokenKubeconfig(t, ctx, cfg, cs, "lister", "pod-lister")
	eventually(t, "each replica refusing a token without the debug role", func() bool {
		code, _, errOut := run(lister)
		return code == exitError && strings.Count(errOut, "403 Forbidden") == 2
	})
}

// loopbackForwarder is the fake kubelet's PortForwarder: every Pod's
// port is that port on loopback.
type loopbackForwarder struct{ forwarded *atomic.Int64 }

func (f loopbackForwarder) PortForward(ctx context.Context, _, _ string, port int32, stream io.ReadWriteCloser) error {
	f.forwarded.Add(1)
	defer stream.Close()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
	if err != nil {
		return err
	}
	defer conn.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(conn, stream); done <- struct{}{} }()
	go func() { _, _ = io.Copy(stream, conn); done <- struct{}{} }()
	<-done
	return nil
}
