package envoy

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// retryBackends are quickstartBackends and the flaky backend of
// testdata/retry.yaml (the echo server's /retry/ simulation).
var retryBackends = append(append([]backend(nil), quickstartBackends...), backend{pod: "flaky", port: 9005})

// TestRetry checks HTTPRoute retry through Envoy (testdata/retry.yaml):
// status codes and attempts, attempts 0, resets after the request was
// sent (not retried), connection failures (retried on another endpoint),
// and the interplay with timeouts.request and timeouts.backendRequest.
// The backend's retry simulation fails the first succeedAfter tries of a
// request id (uuid), with responseCode or by resetting the connection,
// optionally after delayRetry; Envoy's upstream_rq_retry counter shows
// how many retries were made.
func TestRetry(t *testing.T) {
	s := startStack(t, map[string]string{"retry.yaml": readTestdata(t, "retry.yaml")}, retryBackends...)
	c := s.client(nil)
	const host = "retry.example.com"
	s.routed(c, "http://127.0.0.1:8080/connection/retry/ready", host, "app-v1")
	s.routed(c, "http://127.0.0.1:8080/retry/codes/ready?uuid=ready&succeedAfter=0", host, "flaky")

	n := 0
	// try sends one request with a fresh uuid and the simulation's
	// parameters; it returns the status and the retries Envoy made.
	try := func(path string, params ...string) (int, int64) {
		t.Helper()
		n++
		q := url.Values{"uuid": {fmt.Sprintf("%s-%d-%d", t.Name(), n, time.Now().UnixNano())}}
		for i := 0; i+1 < len(params); i += 2 {
			q.Set(params[i], params[i+1])
		}
		before := s.retries(t, "flaky")
		r, err := s.get(c, "http://127.0.0.1:8080"+path+"?"+q.Encode(), host)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return r.code, s.retries(t, "flaky") - before
	}
	for _, tc := range []struct {
		name    string
		path    string
		params  []string
		code    int
		retries int64
	}{
		{"a listed code is retried until the backend recovers", "/retry/codes", []string{"responseCode", "500", "succeedAfter", "2"}, 200, 2},
		{"every listed code is retried", "/retry/codes", []string{"responseCode", "502", "succeedAfter", "1"}, 200, 1},
		{"more failures than attempts return the last error", "/retry/codes", []string{"responseCode", "500", "succeedAfter", "3"}, 500, 2},
		{"a code not listed is not retried", "/retry/codes", []string{"responseCode", "503", "succeedAfter", "1"}, 503, 0},
		{"attempts 0 disables retries", "/retry/off", []string{"responseCode", "500", "succeedAfter", "1"}, 500, 0},
		// The simulation resets the connection after reading the request:
		// the backend may have processed it, so it is not retried.
		{"a reset after the request was sent is not retried", "/retry/codes", []string{"succeedAfter", "1"}, 503, 0},
		{"retries within the request timeout succeed", "/retry/request-timeout", []string{"responseCode", "500", "succeedAfter", "1"}, 200, 1},
		// Two failing tries of 300ms each exceed timeouts.request (500ms):
		// the whole exchange is cut with 504, retries included.
		{"the request timeout bounds all tries together", "/retry/request-timeout", []string{"responseCode", "500", "succeedAfter", "2", "delayRetry", "300ms"}, 504, 1},
		// The first try outlives timeouts.backendRequest (200ms) and is
		// cut; the rule retries 504, so the next try is made and succeeds.
		{"a try cut by the backend timeout is retried when 504 is listed", "/retry/per-try-504", []string{"responseCode", "500", "succeedAfter", "1", "delayRetry", "1s"}, 200, 1},
		{"a try cut by the backend timeout is not retried when 504 is not listed", "/retry/per-try-500", []string{"responseCode", "500", "succeedAfter", "1", "delayRetry", "1s"}, 504, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, retries := try(tc.path, tc.params...)
			if code != tc.code || retries != tc.retries {
				t.Fatalf("GET %s %v: status %d after %d retries, want %d after %d", tc.path, tc.params, code, retries, tc.code, tc.retries)
			}
		})
	}

	// Connection failures: half-broken has a refused endpoint and a
	// healthy one, picked in turn (round robin). With a retry stanza a
	// refused connection is retried on the other endpoint; without one,
	// every other request fails.
	t.Run("connection failures are retried on another endpoint", func(t *testing.T) {
		const requests = 20
		failed := 0
		for range requests {
			r, err := s.get(c, "http://127.0.0.1:8080/connection/retry", host)
			if err != nil {
				t.Fatal(err)
			}
			if r.code != http.StatusOK || r.echo == nil || r.echo.Pod != "app-v1" {
				failed++
			}
		}
		if failed > 0 {
			t.Fatalf("%d of %d requests failed with a retry stanza", failed, requests)
		}
		failed = 0
		for range requests {
			r, err := s.get(c, "http://127.0.0.1:8080/connection/none", host)
			if err != nil {
				t.Fatal(err)
			}
			if r.code != http.StatusOK {
				failed++
			}
		}
		if failed == 0 {
			t.Fatalf("all %d requests without a retry stanza succeeded: the refused endpoint was never picked", requests)
		}
	})
}

// retries is Envoy's count of retries to the cluster of Service name.
func (s *stack) retries(t *testing.T, service string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := s.envoy.Stat(ctx, "cluster.default/"+service+"/80.upstream_rq_retry")
	if err != nil {
		t.Fatal(err)
	}
	return v
}
