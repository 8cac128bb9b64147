package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/render"
	"github.com/portico-dev/portico/internal/resource/load"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// choice is a string flag restricted to a set of values.
type choice struct {
	value   string
	allowed []string
}

func (c *choice) String() string { return c.value }
func (c *choice) Set(v string) error {
	for _, a := range c.allowed {
		if v == a {
			c.value = v
			return nil
		}
	}
	return fmt.Errorf("must be one of %s", strings.Join(c.allowed, ", "))
}

// byteSize is a flag of a number of bytes: 1048576, 512Ki, 16Mi, 1Gi (or
// KiB, MiB, GiB).
type byteSize int64

func (b *byteSize) String() string {
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"Gi", 30}, {"Mi", 20}, {"Ki", 10}} {
		if *b > 0 && int64(*b)%(1<<u.shift) == 0 {
			return strconv.FormatInt(int64(*b)>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(*b), 10)
}

func (b *byteSize) Set(v string) error {
	num, shift := strings.TrimSuffix(v, "B"), uint(0)
	for suffix, s := range map[string]uint{"Ki": 10, "Mi": 20, "Gi": 30} {
		if strings.HasSuffix(num, suffix) {
			num, shift = strings.TrimSuffix(num, suffix), s
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64>>shift {
		return fmt.Errorf("want a positive number of bytes, like 1048576, 512Ki, 16Mi or 1Gi")
	}
	*b = byteSize(n << shift)
	return nil
}

// positiveInt is a flag of an integer above zero.
type positiveInt int

func (p *positiveInt) String() string { return strconv.Itoa(int(*p)) }
func (p *positiveInt) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return errors.New("want a positive integer")
	}
	*p = positiveInt(n)
	return nil
}

// loadFlags are the limits of the manifest loader (load.Limits), flags
// of translate and standalone.
type loadFlags struct {
	fileBytes, documentBytes, totalBytes byteSize
	objects                              positiveInt
}

// addLoadFlags defines the loader's limits on fs, with their defaults.
func addLoadFlags(fs *flag.FlagSet) *loadFlags {
	lf := &loadFlags{
		fileBytes:     load.DefaultMaxFileBytes,
		documentBytes: load.DefaultMaxDocumentBytes,
		totalBytes:    load.DefaultMaxTotalBytes,
		objects:       load.DefaultMaxObjects,
	}
	fs.Var(&lf.fileBytes, "max-file-bytes", "largest manifest file read, a `size` like 16Mi; a larger file is refused")
	fs.Var(&lf.documentBytes, "max-document-bytes", "largest YAML document decoded (a whole List included), a `size`; a file with a larger one is refused")
	fs.Var(&lf.totalBytes, "max-total-bytes", "most bytes one load reads, all files together, a `size`; more fails the load")
	fs.Var(&lf.objects, "max-objects-per-file", "most `objects` in one file, List items included; a file with more is refused")
	return lf
}

// limits returns the limits the flags set.
func (lf *loadFlags) limits() load.Limits {
	return load.Limits{
		MaxFileBytes:     int64(lf.fileBytes),
		MaxDocumentBytes: int64(lf.documentBytes),
		MaxTotalBytes:    int64(lf.totalBytes),
		MaxObjects:       int(lf.objects),
	}
}

// newFlagSet returns a flag set that reports errors and usage on stderr.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: portico %s\n\nFlags (-flag and --flag are the same):\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args; it returns an exit code and false when the
// command must stop (help, or a usage error already reported).
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) (int, bool) {
	return parseFlagsArgs(fs, args, 0, stderr)
}

// parseFlagsArgs is parseFlags for a command that takes up to maxArgs
// arguments after its flags.
func parseFlagsArgs(fs *flag.FlagSet, args []string, maxArgs int, stderr io.Writer) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	if fs.NArg() > maxArgs {
		fmt.Fprintf(stderr, "portico %s: unexpected arguments %q\n", fs.Name(), fs.Args())
		fs.Usage()
		return exitUsage, false
	}
	return exitOK, true
}

// translateCmd loads manifests, translates them and prints the statuses
// and/or the xDS resources of every Gateway. Secret material is redacted
// as render does for /debug/xds (render.Options.RedactSecrets: private
// keys, session ticket keys, generic secrets) unless --show-secrets: the
// output is made to be read, pasted into issues and kept in CI logs, and
// certificates are enough for that. The loader's limits are flags (addLoadFlags); a file it refuses
// is an error, not a warning, so that the output never silently lacks
// objects.
func translateCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("translate", "translate -f FILE|DIR [-f …] [--output all|status|xds] [-o json|yaml] [--controller-name NAME] [--show-secrets] [--max-file-bytes 16Mi]", stderr)
	var files stringList
	part := &choice{value: "all", allowed: []string{"all", "status", "xds"}}
	format := &choice{value: "json", allowed: []string{"json", "yaml"}}
	fs.Var(&files, "f", "manifest `file or directory` (*.yaml, *.yml, *.json, walked recursively); repeatable")
	fs.Var(part, "output", "what to print: all, status or xds")
	fs.Var(format, "o", "output format: json or yaml")
	controller := fs.String("controller-name", gatewayapi.DefaultControllerName, "GatewayClass controllerName to translate for")
	budgets := addBudgetFlags(fs)
	scopedAt := addScopedRoutesFlag(fs)
	showSecrets := fs.Bool("show-secrets", false, "print secret material (the private keys of Secret resources…) as it is; by default it is "+
		"replaced by "+render.Redacted+", as on /debug/xds")
	lf := addLoadFlags(fs)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if len(files) == 0 {
		fmt.Fprintln(stderr, "portico translate: at least one -f is required")
		fs.Usage()
		return exitUsage
	}

	// Any file the loader refuses (not a regular file, a symlink out of its
	// directory, over a limit) is an error here: the output must not
	// silently lack its objects.
	snap, warnings, err := load.PathsWith(load.Options{Limits: lf.limits()}, files...)
	if err != nil {
		fmt.Fprintf(stderr, "portico translate: %v\n", err)
		return exitError
	}
	for _, w := range warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}

	// Conditions that change get the current time; those that do not keep
	// the lastTransitionTime already in the input objects' status.
	maxRoute, maxGateway := budgets.values()
	res := gatewayapi.Translate(snap, gatewayapi.Options{
		ControllerName:      *controller,
		MaxRouteExpansion:   maxRoute,
		MaxGatewayExpansion: maxGateway,
	})
	code := exitOK
	var xds []*translate.Resources
	for _, gw := range res.Gateways {
		r, err := translate.TranslateWith(gw, scopedAt.options())
		if err != nil {
			// A bug rather than bad input: report it, print the rest.
			fmt.Fprintf(stderr, "portico translate: gateway %s: xDS translation failed: %v\n", gw.Key(), err)
			code = exitError
			continue
		}
		xds = append(xds, r)
	}
	out, err := render.Build(res, xds, render.Options{RedactSecrets: !*showSecrets})
	if err != nil {
		fmt.Fprintf(stderr, "portico translate: %v\n", err)
		return exitError
	}

	var doc any = out
	switch part.value {
	case "status":
		doc = render.StatusOutput{Statuses: out.Statuses}
	case "xds":
		doc = render.XDSOutput{XDS: out.XDS}
	}
	var b []byte
	if format.value == "yaml" {
		b, err = render.YAML(doc)
	} else {
		b, err = render.JSON(doc)
	}
	if err != nil {
		fmt.Fprintf(stderr, "portico translate: %v\n", err)
		return exitError
	}
	if _, err := stdout.Write(b); err != nil {
		fmt.Fprintf(stderr, "portico translate: %v\n", err)
		return exitError
	}
	return code
}
