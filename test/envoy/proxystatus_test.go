package envoy

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"testing"
	"time"
)

// proxyStatusRow is a row of `portico proxy-status -o json`.
type proxyStatusRow struct {
	Proxy   string `json:"proxy"`
	Gateway string `json:"gateway"`
	Types   map[string]struct {
		State string `json:"state"`
		Sent  string `json:"sent"`
		Acked string `json:"acked"`
		Error string `json:"error"`
	} `json:"types"`
}

// proxyStatus runs `portico proxy-status -o json` in the stack's
// namespace, against standalone's debug server (its default address).
func (s *stack) proxyStatus() ([]proxyStatusRow, error) {
	argv := append([]string{"20s"}, s.ns.Wrap([]string{porticoBin, "proxy-status", "-o", "json"})...)
	cmd := exec.Command("timeout", argv...)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("%v: %s", err, ee.Stderr)
		}
		return nil, err
	}
	var rows []proxyStatusRow
	if err := json.Unmarshal(out, &rows); err != nil {
		return nil, fmt.Errorf("%v: %s", err, out)
	}
	return rows, nil
}

// synced checks that rows list one proxy of default/quickstart with
// every type ACKed at the version sent, and returns its acked versions.
func synced(rows []proxyStatusRow) (map[string]string, error) {
	if len(rows) != 1 {
		return nil, fmt.Errorf("%d proxies listed, want 1: %+v", len(rows), rows)
	}
	r := rows[0]
	if r.Gateway != "default/quickstart" || r.Proxy == "" {
		return nil, fmt.Errorf("proxy %q of gateway %q", r.Proxy, r.Gateway)
	}
	acked := map[string]string{}
	for _, typ := range []string{"LDS", "CDS", "EDS"} {
		if _, ok := r.Types[typ]; !ok {
			return nil, fmt.Errorf("no %s in %+v", typ, r.Types)
		}
	}
	for typ, st := range r.Types {
		if st.State != "SYNCED" || st.Sent == "" || st.Acked != st.Sent {
			return nil, fmt.Errorf("%s: %+v", typ, st)
		}
		acked[typ] = st.Acked
	}
	return acked, nil
}

// TestProxyStatusStandalone: `portico proxy-status -o json` against
// standalone with one Envoy lists that Envoy with every type ACKed at the
// version sent, and, after a change of the resources directory, the new
// versions ACKed.
func TestProxyStatusStandalone(t *testing.T) {
	s := startStack(t, nil)
	var before map[string]string
	s.eventually(30*time.Second, "the Envoy listed with every type synced", func() error {
		rows, err := s.proxyStatus()
		if err == nil {
			before, err = synced(rows)
		}
		return err
	})

	// A new route: the route tables change, and Envoy ACKs them.
	changed := time.Now()
	s.write("httproute-new.yaml", `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: new
  namespace: default
spec:
  parentRefs:
  - name: quickstart
    sectionName: http
  hostnames:
  - new.example.com
  rules:
  - backendRefs:
    - name: app-v1
      port: 80
`)
	s.eventually(30*time.Second, "the new route tables ACKed", func() error {
		rows, err := s.proxyStatus()
		if err != nil {
			return err
		}
		after, err := synced(rows)
		if err != nil {
			return err
		}
		for typ, v := range after {
			if before[typ] != v {
				return nil
			}
		}
		return fmt.Errorf("no type ACKed a new version: %v", after)
	})
	t.Logf("resources changed → new version ACKed and listed by proxy-status: %s", time.Since(changed).Round(time.Millisecond))
}
