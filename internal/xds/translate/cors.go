package translate

// CORS (ir.Route.CORS): Envoy's CORS filter is in every HTTP connection
// manager, after the listener filters (ext_authz) and before the router,
// and does nothing for a route without a policy; a route's policy is its
// typed_per_filter_config for the filter. Keeping the filter in every
// connection manager, used or not, means a route gaining a CORS policy
// changes its route table only, never the listener (which would drain
// connections), and that the listener memo need not look into routes.

import (
	"fmt"
	"strconv"
	"strings"

	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/ir"
)

// corsFilter is the CORS HTTP filter of every connection manager: its
// configuration is empty (the policies are per route). Messages are never
// modified once built, so one is shared.
var corsFilter = func() *hcmv3.HttpFilter {
	a, err := anypb.New(&corsv3.Cors{})
	if err != nil {
		panic(err) // a constant message: cannot fail
	}
	return &hcmv3.HttpFilter{Name: wellknown.CORS, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: a}}
}()

// corsPolicy is the per-route configuration of a CORS policy.
func corsPolicy(c *ir.CORS) (*anypb.Any, error) {
	p := &corsv3.CorsPolicy{
		AllowMethods:  strings.Join(c.AllowMethods, ","),
		AllowHeaders:  strings.Join(c.AllowHeaders, ","),
		ExposeHeaders: strings.Join(c.ExposeHeaders, ","),
		MaxAge:        strconv.Itoa(int(c.MaxAgeSeconds)),
		// A preflight from an origin not allowed is answered by Envoy,
		// without CORS headers, rather than passed to the backend.
		ForwardNotMatchingPreflights: wrapperspb.Bool(false),
	}
	if c.AllowCredentials {
		p.AllowCredentials = wrapperspb.Bool(true)
	}
	for _, o := range c.AllowOrigins {
		switch {
		case o.Regex != "":
			rx, err := regexMatcher(o.Regex)
			if err != nil {
				return nil, fmt.Errorf("CORS origin: %w", err)
			}
			p.AllowOriginStringMatch = append(p.AllowOriginStringMatch, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: rx}})
		case o.Exact != "":
			p.AllowOriginStringMatch = append(p.AllowOriginStringMatch, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: o.Exact}, IgnoreCase: true})
		default:
			return nil, fmt.Errorf("CORS origin without a match")
		}
	}
	return toAny("CORS policy", p)
}
