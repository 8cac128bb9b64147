package translate

import (
	mutationv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	earlyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/early_header_mutation/header_mutation/v3"

	"github.com/portico-dev/portico/internal/ir"
)

// withListenerTag makes hcm set ir.ListenerTagHeader to tag on each
// request before anything else (an early header mutation, before route
// selection and the HTTP filters), replacing what the client sent: the
// chains of an HTTPS port share a route table whose virtual hosts answer
// 421 to another listener's requests (gatewayapi misdirected.go). The
// virtual hosts remove it before forwarding.
func withListenerTag(hcm *hcmv3.HttpConnectionManager, tag string) error {
	if tag == "" {
		return nil
	}
	cfg, err := toAny("early header mutation", &earlyv3.HeaderMutation{Mutations: []*mutationv3.HeaderMutation{{
		Action: &mutationv3.HeaderMutation_Append{Append: &corev3.HeaderValueOption{
			Header:       &corev3.HeaderValue{Key: ir.ListenerTagHeader, Value: tag},
			AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
		}},
	}}})
	if err != nil {
		return err
	}
	hcm.EarlyHeaderMutationExtensions = []*corev3.TypedExtensionConfig{{Name: "portico.listener_tag", TypedConfig: cfg}}
	return nil
}
