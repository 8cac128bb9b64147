package render

import (
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// redactHeaders finds, in m and every message it holds (the messages packed
// in Any fields included), the header values a proxy is told to set
// (corev3.HeaderValue: request/response header modifiers, health-check
// headers…) and the values of header and query-parameter matches
// (routev3.HeaderMatcher, routev3.QueryParameterMatcher: exact, prefix,
// suffix, contains strings and regular expressions). They are user input
// that may be credentials (an `Authorization: Bearer …` added by a
// RequestHeaderModifier, a token matched in a header). It reports whether
// there are any; with mutate it also replaces them with Redacted, in place.
// Names are kept, and so are the values of pseudo-header matches (":method"
// is how a route's method is matched).
//
// The walk is generic (by reflection), so that a header value in a message
// type added to the translation later is redacted too.
func redactHeaders(m proto.Message, mutate bool) bool {
	return redactIn(m.ProtoReflect(), mutate)
}

func redactIn(m protoreflect.Message, mutate bool) bool {
	switch x := m.Interface().(type) {
	case *corev3.HeaderValue:
		if x.GetValue() == "" && len(x.GetRawValue()) == 0 {
			return false
		}
		if mutate {
			if x.Value != "" {
				x.Value = Redacted
			}
			if len(x.RawValue) > 0 {
				x.RawValue = []byte(Redacted)
			}
		}
		return true
	case *routev3.HeaderMatcher:
		if strings.HasPrefix(x.GetName(), ":") {
			return false
		}
		return redactHeaderMatch(x, mutate)
	case *routev3.QueryParameterMatcher:
		if sm, ok := x.GetQueryParameterMatchSpecifier().(*routev3.QueryParameterMatcher_StringMatch); ok {
			return redactStringMatcher(sm.StringMatch, mutate)
		}
		return false
	case *anypb.Any:
		inner, err := x.UnmarshalNew()
		if err != nil { // a type this binary does not know: rendered as it is
			return false
		}
		if !redactIn(inner.ProtoReflect(), mutate) {
			return false
		}
		if mutate {
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(inner)
			if err != nil {
				// Cannot happen for a message just decoded; never show
				// the original.
				x.Value = nil
				return true
			}
			x.Value = b
		}
		return true
	}
	found := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					found = redactIn(mv.Message(), mutate) || found
					return mutate || !found
				})
			}
		case fd.IsList():
			if fd.Message() != nil {
				l := v.List()
				for i := 0; i < l.Len() && (mutate || !found); i++ {
					found = redactIn(l.Get(i).Message(), mutate) || found
				}
			}
		case fd.Message() != nil:
			found = redactIn(v.Message(), mutate) || found
		}
		return mutate || !found // a dry run stops at the first
	})
	return found
}

func redactHeaderMatch(h *routev3.HeaderMatcher, mutate bool) bool {
	switch spec := h.GetHeaderMatchSpecifier().(type) {
	case *routev3.HeaderMatcher_StringMatch:
		return redactStringMatcher(spec.StringMatch, mutate)
	case *routev3.HeaderMatcher_SafeRegexMatch:
		if spec.SafeRegexMatch.GetRegex() == "" {
			return false
		}
		if mutate {
			spec.SafeRegexMatch.Regex = Redacted
		}
		return true
	case *routev3.HeaderMatcher_ExactMatch:
		return redactString(&spec.ExactMatch, mutate)
	case *routev3.HeaderMatcher_PrefixMatch:
		return redactString(&spec.PrefixMatch, mutate)
	case *routev3.HeaderMatcher_SuffixMatch:
		return redactString(&spec.SuffixMatch, mutate)
	case *routev3.HeaderMatcher_ContainsMatch:
		return redactString(&spec.ContainsMatch, mutate)
	}
	return false // present and range matches hold no value
}

func redactStringMatcher(sm *matcherv3.StringMatcher, mutate bool) bool {
	switch p := sm.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		return redactString(&p.Exact, mutate)
	case *matcherv3.StringMatcher_Prefix:
		return redactString(&p.Prefix, mutate)
	case *matcherv3.StringMatcher_Suffix:
		return redactString(&p.Suffix, mutate)
	case *matcherv3.StringMatcher_Contains:
		return redactString(&p.Contains, mutate)
	case *matcherv3.StringMatcher_SafeRegex:
		if p.SafeRegex.GetRegex() == "" {
			return false
		}
		if mutate {
			p.SafeRegex.Regex = Redacted
		}
		return true
	}
	return false
}

func redactString(s *string, mutate bool) bool {
	if *s == "" {
		return false
	}
	if mutate {
		*s = Redacted
	}
	return true
}
