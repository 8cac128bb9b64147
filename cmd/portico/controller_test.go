package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

func TestControllerCommandErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-kubeconfig")
	var out, errb bytes.Buffer
	if code := run([]string{"controller", "--kubeconfig", missing}, &out, &errb); code != exitError {
		t.Fatalf("exit = %d, want %d; stderr: %s", code, exitError, errb.String())
	}
	if !strings.Contains(errb.String(), "no-kubeconfig") {
		t.Errorf("stderr does not name the kubeconfig: %s", errb.String())
	}
	errb.Reset()
	if code := run([]string{"controller", "--log-level", "loud"}, &out, &errb); code != exitUsage {
		t.Fatalf("exit = %d, want %d for a bad flag value", code, exitUsage)
	}
	for _, bad := range [][]string{{"--gc-percent", "-5"}, {"--memory-limit-ratio", "1.5"}} {
		errb.Reset()
		if code := run(append([]string{"controller", "--kubeconfig", missing}, bad...), &out, &errb); code != exitUsage {
			t.Errorf("%v: exit = %d, want %d", bad, code, exitUsage)
		}
		if !strings.Contains(errb.String(), bad[0]) {
			t.Errorf("%v: stderr does not name the flag: %s", bad, errb.String())
		}
		errb.Reset()
		if code := run(append([]string{"standalone", "--resources", t.TempDir()}, bad...), &out, &errb); code != exitUsage {
			t.Errorf("standalone %v: exit = %d, want %d", bad, code, exitUsage)
		}
	}
	errb.Reset()
	code := run([]string{"controller", "--kubeconfig", missing, "--lease-duration", "1s", "--renew-deadline", "2s"}, &out, &errb)
	if code != exitError {
		t.Fatalf("exit = %d, want %d", code, exitError)
	}
}
