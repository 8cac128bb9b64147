package rollout

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/portico-dev/portico/internal/xds/translate"
)

// TestMetricsAndAccessLogs: a provisioned proxy's metrics port, scraped
// at the Pod's IP as Prometheus would (its scrape annotations name it),
// counts the requests of the route's backend cluster; its Envoy
// container's log, read through the API server (kubectl logs), has one
// JSON access-log line per request with the default fields.
func TestMetricsAndAccessLogs(t *testing.T) {
	c := env(t)
	f := newGateway(t, c, "observe", proxyConfig(1))
	addr := f.address(t, 120*time.Second)
	f.settled(t, 1, 120*time.Second)
	pod := f.pods(t)[0]
	ann := pod.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/path"] != "/stats/prometheus" {
		t.Fatalf("scrape annotations %v", ann)
	}
	scrape := "http://" + pod.Status.PodIP + ":" + ann["prometheus.io/port"] + ann["prometheus.io/path"]
	cluster := f.ns + "/echo/8080"
	before := upstreamRequests(t, scrape, cluster)

	const n = 7
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range n {
		resp, err := client.Get(fmt.Sprintf("http://%s/observe?i=%d", addr, i))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %s", i, resp.Status)
		}
	}
	eventually(t, 10*time.Second, "the cluster's request count", func() error {
		if got := upstreamRequests(t, scrape, cluster) - before; got != n {
			return fmt.Errorf("envoy_cluster_upstream_rq_total of %s grew by %d, want %d", cluster, got, n)
		}
		return nil
	})

	cs := kubernetes.NewForConfigOrDie(harness.cfg)
	eventually(t, 20*time.Second, "one access-log line per request", func() error {
		raw, err := cs.CoreV1().Pods(f.ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "envoy"}).Do(context.Background()).Raw()
		if err != nil {
			return err
		}
		seen := map[string]int{}
		sc := bufio.NewScanner(strings.NewReader(string(raw)))
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "{") {
				continue // not an access-log line
			}
			var entry map[string]any
			if err := json.Unmarshal([]byte(line), &entry); err != nil {
				return fmt.Errorf("access-log line %q: %v", line, err)
			}
			path, _ := entry["path"].(string)
			if !strings.HasPrefix(path, "/observe?i=") {
				continue
			}
			for _, field := range translate.DefaultAccessLogFields {
				if _, ok := entry[field.Name]; !ok {
					return fmt.Errorf("access-log line lacks %q: %s", field.Name, line)
				}
			}
			if entry["method"] != "GET" || entry["response_code"] != float64(200) || entry["upstream_cluster"] != cluster {
				return fmt.Errorf("access-log line %s", line)
			}
			seen[path]++
		}
		for i := range n {
			if p := "/observe?i=" + strconv.Itoa(i); seen[p] != 1 {
				return fmt.Errorf("%d lines for %s (all: %v)", seen[p], p, seen)
			}
		}
		return nil
	})
}

// upstreamRequests is envoy_cluster_upstream_rq_total of cluster in a
// Prometheus scrape.
func upstreamRequests(t *testing.T, url, cluster string) int64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scraping %s: %s", url, resp.Status)
	}
	want := `envoy_cluster_upstream_rq_total{envoy_cluster_name="` + cluster + `"}`
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), want+" "); ok {
			v, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", sc.Text(), err)
			}
			return v
		}
	}
	return 0
}
