package load

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/resource"
)

// loadDeadline bounds every load of these tests: a load that blocks (a
// FIFO opened for reading waits for a writer forever) or runs away fails
// the test instead of hanging it.
const loadDeadline = time.Minute

type loadResult struct {
	snap     *resource.Snapshot
	warnings []Warning
	err      error
	// allocated is the number of bytes the load allocated.
	allocated uint64
}

// loadWithin runs load in a goroutine and fails the test when it has not
// returned within loadDeadline.
func loadWithin(t *testing.T, load func() (*resource.Snapshot, []Warning, error)) loadResult {
	t.Helper()
	done := make(chan loadResult, 1)
	go func() {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s, w, err := load()
		runtime.ReadMemStats(&after)
		done <- loadResult{snap: s, warnings: w, err: err, allocated: after.TotalAlloc - before.TotalAlloc}
	}()
	select {
	case r := <-done:
		return r
	case <-time.After(loadDeadline):
		t.Fatalf("load did not return within %s", loadDeadline)
		return loadResult{}
	}
}

// wantRefused checks that err is a *Error naming file whose message
// contains want.
func wantRefused(t *testing.T, err error, file, want string) {
	t.Helper()
	var le *Error
	if !errors.As(err, &le) {
		t.Fatalf("err = %v, want a *Error naming %s", err, file)
	}
	if le.File != file || !strings.Contains(err.Error(), file) {
		t.Errorf("error %q does not name %s", err, file)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

func TestLoadRefusesSymlinkToDevZero(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	dir := t.TempDir()
	write(t, dir, "a.yaml", service("a"))
	link := filepath.Join(dir, "zero.yaml")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	r := loadWithin(t, func() (*resource.Snapshot, []Warning, error) { return Paths(dir) })
	wantRefused(t, r.err, link, "outside")
	// Nothing was read from the device: far less than one file's limit.
	if r.allocated > 8<<20 {
		t.Errorf("the load allocated %d bytes", r.allocated)
	}
}

func TestLoadRefusesSymlinkOutOfTheDirectory(t *testing.T) {
	outside := write(t, t.TempDir(), "secret.yaml", service("outside"))
	dir := t.TempDir()
	write(t, dir, "a.yaml", service("a"))
	link := filepath.Join(dir, "link.yaml")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	r := loadWithin(t, func() (*resource.Snapshot, []Warning, error) { return Paths(dir) })
	wantRefused(t, r.err, link, "outside")

	// A relative one that climbs out is refused the same way.
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, outside)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(rel, link); err != nil {
		t.Fatal(err)
	}
	r = loadWithin(t, func() (*resource.Snapshot, []Warning, error) { return Paths(dir) })
	wantRefused(t, r.err, link, "outside")
}

func TestLoadFollowsSymlinkInsideTheDirectory(t *testing.T) {
	// A Kubernetes ConfigMap volume: name.yaml → ..data/name.yaml, ..data →
	// ..2026_01_01 (hidden directories, not walked themselves).
	dir := t.TempDir()
	write(t, dir, "..2026_01_01/a.yaml", service("a"))
	if err := os.Symlink("..2026_01_01", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..data", "a.yaml"), filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	r := loadWithin(t, func() (*resource.Snapshot, []Warning, error) { return Paths(dir) })
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.snap.Services.Len() != 1 {
		t.Errorf("got %d services through the symlink, want 1", r.snap.Services.Len())
	}
}

func TestLoadDoesNotBlockOnFIFO(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", service("a"))
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	r := loadWithin(t, func() (*resource.Snapshot, []Warning, error) { return Paths(dir) })
	wantRefused(t, r.err, fifo, "not a regular file")

	// Named on its own, and through a symlink inside the directory.
	r = loadWithin(t, func() (*resource.Snapshot, []Warning, error) { return Paths(fifo) })
	wantRefused(t, r.err, fifo, "not a regular file")
	if err := os.Rename(fifo, filepath.Join(dir, "fifo")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("fifo", fifo); err != nil {
		t.Fatal(err)
	}
	r = loadWithin(t, func() (*resource.Snapshot, []Warning, error) { return Paths(dir) })
	wantRefused(t, r.err, fifo, "not a regular file")
}

func TestLoadRefusesOversizedFile(t *testing.T) {
	dir := t.TempDir()
	// A valid manifest padded with comments past the default limit.
	big := service("big") + strings.Repeat("# padding padding padding padding\n", (DefaultMaxFileBytes/34)+1)
	f := write(t, dir, "big.yaml", big)
	r := loadWithin(t, func() (*resource.Snapshot, []Warning, error) { return Paths(dir) })
	wantRefused(t, r.err, f, "larger than")
	if r.allocated > 2*DefaultMaxFileBytes {
		t.Errorf("the load allocated %d bytes for a file it refused", r.allocated)
	}
}

// nestedList returns a List whose single item is a List, depth times, with
// a Namespace at the bottom.
func nestedList(depth int) string {
	var b strings.Builder
	for range depth {
		b.WriteString(`{"apiVersion":"v1","kind":"List","items":[`)
	}
	b.WriteString(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"deep"}}`)
	for range depth {
		b.WriteString(`]}`)
	}
	b.WriteString("\n")
	return b.String()
}

func TestLoadRefusesDeeplyNestedList(t *testing.T) {
	dir := t.TempDir()
	f := write(t, dir, "deep.yaml", nestedList(1000)) // 44 kB
	r := loadWithin(t, func() (*resource.Snapshot, []Warning, error) { return Paths(dir) })
	wantRefused(t, r.err, f, "nested")

	// Lists nested within the limit load.
	write(t, dir, "deep.yaml", nestedList(DefaultMaxListDepth))
	r = loadWithin(t, func() (*resource.Snapshot, []Warning, error) { return Paths(dir) })
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !r.snap.Namespaces.Has("deep") {
		t.Errorf("namespace of a List nested %d deep not loaded", DefaultMaxListDepth)
	}
}

func TestLoadRefusesTooManyObjects(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	// Objects of kinds the loader skips count too (and cost it less time).
	for i := range DefaultMaxObjects + 1 {
		fmt.Fprintf(&b, "---\n{apiVersion: v1, kind: ServiceAccount, metadata: {name: c%d}}\n", i)
	}
	f := write(t, dir, "many.yaml", b.String())
	r := loadWithin(t, func() (*resource.Snapshot, []Warning, error) { return Paths(dir) })
	wantRefused(t, r.err, f, "objects")

	// The same in one List (with a lower limit, so that the List stays
	// under the limit on the size of a document), unknown kinds included.
	b.Reset()
	b.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	for i := range 100 {
		fmt.Fprintf(&b, "- {apiVersion: v1, kind: ServiceAccount, metadata: {name: cm-%d}}\n", i)
	}
	write(t, dir, "many.yaml", b.String())
	opts := Options{Limits: Limits{MaxObjects: 99}}
	r = loadWithin(t, func() (*resource.Snapshot, []Warning, error) { return PathsWith(opts, dir) })
	wantRefused(t, r.err, f, "more than 99 objects")
	opts.Limits.MaxObjects = 100
	r = loadWithin(t, func() (*resource.Snapshot, []Warning, error) { return PathsWith(opts, dir) })
	if r.err != nil {
		t.Fatalf("100 objects with a limit of 100: %v", r.err)
	}
	if len(r.warnings) != 1 || !strings.Contains(r.warnings[0].Message, "and 90 more items skipped") {
		t.Errorf("warnings = %v, want one naming 10 items and 90 more", r.warnings)
	}

	// Empty documents are not objects: many of them load.
	write(t, dir, "many.yaml", strings.Repeat("---\n", 4*DefaultMaxObjects)+service("s"))
	r = loadWithin(t, func() (*resource.Snapshot, []Warning, error) { return Paths(dir) })
	if r.err != nil || r.snap.Services.Len() != 1 {
		t.Fatalf("err = %v, services = %v", r.err, r.snap)
	}
}

func service(name string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: default}\nspec: {ports: [{port: 80}]}\n", name)
}

// TestLoadSkipRefused: with SkipRefused every refused file is a warning
// naming it, with its reason, and the other files load; a file refused
// part way through adds none of its objects.
func TestLoadSkipRefused(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.yaml", service("a"))
	outside := write(t, t.TempDir(), "outside.yaml", service("outside"))
	want := map[string]Reason{}
	link := func(name, target string, r Reason) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		want[filepath.Join(dir, name)] = r
	}
	link("out.yaml", outside, ReasonOutside)
	link("climb.yaml", filepath.Join("..", filepath.Base(filepath.Dir(outside)), "outside.yaml"), ReasonOutside)
	// An absolute symlink is refused even when it points inside.
	link("abs.yaml", filepath.Join(dir, "a.yaml"), ReasonOutside)
	link("dangling.yaml", "nope.yaml", ReasonBrokenSymlink)
	link("dir.yaml", ".", ReasonNotRegular)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.yaml"), 0o644); err == nil {
		want[filepath.Join(dir, "fifo.yaml")] = ReasonNotRegular
	}
	want[write(t, dir, "big.yaml", service("big")+strings.Repeat("#\n", 600))] = ReasonTooLarge
	want[write(t, dir, "deep.yaml", service("before")+"---\n"+nestedList(3))] = ReasonListTooDeep
	want[write(t, dir, "many.yaml", service("m1")+"---\n"+service("m2")+"---\n"+service("m3"))] = ReasonTooManyObjects
	want[write(t, dir, "doc.yaml", service("d")+"---\n"+service("long-"+strings.Repeat("x", 200)))] = ReasonTooLarge

	opts := Options{SkipRefused: true, Limits: Limits{MaxFileBytes: 1000, MaxDocumentBytes: 200, MaxObjects: 2, MaxListDepth: 2}}
	r := loadWithin(t, func() (*resource.Snapshot, []Warning, error) { return PathsWith(opts, dir) })
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := resource.SortedKeys(r.snap.Services); len(got) != 1 || got[0].Name != "a" {
		t.Errorf("services = %v, want only default/a", got)
	}
	got := map[string]Reason{}
	for _, w := range r.warnings {
		got[w.File] = w.Reason
		if !strings.Contains(w.String(), w.File) || w.Message == "" {
			t.Errorf("warning %+v does not name its file and problem", w)
		}
	}
	for f, reason := range want {
		if got[f] != reason {
			t.Errorf("%s: warning reason %q, want %q", filepath.Base(f), got[f], reason)
		}
	}
	if len(got) != len(want) {
		t.Errorf("warnings = %v, want one for each of %v", r.warnings, want)
	}

	// Without SkipRefused the first refused file (in lexical order) fails
	// the load.
	opts.SkipRefused = false
	r = loadWithin(t, func() (*resource.Snapshot, []Warning, error) { return PathsWith(opts, dir) })
	wantRefused(t, r.err, filepath.Join(dir, "abs.yaml"), "outside")
	var refusedErr *RefusedError
	if !errors.As(r.err, &refusedErr) || refusedErr.Reason != ReasonOutside {
		t.Errorf("err = %#v, want a RefusedError of reason %s", r.err, ReasonOutside)
	}
}

// TestLoadTotalLimit: files that together exceed MaxTotalBytes fail the
// load as a whole, even with SkipRefused.
func TestLoadTotalLimit(t *testing.T) {
	dir := t.TempDir()
	a := write(t, dir, "a.yaml", service("a"))
	b := write(t, dir, "b.yaml", service("b"))
	st, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{SkipRefused: true, Limits: Limits{MaxTotalBytes: 2*st.Size() - 1}}
	r := loadWithin(t, func() (*resource.Snapshot, []Warning, error) { return PathsWith(opts, dir) })
	wantRefused(t, r.err, b, "total size")
	if r.snap != nil {
		t.Errorf("a snapshot came out of a load over the total limit")
	}
	opts.Limits.MaxTotalBytes = 2 * st.Size()
	r = loadWithin(t, func() (*resource.Snapshot, []Warning, error) { return PathsWith(opts, dir) })
	if r.err != nil || r.snap.Services.Len() != 2 {
		t.Fatalf("at the limit: err %v", r.err)
	}
}

// TestAddYAMLAllOrNothing: a stream that fails adds none of its objects.
func TestAddYAMLAllOrNothing(t *testing.T) {
	s := resource.New()
	if _, err := AddYAML(s, "x.yaml", []byte(service("a")+"---\n"+service("b")+"---\nkind: [\n")); err == nil {
		t.Fatal("no error for a broken document")
	}
	if n := s.Build().Len(); n != 0 {
		t.Errorf("%d objects added by a stream that failed", n)
	}
}

// TestLoadFileCountLimit: a directory with more manifest files than
// MaxFiles fails the load, even with SkipRefused.
func TestLoadFileCountLimit(t *testing.T) {
	dir := t.TempDir()
	for i := range 5 {
		write(t, dir, fmt.Sprintf("sub/f%d.yaml", i), "")
	}
	opts := Options{SkipRefused: true, Limits: Limits{MaxFiles: 4}}
	r := loadWithin(t, func() (*resource.Snapshot, []Warning, error) { return PathsWith(opts, dir) })
	wantRefused(t, r.err, dir, "more than 4 manifest files")
	opts.Limits.MaxFiles = 5
	if r = loadWithin(t, func() (*resource.Snapshot, []Warning, error) { return PathsWith(opts, dir) }); r.err != nil {
		t.Fatal(r.err)
	}
}
