package main

import (
	"flag"

	"github.com/portico-dev/portico/internal/gatewayapi"
)

// budgetFlags are the limits on what one route, and the routes of one
// Gateway, may expand into (internal/gatewayapi/budget.go), shared by
// standalone, controller and translate.
type budgetFlags struct {
	route, gateway *int
}

func addBudgetFlags(fs *flag.FlagSet) budgetFlags {
	return budgetFlags{
		route: fs.Int("max-route-expansion", gatewayapi.DefaultMaxRouteExpansion,
			"most Envoy routes one HTTP or gRPC route may expand into (its matches × the hostnames of every listener it attaches to); a route over it is refused (Accepted=False); negative: no limit"),
		gateway: fs.Int("max-gateway-expansion", gatewayapi.DefaultMaxGatewayExpansion,
			"most Envoy routes the routes of one Gateway may expand into together, admitted oldest first; a newer route that does not fit is refused; negative: no limit"),
	}
}

// values returns the flags as gatewayapi.Options values. There 0 means
// "the default", so a flag of 0 (nothing may expand) is passed as 1, the
// nearest limit with that meaning for any route with a match.
func (b budgetFlags) values() (route, gateway int) {
	return nonZero(*b.route), nonZero(*b.gateway)
}

func nonZero(n int) int {
	if n == 0 {
		return 1 // 0 in gatewayapi.Options is "the default"
	}
	return n
}
