package controller

import (
	"reflect"
	"testing"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/proxysync"
)

func TestRouteTracer(t *testing.T) {
	gw := &ir.Gateway{Namespace: "infra", Name: "gw", Listeners: []*ir.Listener{
		{Name: "http", FilterChains: []*ir.FilterChain{{RouteConfig: &ir.RouteConfig{VirtualHosts: []*ir.VirtualHost{
			{Routes: []*ir.Route{
				{Name: "httproute/team/api/rule/0/match/0", Forward: &ir.Forward{Backends: []*ir.WeightedBackend{{Cluster: "team/api/80"}}}},
				{Name: "httproute/team/api/rule/1/match/0", Forward: &ir.Forward{Backends: []*ir.WeightedBackend{{Cluster: "team/api/80"}},
					Mirrors: []*ir.Mirror{{Cluster: "team/shadow/80"}}}},
				{Name: "grpcroute/team/rpc/rule/0/match/0", Forward: &ir.Forward{Backends: []*ir.WeightedBackend{{Cluster: "team/api/80"}}}},
				{Name: "httproute/team/redirect/rule/0/match/0", Redirect: &ir.Redirect{}},
				{Name: "httproute/team/regex/rule/0/match/0", Match: ir.Match{Path: &ir.PathMatch{Type: ir.PathRegex, Value: "/[a-z]{60,80}/x"}},
					DirectResponse: &ir.DirectResponse{}},
				{Name: "httproute/team/header/rule/0/match/0", Match: ir.Match{Headers: []ir.StringMatch{{Name: "x", Type: ir.StringRegex, Value: "v[0-9]+"}}},
					DirectResponse: &ir.DirectResponse{}},
			}},
		}}}}},
		{Name: "tcp", FilterChains: []*ir.FilterChain{{TCP: &ir.TCPForward{Name: "tcproute/db/pg/rule/0", Backends: []ir.WeightedBackend{{Cluster: "db/pg/5432"}}}}}},
		{Name: "udp", UDP: &ir.UDPForward{Name: "udproute/dns/coredns/rule/0", Backends: []ir.WeightedBackend{{Cluster: "dns/coredns/53/udp"}}}},
	}}
	result := &gatewayapi.Result{Gateways: []*ir.Gateway{gw}}
	tr := &routeTracer{latest: func() *gatewayapi.Result { return result }}
	for _, tc := range []struct {
		name      string
		resources []string
		errText   string
		want      []proxysync.RouteRef
	}{
		{"a cluster shared by two routes", []string{"team/api/80"}, "",
			[]proxysync.RouteRef{{Kind: "GRPCRoute", Namespace: "team", Name: "rpc"}, {Kind: "HTTPRoute", Namespace: "team", Name: "api"}}},
		{"a mirror's cluster", []string{"team/shadow/80"}, "", []proxysync.RouteRef{{Kind: "HTTPRoute", Namespace: "team", Name: "api"}}},
		{"TCP and UDP forwards", []string{"db/pg/5432", "dns/coredns/53/udp"}, "",
			[]proxysync.RouteRef{{Kind: "TCPRoute", Namespace: "db", Name: "pg"}, {Kind: "UDPRoute", Namespace: "dns", Name: "coredns"}}},
		{"a route name in the error, a route without a cluster", nil,
			"route 'httproute/team/redirect/rule/0/match/0': bad; httproute/other/unknown/rule/0",
			[]proxysync.RouteRef{{Kind: "HTTPRoute", Namespace: "team", Name: "redirect"}}},
		{"a path regex quoted by Envoy", nil,
			"regex '/[a-z]{60,80}/x' RE2 program size of 107 > max program size of 100 set for the error level threshold.",
			[]proxysync.RouteRef{{Kind: "HTTPRoute", Namespace: "team", Name: "regex"}}},
		{"a header regex quoted by Envoy", nil, "regex 'v[0-9]+' is bad",
			[]proxysync.RouteRef{{Kind: "HTTPRoute", Namespace: "team", Name: "header"}}},
		{"an unknown cluster", []string{"team/nothing/80"}, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tr.trace("infra/gw", "CDS", tc.resources, tc.errText); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if got := tr.trace("infra/other", "CDS", []string{"team/api/80"}, ""); got != nil {
		t.Errorf("another Gateway's routes: %v", got)
	}
	// A new translation replaces the index.
	result = &gatewayapi.Result{}
	if got := tr.trace("infra/gw", "CDS", []string{"team/api/80"}, ""); got != nil {
		t.Errorf("after a translation without the Gateway: %v", got)
	}
}
