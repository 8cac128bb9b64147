package load

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Default limits of a load (see Limits).
const (
	DefaultMaxFileBytes     = 16 << 20 // 16 MiB per file
	DefaultMaxDocumentBytes = 2 << 20  // 2 MiB per YAML document
	DefaultMaxTotalBytes    = 64 << 20 // 64 MiB per load
	DefaultMaxObjects       = 50000    // objects per file, List items included
	DefaultMaxListDepth     = 3        // a List in a List in a List
	DefaultMaxFiles         = 100000   // manifest files per load
)

// Limits bound what one load reads, so that no input can make it use
// unbounded time or memory. A zero field takes its default.
type Limits struct {
	// MaxFileBytes is the largest file read; a larger one is refused
	// (ReasonTooLarge) without being read.
	MaxFileBytes int64
	// MaxDocumentBytes is the largest YAML document (the text between two
	// "---" lines, a whole List included) decoded; a file with a larger
	// one is refused (ReasonTooLarge). It bounds the memory of parsing,
	// which holds one document's syntax tree at a time (up to about a
	// hundred times its size for a pathological document). The default is
	// above the largest object an API server stores (etcd's default
	// request limit is 1.5 MiB).
	MaxDocumentBytes int64
	// MaxTotalBytes bounds the bytes of all files of one load together. A
	// load that would read more fails as a whole: it is a directory that
	// outgrew the limit, not one bad file.
	MaxTotalBytes int64
	// MaxObjects is the most objects one file may hold, the items of its
	// Lists included (empty documents do not count); a file with more is
	// refused (ReasonTooManyObjects).
	MaxObjects int
	// MaxListDepth is how deeply Lists may nest (1: a List of objects); a
	// file with deeper Lists is refused (ReasonListTooDeep).
	MaxListDepth int
	// MaxFiles is the most manifest files one load reads; a load that
	// finds more fails as a whole (empty files cost no bytes, but each
	// costs a look-up).
	MaxFiles int
}

// withDefaults returns l with every zero or negative field at its default.
func (l Limits) withDefaults() Limits {
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = DefaultMaxFileBytes
	}
	if l.MaxDocumentBytes <= 0 {
		l.MaxDocumentBytes = DefaultMaxDocumentBytes
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = DefaultMaxTotalBytes
	}
	if l.MaxObjects <= 0 {
		l.MaxObjects = DefaultMaxObjects
	}
	if l.MaxListDepth <= 0 {
		l.MaxListDepth = DefaultMaxListDepth
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	return l
}

// Reason classifies a Warning (and a RefusedError).
type Reason string

// The reasons of warnings. ReasonUnknownKind skips one document; the others
// are files the loader refuses as a whole (RefusedError).
const (
	ReasonUnknownKind    Reason = "unknown-kind"
	ReasonNotRegular     Reason = "not-regular-file"
	ReasonOutside        Reason = "outside-directory"
	ReasonBrokenSymlink  Reason = "broken-symlink"
	ReasonTooLarge       Reason = "file-too-large"
	ReasonTooManyObjects Reason = "too-many-objects"
	ReasonListTooDeep    Reason = "list-too-deep"
)

// Reasons lists every Reason, for metrics that export all of them.
var Reasons = []Reason{ReasonUnknownKind, ReasonNotRegular, ReasonOutside, ReasonBrokenSymlink, ReasonTooLarge,
	ReasonTooManyObjects, ReasonListTooDeep}

// RefusedError is the Err of a *Error for a file the loader will not
// read or decode whatever the state of the other files: not a regular
// file, a symlink that leaves the directory, or over a limit. With
// Options.SkipRefused such a file becomes a Warning instead.
type RefusedError struct {
	Reason Reason
	Detail string
}

func (e *RefusedError) Error() string { return e.Detail }

func refused(r Reason, format string, args ...any) *RefusedError {
	return &RefusedError{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// source is one file to read: either a path named by the caller (root nil)
// or a file found under a directory (root set, rel relative to it).
type source struct {
	path string // as shown in messages
	root *os.Root
	rel  string
	// mode is the type of a directory entry (from the directory listing,
	// not following symlinks); unused for named paths.
	mode fs.FileMode
}

// expand lists the files of paths: a file is itself, a directory is every
// manifest under it (IsManifest, hidden directories skipped) in lexical
// order; more than maxFiles is an error. The returned close releases the
// directories' handles.
func expand(paths []string, maxFiles int) ([]source, func(), error) {
	var (
		files []source
		roots []*os.Root
	)
	closeAll := func() {
		for _, r := range roots {
			r.Close()
		}
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			closeAll()
			return nil, nil, &Error{File: p, Document: -1, Err: err}
		}
		if !st.IsDir() {
			if len(files) >= maxFiles {
				closeAll()
				return nil, nil, &Error{File: p, Document: -1, Err: fmt.Errorf("more than %d manifest files", maxFiles)}
			}
			files = append(files, source{path: p})
			continue
		}
		root, err := os.OpenRoot(p)
		if err != nil {
			closeAll()
			return nil, nil, &Error{File: p, Document: -1, Err: err}
		}
		roots = append(roots, root)
		var found []source
		err = fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if rel != "." && strings.HasPrefix(d.Name(), ".") {
					return fs.SkipDir
				}
				return nil
			}
			if !IsManifest(rel) {
				return nil
			}
			if len(files)+len(found) >= maxFiles {
				return fmt.Errorf("more than %d manifest files", maxFiles)
			}
			found = append(found, source{path: filepath.Join(p, filepath.FromSlash(rel)), root: root, rel: rel, mode: d.Type()})
			return nil
		})
		if err != nil {
			closeAll()
			return nil, nil, &Error{File: p, Document: -1, Err: err}
		}
		sort.Slice(found, func(i, j int) bool { return found[i].path < found[j].path })
		files = append(files, found...)
	}
	return files, closeAll, nil
}

// errTotal is the Err of the *Error of a load whose files together
// exceed Limits.MaxTotalBytes.
var errTotal = errors.New("the files of this load exceed the limit on their total size")

// read returns the contents of src, at most limit bytes. It never blocks on
// a FIFO or device and never follows a symlink out of src's directory: such
// files, and larger ones, are a *RefusedError. A file that fits limit but
// not remaining (what the load may still read) is errTotal.
func (src source) read(limit, remaining int64) ([]byte, error) {
	var (
		f   *os.File
		err error
	)
	switch {
	case src.root == nil:
		// Named by the caller: its symlinks are the caller's choice.
		f, err = os.OpenFile(src.path, os.O_RDONLY|openFlags, 0)
	case src.mode.IsRegular() || src.mode&fs.ModeSymlink != 0:
		// Through the directory's Root: a symlink is followed only while
		// it stays inside (and only if it is relative).
		f, err = src.root.OpenFile(src.rel, os.O_RDONLY|openFlags, 0)
		if err != nil && src.mode&fs.ModeSymlink != 0 && !errors.Is(err, fs.ErrPermission) {
			return nil, src.badSymlink(err)
		}
	default:
		// A FIFO, socket, device or directory: not even opened.
		return nil, refused(ReasonNotRegular, "not a regular file (%s)", typeName(src.mode))
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, refused(ReasonNotRegular, "not a regular file (%s)", typeName(st.Mode()))
	}
	if st.Size() > limit {
		return nil, tooLarge(st.Size(), limit)
	}
	if st.Size() > remaining {
		return nil, errTotal
	}
	// The file may grow while it is read: read one byte past the limit to
	// notice.
	var buf bytes.Buffer
	buf.Grow(int(st.Size()) + bytes.MinRead)
	n, err := buf.ReadFrom(io.LimitReader(f, min(limit, remaining)+1))
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, tooLarge(n, limit)
	}
	if n > remaining {
		return nil, errTotal
	}
	return buf.Bytes(), nil
}

// badSymlink explains why a symlink in a directory was not followed.
func (src source) badSymlink(err error) error {
	target, lerr := src.root.Readlink(src.rel)
	if lerr != nil {
		target = "?"
	}
	if errors.Is(err, fs.ErrNotExist) {
		return refused(ReasonBrokenSymlink, "symlink to %q leads nowhere", target)
	}
	return refused(ReasonOutside, "symlink to %q leads outside the directory or is absolute "+
		"(only relative symlinks to files inside the directory are followed)", target)
}

func tooLarge(size, limit int64) error {
	return refused(ReasonTooLarge, "file of %d bytes is larger than the limit of %d bytes", size, limit)
}

func typeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	}
	return "mode " + m.String()
}

// IsManifest reports whether a file name looks like a manifest the loader reads.
func IsManifest(path string) bool {
	base := filepath.Base(path)
	if strings.HasPrefix(base, ".") {
		return false
	}
	switch strings.ToLower(filepath.Ext(base)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}
