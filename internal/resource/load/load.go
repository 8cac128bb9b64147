// Package load reads YAML and JSON manifests (standalone mode's directory,
// `portico translate -f`, tests' testdata) into a resource.Snapshot. It is
// apart from package resource so that the snapshot and its persistent maps
// know nothing of files, parsing or limits: resource is what every layer
// reads, load is one of the ways to fill it (the kube provider's informers
// are the other).
//
// # Limits and refusals
//
// Everything the loader reads may be hostile or simply wrong, so a load is
// bounded in time and memory whatever the input:
//
//   - Only regular files are read. A directory entry that is a FIFO,
//     socket or device is refused without being opened; every file is
//     opened with O_NONBLOCK and checked again after opening (fstat), so a
//     file swapped for a FIFO cannot block the load either.
//   - The files of a directory are opened through an os.Root: a symlink is
//     followed only when it is relative and resolves, at every step, to a
//     file inside the directory (a Kubernetes ConfigMap or Secret volume's
//     name.yaml → ..data/name.yaml works); an absolute symlink, or one that
//     climbs out, is refused. A path named by the caller is opened as given
//     (its symlinks are the caller's choice), but must be a regular file.
//     Directories are walked without following symlinks; hidden ones
//     (".name") are skipped.
//   - Limits (defaults: 16 MiB per file, 2 MiB per YAML document, 50,000
//     objects per file, Lists nested 3 deep; 64 MiB and 100,000 files per
//     load) are checked before reading (the size from fstat), while reading
//     (a file that grows) and while decoding.
//   - Each document is parsed on its own; a List is converted to JSON once
//     and its items are streamed from that JSON one at a time, each
//     decoded once (no re-marshalling, so nesting costs linear time).
//
// What a refusal does is the caller's choice. By default (Paths; `portico
// translate`) a refused file is an error naming it, like a file that does
// not parse. With Options.SkipRefused (standalone mode) it becomes a
// Warning and the other files load: a FIFO or an oversized file dropped in
// the directory cannot freeze the configuration. A file that does not
// parse, or a load over MaxTotalBytes or MaxFiles, still fails the whole
// load, so that a half-written file never removes its objects from the
// served configuration (the provider keeps the last good snapshot).
// Within a file, decoding is all or nothing: a file that fails or is
// refused adds no object.
//
// Memory: parsing holds one document's syntax tree at a time, and the
// decoded objects stay; together about 10× the bytes read for ordinary
// manifests, up to about 60× for pathological YAML (millions of empty
// nodes), so MaxTotalBytes is what bounds a load.
package load

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/portico-dev/portico/internal/resource"
)

// Warning is a document (or, with Document -1, a whole file) that was read
// but skipped, with where it was and why.
type Warning struct {
	File     string
	Document int // 0-based index of the YAML document in File; -1: the whole file
	Reason   Reason
	Message  string
}

func (w Warning) String() string {
	if w.Document < 0 {
		return fmt.Sprintf("%s: %s", w.File, w.Message)
	}
	return fmt.Sprintf("%s: document %d: %s", w.File, w.Document, w.Message)
}

// Error is a file that could not be read or parsed. Nothing of a load
// that returns one should be used. Its Err is a *RefusedError for a file
// the loader refuses (see Options.SkipRefused).
type Error struct {
	File     string
	Document int
	Err      error
}

func (e *Error) Error() string {
	if e.Document < 0 {
		return fmt.Sprintf("%s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("%s: document %d: %v", e.File, e.Document, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Options control PathsWith. The zero value is Paths's behaviour.
type Options struct {
	// Limits bound the load; zero fields take their defaults.
	Limits Limits
	// SkipRefused turns a refused file (a *RefusedError: not a regular
	// file, a symlink leaving the directory, over a per-file limit) into a
	// Warning with Document -1 (or the document where a limit was hit),
	// and loads the other files.
	SkipRefused bool
}

// Paths reads every path (a file, or a directory walked for *.yaml, *.yml
// and *.json files in lexical order) into a new built Snapshot, with the
// default limits (see the package doc). Unknown kinds are skipped and
// reported as warnings; unparseable YAML, a document of a known kind that
// does not decode, or a file the loader refuses (see RefusedError) is an
// *Error naming the file.
func Paths(paths ...string) (*resource.Snapshot, []Warning, error) {
	return PathsWith(Options{}, paths...)
}

// PathsWith is Paths with options.
func PathsWith(opts Options, paths ...string) (*resource.Snapshot, []Warning, error) {
	limits := opts.Limits.withDefaults()
	files, closeRoots, err := expand(paths, limits.MaxFiles)
	if err != nil {
		return nil, nil, err
	}
	defer closeRoots()
	s := resource.New()
	var (
		warnings []Warning
		total    int64
	)
	// skip turns a refused file into a warning when the options say so.
	skip := func(le *Error) bool {
		var r *RefusedError
		if !opts.SkipRefused || !errors.As(le.Err, &r) {
			return false
		}
		warnings = append(warnings, Warning{File: le.File, Document: le.Document, Reason: r.Reason, Message: le.Err.Error()})
		return true
	}
	for _, f := range files {
		data, err := f.read(limits.MaxFileBytes, limits.MaxTotalBytes-total)
		if errors.Is(err, errTotal) {
			return nil, nil, &Error{File: f.path, Document: -1,
				Err: fmt.Errorf("%w of %d bytes", errTotal, limits.MaxTotalBytes)}
		}
		if err != nil {
			le := &Error{File: f.path, Document: -1, Err: err}
			if skip(le) {
				continue
			}
			return nil, nil, le
		}
		total += int64(len(data))
		w, err := addYAML(s, f.path, data, limits)
		if err != nil {
			if le := (*Error)(nil); errors.As(err, &le) && skip(le) {
				continue
			}
			return nil, nil, err
		}
		warnings = append(warnings, w...)
	}
	return s.Build(), warnings, nil
}

// AddYAML decodes a multi-document YAML stream into the snapshot s, which
// must not be shared yet (call Build afterwards), with the default limits
// (a stream over one of them is a *Error with a *RefusedError). file
// is used in messages only. Nothing is added when it returns an error.
func AddYAML(s *resource.Snapshot, file string, data []byte) ([]Warning, error) {
	return addYAML(s, file, data, Limits{}.withDefaults())
}

func addYAML(s *resource.Snapshot, file string, data []byte, limits Limits) ([]Warning, error) {
	if n := int64(len(data)); n > limits.MaxFileBytes {
		return nil, &Error{File: file, Document: -1, Err: tooLarge(n, limits.MaxFileBytes)}
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	d := &decoder{limits: limits}
	var warnings []Warning
	for i := 0; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, &Error{File: file, Document: i, Err: err}
		}
		if isEmptyDocument(doc) {
			i--
			continue
		}
		w, err := d.document(doc, 0)
		if err != nil {
			return nil, &Error{File: file, Document: i, Err: err}
		}
		if w != "" {
			warnings = append(warnings, Warning{File: file, Document: i, Reason: ReasonUnknownKind, Message: w})
		}
	}
	for _, o := range d.pending {
		if err := s.Put(o.kind, o.key, o.obj); err != nil { // not of its kind's type: a bug
			return nil, &Error{File: file, Err: err}
		}
	}
	return warnings, nil
}

// isEmptyDocument reports whether doc holds only blank lines, comments and
// document separators.
func isEmptyDocument(doc []byte) bool {
	for len(doc) > 0 {
		line := doc
		if i := bytes.IndexByte(doc, '\n'); i >= 0 {
			line, doc = doc[:i], doc[i+1:]
		} else {
			doc = nil
		}
		t := bytes.TrimSpace(line)
		if len(t) != 0 && t[0] != '#' && string(t) != "---" {
			return false
		}
	}
	return true
}
