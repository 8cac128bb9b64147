package file

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/portico-dev/portico/internal/resource"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 10 * time.Second

// records is a slog.Handler that sends every record to a channel.
type records chan slog.Record

func (r records) Enabled(context.Context, slog.Level) bool { return true }
func (r records) Handle(_ context.Context, rec slog.Record) error {
	r <- rec.Clone()
	return nil
}
func (r records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r records) WithGroup(string) slog.Handler      { return r }

// attrs returns the record's attributes as strings.
func attrs(rec slog.Record) map[string]string {
	m := map[string]string{}
	rec.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	return m
}

type harness struct {
	t     *testing.T
	dir   string
	snaps chan *resource.Snapshot
	logs  records
}

func startProvider(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), snaps: make(chan *resource.Snapshot, 100), logs: make(records, 1000)}
	h.write("a.yaml", service("a"))
	p := New(h.dir, func(s *resource.Snapshot) { h.snaps <- s }, slog.New(h.logs), 20*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(wait):
			t.Error("Run did not return after cancel")
		}
	})
	return h
}

func service(name string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata:\n  name: %s\n  namespace: default\nspec:\n  ports:\n  - port: 80\n", name)
}

// write writes a file atomically (temp file + rename), as config tools do.
func (h *harness) write(name, content string) {
	h.t.Helper()
	path := filepath.Join(h.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		h.t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(name))
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		h.t.Fatal(err)
	}
}

// waitSnapshot waits for a snapshot holding exactly the named services.
func (h *harness) waitSnapshot(names ...string) *resource.Snapshot {
	h.t.Helper()
	want := strings.Join(names, ",")
	timeout := time.After(wait)
	for {
		select {
		case s := <-h.snaps:
			var got []string
			for _, k := range resource.SortedKeys(s.Services) {
				got = append(got, k.Name)
			}
			if strings.Join(got, ",") == want {
				return s
			}
		case <-timeout:
			h.t.Fatalf("no snapshot with services %s", want)
		}
	}
}

// waitLog waits for a record with the message prefix and level.
func (h *harness) waitLog(level slog.Level, prefix string) slog.Record {
	h.t.Helper()
	timeout := time.After(wait)
	for {
		select {
		case r := <-h.logs:
			if r.Level == level && strings.HasPrefix(r.Message, prefix) {
				return r
			}
		case <-timeout:
			h.t.Fatalf("no %s log %q", level, prefix)
			return slog.Record{}
		}
	}
}

func TestLoadWatchBrokenAndFixed(t *testing.T) {
	h := startProvider(t)
	h.waitSnapshot("a")

	// A new file.
	h.write("b.yaml", service("b"))
	h.waitSnapshot("a", "b")

	// A new subdirectory with a file (the directory gets a watch).
	if err := os.Mkdir(filepath.Join(h.dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	h.write("sub/c.yaml", service("c"))
	h.waitSnapshot("a", "b", "c")
	// A later change inside the new subdirectory is seen too.
	h.write("sub/d.yaml", service("d"))
	h.waitSnapshot("a", "b", "c", "d")

	// A broken file: the error is logged with the file, nothing is delivered.
	for len(h.logs) > 0 {
		<-h.logs
	}
	h.write("broken.yaml", "apiVersion: v1\nkind: Service\nmetadata: [oops\n")
	rec := h.waitLog(slog.LevelError, "loading resources failed")
	a := attrs(rec)
	if !strings.HasSuffix(a["file"], "broken.yaml") || !strings.Contains(a["error"], "broken.yaml") {
		t.Errorf("error log does not name the file: %v", a)
	}

	// Fixing it delivers again. Snapshots delivered before that (reloads of
	// the earlier writes still in flight) must hold the last good state:
	// nothing came out of the broken one.
	h.write("broken.yaml", service("e"))
	timeout := time.After(wait)
	for done := false; !done; {
		select {
		case s := <-h.snaps:
			switch s.Services.Len() {
			case 5:
				done = true
			case 4:
			default:
				t.Fatalf("unexpected snapshot with %d services", s.Services.Len())
			}
		case <-timeout:
			t.Fatal("no snapshot after the fix")
		}
	}

	// Removing a file is a change too.
	if err := os.Remove(filepath.Join(h.dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	h.waitSnapshot("a", "c", "d", "e")
}

func TestUnknownKindWarns(t *testing.T) {
	h := startProvider(t)
	h.waitSnapshot("a")
	h.write("z.yaml", service("z")+"---\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n")
	h.waitSnapshot("a", "z")
	rec := h.waitLog(slog.LevelWarn, "skipped document")
	a := attrs(rec)
	if !strings.HasSuffix(a["file"], "z.yaml") || a["document"] != "1" || !strings.Contains(a["reason"], "Widget") {
		t.Errorf("warning = %v", a)
	}
}

func TestInitialBrokenThenFixed(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x.yaml"), []byte("kind: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	snaps := make(chan *resource.Snapshot, 10)
	logs := make(records, 100)
	p := New(dir, func(s *resource.Snapshot) { snaps <- s }, slog.New(logs), 10*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()

	h := &harness{t: t, dir: dir, snaps: snaps, logs: logs}
	h.waitLog(slog.LevelError, "loading resources failed")
	h.write("x.yaml", service("x"))
	h.waitSnapshot("x")
}

func TestMissingDirectory(t *testing.T) {
	p := New(filepath.Join(t.TempDir(), "nope"), func(*resource.Snapshot) {}, nil, 0)
	if err := p.Run(context.Background()); err == nil {
		t.Fatal("Run on a missing directory returned nil")
	}
}
