package main

import (
	"flag"

	"github.com/portico-dev/portico/internal/xds/translate"
)

// scopedRoutesFlag is the route count from which a route table is served
// in scoped form (internal/xds/translate/scoped.go), shared by standalone
// and controller.
type scopedRoutesFlag struct{ at *int }

func addScopedRoutesFlag(fs *flag.FlagSet) scopedRoutesFlag {
	return scopedRoutesFlag{at: fs.Int("scoped-route-tables-at", translate.DefaultScopeAtRoutes,
		"Envoy routes from which a route table of several hostnames is served as a table per hostname (scoped RDS and a host-scope Lua filter), "+
			"so that Envoy rebuilds one hostname's table per change; 0 or negative: never (every table by VHDS)")}
}

// options returns the flag as translate.Options, where 0 means "the
// default" and a negative value "never".
func (f scopedRoutesFlag) options() translate.Options {
	if *f.at <= 0 {
		return translate.Options{ScopeAtRoutes: -1}
	}
	return translate.Options{ScopeAtRoutes: *f.at}
}
