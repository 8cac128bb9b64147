package translate

import (
	"fmt"
	"math"
	"slices"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	previoushostsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/ir"
)

// Retry conditions (Envoy's retry_on). A retry stanza always retries
// failures where the backend cannot have seen the request: the connection
// was not established (connect-failure), the HTTP/2 stream was refused
// (refused-stream), or the connection was reset before the request was
// sent (reset-before-request). "reset", which also retries resets after
// the request was sent, is never used: the request may have been
// processed. Response statuses are retried through retriable-status-codes
// only, so exactly the route's codes are retried.
const (
	retryOnSafe  = "connect-failure,refused-stream,reset-before-request"
	retryOnCodes = "retriable-status-codes"
	// backoffCapFactor caps Envoy's exponential backoff at this multiple of
	// the base interval (Envoy's own default).
	backoffCapFactor = 10
	// hostSelectionAttempts: a retry tries to pick an endpoint other than
	// those already tried, up to this many picks (a rule with one endpoint
	// retries on it).
	hostSelectionAttempts = 5
)

// previousHosts is the retry host predicate that steers retries away from
// endpoints already tried; a shared, immutable Any.
var previousHosts = func() *anypb.Any {
	a, err := anypb.New(&previoushostsv3.PreviousHostsPredicate{})
	if err != nil {
		panic(err) // a constant message: cannot fail
	}
	return a
}()

// retryPolicy is the Envoy retry policy of f: nil when f neither retries
// nor bounds each try. A backend timeout without retries is a per-try
// timeout with num_retries 0, as before retries existed.
//
// Timeouts and retries: the route timeout (timeouts.request) covers the
// first try and all retries; per_try_timeout (timeouts.backendRequest)
// covers each try. A try cut by per_try_timeout answers 504, and the spec
// asks that the next attempt then be scheduled. Envoy retries such a try
// only under retry_on 5xx or gateway-error, which would also retry resets
// after the request was sent; so for a rule whose codes include 504 the
// route gets hedge_on_per_try_timeout instead, which makes the next
// attempt when a try times out (the timed-out try is left to finish, its
// answer used only if it comes first). A rule without 504 in its codes
// returns the 504, as it does for a backend's own 504.
func retryPolicy(f *ir.Forward) (*routev3.RetryPolicy, *routev3.HedgePolicy, error) {
	var rp *routev3.RetryPolicy
	if bt := f.BackendTimeout; bt != nil {
		if *bt < 0 {
			return nil, nil, fmt.Errorf("negative backend timeout %s", *bt)
		}
		if *bt > 0 {
			rp = &routev3.RetryPolicy{NumRetries: wrapperspb.UInt32(0), PerTryTimeout: durationpb.New(*bt)}
		}
	}
	r := f.Retry
	if r == nil || r.Attempts == 0 {
		return rp, nil, nil
	}
	if rp == nil {
		rp = &routev3.RetryPolicy{}
	}
	on := []string{retryOnSafe}
	if len(r.Codes) > 0 {
		on = append(on, retryOnCodes)
		rp.RetriableStatusCodes = append([]uint32(nil), r.Codes...)
	}
	rp.RetryOn = strings.Join(on, ",")
	rp.NumRetries = wrapperspb.UInt32(r.Attempts)
	if b := r.Backoff; b != nil {
		if *b <= 0 {
			return nil, nil, fmt.Errorf("retry backoff %s is not positive", *b)
		}
		limit := *b
		if limit <= math.MaxInt64/backoffCapFactor {
			limit *= backoffCapFactor
		}
		rp.RetryBackOff = &routev3.RetryPolicy_RetryBackOff{
			BaseInterval: durationpb.New(*b),
			MaxInterval:  durationpb.New(limit),
		}
	}
	rp.RetryHostPredicate = []*routev3.RetryPolicy_RetryHostPredicate{{
		Name:       "envoy.retry_host_predicates.previous_hosts",
		ConfigType: &routev3.RetryPolicy_RetryHostPredicate_TypedConfig{TypedConfig: previousHosts},
	}}
	rp.HostSelectionRetryMaxAttempts = hostSelectionAttempts
	var hedge *routev3.HedgePolicy
	if rp.PerTryTimeout != nil && slices.Contains(r.Codes, statusGatewayTimeout) {
		hedge = &routev3.HedgePolicy{HedgeOnPerTryTimeout: true}
	}
	return rp, hedge, nil
}

// statusGatewayTimeout is what a try cut by its per-try timeout answers.
const statusGatewayTimeout = 504
