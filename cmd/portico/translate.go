package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/render"
	"github.com/portico-dev/portico/internal/resource"
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
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "portico %s: unexpected arguments %q\n", fs.Name(), fs.Args())
		fs.Usage()
		return exitUsage, false
	}
	return exitOK, true
}

// translateCmd loads manifests, translates them and prints the statuses
// and/or the xDS resources of every Gateway.
func translateCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("translate", "translate -f FILE|DIR [-f …] [--output all|status|xds] [-o json|yaml] [--controller-name NAME]", stderr)
	var files stringList
	part := &choice{value: "all", allowed: []string{"all", "status", "xds"}}
	format := &choice{value: "json", allowed: []string{"json", "yaml"}}
	fs.Var(&files, "f", "manifest `file or directory` (*.yaml, *.yml, *.json, walked recursively); repeatable")
	fs.Var(part, "output", "what to print: all, status or xds")
	fs.Var(format, "o", "output format: json or yaml")
	controller := fs.String("controller-name", gatewayapi.DefaultControllerName, "GatewayClass controllerName to translate for")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if len(files) == 0 {
		fmt.Fprintln(stderr, "portico translate: at least one -f is required")
		fs.Usage()
		return exitUsage
	}

	snap, warnings, err := resource.Load(files...)
	if err != nil {
		fmt.Fprintf(stderr, "portico translate: %v\n", err)
		return exitError
	}
	for _, w := range warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}

	// Conditions that change get the current time; those that do not keep
	// the lastTransitionTime already in the input objects' status.
	res := gatewayapi.Translate(snap, gatewayapi.Options{
		ControllerName: *controller,
		Now:            metav1.NewTime(time.Now().UTC().Truncate(time.Second)),
	})
	code := exitOK
	var xds []*translate.Resources
	for _, gw := range res.Gateways {
		r, err := translate.Translate(gw)
		if err != nil {
			// A bug rather than bad input: report it, print the rest.
			fmt.Fprintf(stderr, "portico translate: gateway %s: xDS translation failed: %v\n", gw.Key(), err)
			code = exitError
			continue
		}
		xds = append(xds, r)
	}
	out, err := render.Build(res, xds, render.Options{})
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
