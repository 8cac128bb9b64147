package gatewayapi

import (
	"slices"
	"time"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
)

// HTTPRoute retry (Standard since v1.7.0, GEP-1731).
//
// Choices where the spec leaves room:
//   - attempts unset means 1, the CRD's default (standalone input is not
//     defaulted by an API server); an explicit 0 disables retries, and the
//     rule keeps its timeouts.
//   - A retry stanza always retries failures where the request cannot have
//     been processed: the connection could not be established, the stream
//     was refused (HTTP/2 REFUSED_STREAM) or reset before the request was
//     sent. Resets after the request was sent are never retried: the
//     backend may have acted on it (the spec's SHOULD NOT).
//   - codes are retried as listed; the spec's must-support set is
//     500/502/503/504, and every code the CRD allows (400-599) is served.
//   - backoff is the base interval of Envoy's exponential backoff with
//     jitter, capped at 10x the base (Envoy's default cap); unset means
//     Envoy's default 25ms base. 0s asks for no wait, which Envoy cannot
//     do (its base interval must be positive): it is served as 1ms.
//   - Interplay with timeouts: timeouts.request bounds the initial request
//     and every retry together; timeouts.backendRequest bounds each try,
//     and a try cut by it is retried like a 504 when the rule retries 504.
const (
	maxRetryAttempts = 1000
	minRetryBackoff  = time.Millisecond
)

// retryPolicy validates rule.retry; nil means no retry stanza.
func retryPolicy(r *gwv1.HTTPRouteRetry) (*ir.Retry, *ruleError) {
	if r == nil {
		return nil, nil
	}
	out := &ir.Retry{Attempts: 1}
	if r.Attempts != nil {
		switch a := *r.Attempts; {
		case a < 0:
			return nil, unsupported("retry.attempts %d must not be negative", a)
		case a > maxRetryAttempts:
			return nil, unsupported("retry.attempts %d exceeds %d", a, maxRetryAttempts)
		default:
			out.Attempts = uint32(a)
		}
	}
	for _, c := range r.Codes {
		if c < 400 || c > 599 {
			return nil, unsupported("retry.codes: %d is not an HTTP error status (400-599)", c)
		}
		if !slices.Contains(out.Codes, uint32(c)) {
			out.Codes = append(out.Codes, uint32(c))
		}
	}
	slices.Sort(out.Codes)
	if r.Backoff != nil {
		d, err := parseDuration(string(*r.Backoff))
		if err != nil {
			return nil, unsupported("retry.backoff: %v", err)
		}
		d = max(d, minRetryBackoff)
		out.Backoff = &d
	}
	return out, nil
}
