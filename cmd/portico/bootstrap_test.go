package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestBootstrapCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"bootstrap", "--gateway", "apps/edge", "--xds-address", "localhost:18001", "--node-id", "e1"}, &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var b struct {
		Node  struct{ ID, Cluster string } `json:"node"`
		Admin struct {
			Address struct {
				SocketAddress struct {
					Address   string `json:"address"`
					PortValue int    `json:"portValue"`
				} `json:"socketAddress"`
			} `json:"address"`
		} `json:"admin"`
	}
	if err := json.Unmarshal(out.Bytes(), &b); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	if b.Node.ID != "e1" || b.Node.Cluster != "apps/edge" {
		t.Errorf("node = %+v, want e1 apps/edge", b.Node)
	}
	if a := b.Admin.Address.SocketAddress; a.Address != "127.0.0.1" || a.PortValue != 9901 {
		t.Errorf("admin on %s:%d, want 127.0.0.1:9901", a.Address, a.PortValue)
	}
	if !strings.Contains(out.String(), `"localhost"`) || !strings.Contains(out.String(), "18001") {
		t.Errorf("xDS address localhost:18001 not in the bootstrap:\n%s", out.String())
	}

	for _, args := range [][]string{{"bootstrap"}, {"bootstrap", "--gateway", "edge"}, {"bootstrap", "--gateway", "a/b", "--xds-address", "nope"}} {
		out.Reset()
		errOut.Reset()
		if code := run(args, &out, &errOut); code != exitUsage || errOut.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q; want %d and a message", args, code, errOut.String(), exitUsage)
		}
	}
}
