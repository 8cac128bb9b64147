package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// standalone is a `portico standalone` running in-process.
type standalone struct {
	t              *testing.T
	dir            string
	stdout, stderr *syncBuffer
	xds, admin     string // bound addresses
	debug          string
	stop           func()
}

var listeningRE = regexp.MustCompile(`xDS listening on (\S+), admin on (\S+), debug on (\S+)\n`)

func startStandalone(t *testing.T, dir string) *standalone {
	t.Helper()
	s := &standalone{t: t, dir: dir, stdout: &syncBuffer{}, stderr: &syncBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	go func() {
		exited <- runContext(ctx, []string{"standalone", "--resources", dir,
			"--xds-address", "127.0.0.1:0", "--admin-address", "127.0.0.1:0", "--debug-address", "127.0.0.1:0",
			"--debounce", "20ms", "--log-level", "debug"}, s.stdout, s.stderr)
	}()
	s.stop = func() {
		cancel()
		select {
		case code := <-exited:
			if code != 0 {
				t.Errorf("standalone exited %d; stderr:\n%s", code, s.stderr)
			}
		case <-time.After(deadline):
			t.Errorf("standalone did not stop")
		}
	}
	t.Cleanup(s.stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("standalone stdout:\n%s\nstderr:\n%s", s.stdout, s.stderr)
		}
	})
	eventually(t, "the listening line", func() bool { return listeningRE.MatchString(s.stdout.String()) })
	m := listeningRE.FindStringSubmatch(s.stdout.String())
	s.xds, s.admin, s.debug = m[1], m[2], m[3]
	return s
}

// get fetches a path of the admin server, or of the debug server for
// /debug/ paths, and returns the status code and body.
func (s *standalone) get(path string) (int, string) {
	s.t.Helper()
	addr := s.admin
	if strings.HasPrefix(path, "/debug/") {
		addr = s.debug
	}
	return getFrom(s.t, addr, path)
}

func getFrom(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// debugVersion is the version /debug/xds shows for default/gw.
func (s *standalone) debugVersion() string {
	s.t.Helper()
	code, body := s.get("/debug/xds?gateway=default/gw")
	if code != http.StatusOK {
		return ""
	}
	var v struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		s.t.Fatalf("/debug/xds: %v\n%s", err, body)
	}
	return v.Version
}

// adsClient is one ADS stream of node.cluster "default/gw" that ACKs every
// response and records it.
type adsClient struct {
	mu        sync.Mutex
	responses []*discoveryv3.DiscoveryResponse
}

func dialADS(t *testing.T, addr string, typeURLs ...string) *adsClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev3.Node{Id: "envoy-test", Cluster: "default/gw"}
	for _, u := range typeURLs {
		if err := stream.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: u}); err != nil {
			t.Fatal(err)
		}
	}
	c := &adsClient{}
	done := make(chan struct{})
	go func() { // the only sender from here on
		defer close(done)
		for {
			resp, err := stream.Recv()
			if err != nil {
				return
			}
			c.mu.Lock()
			c.responses = append(c.responses, resp)
			c.mu.Unlock()
			ack := &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: resp.TypeUrl,
				VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce}
			if stream.Send(ack) != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		conn.Close()
	})
	return c
}

// received returns the responses received so far.
func (c *adsClient) received() []*discoveryv3.DiscoveryResponse {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*discoveryv3.DiscoveryResponse(nil), c.responses...)
}

// waitResponse waits for a response of typeURL whose resource names are
// exactly names (sorted), and returns it.
func (c *adsClient) waitResponse(t *testing.T, typeURL string, names ...string) *discoveryv3.DiscoveryResponse {
	t.Helper()
	want := strings.Join(names, ",")
	var found *discoveryv3.DiscoveryResponse
	eventually(t, fmt.Sprintf("a %s response with %s", typeURL, want), func() bool {
		for _, resp := range c.received() {
			if resp.TypeUrl == typeURL && strings.Join(resourceNames(t, resp), ",") == want {
				found = resp
				return true
			}
		}
		return false
	})
	return found
}

func resourceNames(t *testing.T, resp *discoveryv3.DiscoveryResponse) []string {
	t.Helper()
	var names []string
	for _, a := range resp.Resources {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, cachev3.GetResourceName(m))
	}
	sort.Strings(names) // the cache sends resources in no particular order
	return names
}

// waitClusters waits for a CDS response with exactly the clusters names and
// returns its version.
func (c *adsClient) waitClusters(t *testing.T, names ...string) string {
	t.Helper()
	return c.waitResponse(t, resourcev3.ClusterType, names...).VersionInfo
}

func TestStandaloneEndToEnd(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "gateway.yaml", gatewayYAML)
	writeFile(t, dir, "web.yaml", backendYAML("web", "10.0.0.1"))
	s := startStandalone(t, dir)

	eventually(t, "/readyz 200", func() bool { code, _ := s.get("/readyz"); return code == http.StatusOK })
	if code, _ := s.get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d", code)
	}

	ads := dialADS(t, s.xds, resourcev3.ClusterType, resourcev3.ListenerType)
	// A change re-sends only the resources it touched (each type has its
	// own SotW version); /debug/xds shows the Gateway's version, a content
	// hash of everything.
	v1 := ads.waitClusters(t, clusterName("web"))
	lds := ads.waitResponse(t, resourcev3.ListenerType, listenerName).VersionInfo
	d1 := s.debugVersion()
	if d1 == "" || v1 == "" || lds == "" {
		t.Fatalf("empty versions: /debug/xds %q, CDS %q, LDS %q", d1, v1, lds)
	}

	// A new route and service: a new version arrives over ADS and shows in
	// /debug/xds.
	writeFile(t, dir, "api.yaml", backendYAML("api", "10.0.0.2"))
	v2 := ads.waitClusters(t, clusterName("api"), clusterName("web"))
	if v2 == v1 {
		t.Fatalf("version unchanged after a change: %s", v2)
	}
	eventually(t, "/debug/xds at a new version", func() bool { return s.debugVersion() != d1 })
	d2 := s.debugVersion()
	_, body := s.get("/debug/xds?gateway=default/gw")
	if !strings.Contains(body, `"default/api/80"`) {
		t.Errorf("/debug/xds lacks the new cluster:\n%s", body)
	}
	if code, body := s.get("/debug/status"); code != http.StatusOK || !strings.Contains(body, `"HTTPRoute"`) {
		t.Errorf("/debug/status = %d\n%s", code, body)
	}

	// A broken file: the provider logs the error naming it, and the last
	// good configuration stays.
	errLine := regexp.MustCompile(`level=ERROR msg="loading resources failed[^"]*".*file=\S*broken\.yaml`)
	before := len(ads.received())
	writeFile(t, dir, "broken.yaml", "apiVersion: v1\nkind: Service\nmetadata: [oops\n")
	eventually(t, "the load error in the log", func() bool { return errLine.MatchString(s.stderr.String()) })
	if got := s.debugVersion(); got != d2 {
		t.Errorf("/debug/xds version changed to %s after a broken file, want %s", got, d2)
	}
	for _, r := range ads.received()[before:] {
		if r.TypeUrl == resourcev3.ClusterType && r.VersionInfo != v2 {
			t.Errorf("ADS pushed clusters at version %s after a broken file", r.VersionInfo)
		}
	}
	if code, _ := s.get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz = %d with a last good configuration", code)
	}

	// Fixing it proceeds.
	writeFile(t, dir, "broken.yaml", backendYAML("fixed", "10.0.0.3"))
	v3 := ads.waitClusters(t, clusterName("api"), clusterName("fixed"), clusterName("web"))
	if v3 == v2 {
		t.Fatalf("version unchanged after the fix")
	}
	eventually(t, "/debug/xds at the fixed version", func() bool { return s.debugVersion() != d2 })
	if !strings.Contains(s.stdout.String(), fmt.Sprintf("xDS listening on %s, admin on %s", s.xds, s.admin)) {
		t.Errorf("stdout: %q", s.stdout.String())
	}
}

// TestStandaloneNotReadyUntilFirstTranslation starts on a broken directory:
// nothing is translated, /readyz is 503 and xDS is not served, until the
// file is fixed.
func TestStandaloneNotReadyUntilFirstTranslation(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "gateway.yaml", "kind: [\n")
	s := startStandalone(t, dir)
	eventually(t, "the load error in the log", func() bool {
		return strings.Contains(s.stderr.String(), "loading resources failed")
	})
	if code, _ := s.get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz = %d before the first translation, want 503", code)
	}
	if code, _ := s.get("/debug/xds?gateway=default/gw"); code != http.StatusNotFound {
		t.Errorf("/debug/xds = %d before the first translation, want 404", code)
	}
	if strings.Contains(s.stderr.String(), "serving xDS") {
		t.Errorf("xDS served before the first translation")
	}
	writeFile(t, dir, "gateway.yaml", gatewayYAML)
	eventually(t, "/readyz 200", func() bool { code, _ := s.get("/readyz"); return code == http.StatusOK })
	ads := dialADS(t, s.xds, resourcev3.ClusterType)
	ads.waitClusters(t) // a gateway with no routes has no clusters
}
