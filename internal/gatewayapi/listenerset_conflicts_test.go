package gatewayapi

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestConflictsWithinOneObject checks that conflicts among the listeners
// of one object pick no winner, whether that object is the Gateway or a
// ListenerSet, and that precedence orders distinct objects only.
//
// The Gateway API (apis/v1/gateway_types.go, GatewaySpec.Listeners), on
// accepting a partial set of listeners: "The implementation MUST NOT pick
// one conflicting Listener as the winner. ALL indistinct Listeners must not
// be accepted for processing." — a rule about the listeners of one object.
// ListenerSetSpec.Listeners (listenerset_types.go) orders distinct
// objects: "the merged list of all listeners from itself and attached
// ListenerSets using the following precedence: 1. "parent" Gateway 2.
// ListenerSet ordered by creation time (oldest first) 3. ListenerSet
// ordered alphabetically by "{namespace}/{name}"." A listener conflicting
// with one of a higher-precedence object loses to it (and, as the
// conformance test ListenerSetProtocolConflict expects, does not count
// against its siblings); two entries of the same ListenerSet have the same
// precedence: neither may win. Each case is run with the listeners of
// every object in the order written and reversed: the result must not
// depend on it.
func TestConflictsWithinOneObject(t *testing.T) {
	const (
		proto = string(gwv1.ListenerReasonProtocolConflict)
		host  = string(gwv1.ListenerReasonHostnameConflict)
	)
	type set struct {
		name    string
		created int
		ls      []gwv1.Listener
	}
	tests := []struct {
		name string
		gw   []gwv1.Listener
		sets []set
		// want is the Conflicted reason by "<owner>/<listener>" ("" for
		// none); owner "gw" is the Gateway.
		want map[string]string
	}{{
		name: "Gateway: one port, two protocols",
		gw:   []gwv1.Listener{httpL("gw-80", 80, ""), httpL("http", 8080, ""), httpsL("https", 8080, "", "cert")},
		want: map[string]string{"gw/gw-80": "", "gw/http": proto, "gw/https": proto},
	}, {
		name: "Gateway: indistinct listeners",
		gw:   []gwv1.Listener{httpL("gw-80", 80, ""), httpL("a", 8080, "a.example.com"), httpL("b", 8080, "a.example.com")},
		want: map[string]string{"gw/gw-80": "", "gw/a": host, "gw/b": host},
	}, {
		name: "ListenerSet: one port, two protocols",
		gw:   []gwv1.Listener{httpL("gw-80", 80, "")},
		sets: []set{{"s", 1, []gwv1.Listener{httpL("http", 8080, ""), httpsL("https", 8080, "", "cert")}}},
		want: map[string]string{"gw/gw-80": "", "s/http": proto, "s/https": proto},
	}, {
		name: "ListenerSet: indistinct entries",
		gw:   []gwv1.Listener{httpL("gw-80", 80, "")},
		sets: []set{{"s", 1, []gwv1.Listener{httpL("a", 8080, "a.example.com"), httpL("b", 8080, "a.example.com"), httpL("c", 8080, "c.example.com")}}},
		want: map[string]string{"gw/gw-80": "", "s/a": host, "s/b": host, "s/c": ""},
	}, {
		name: "ListenerSet: indistinct HTTPS entries",
		gw:   []gwv1.Listener{httpL("gw-80", 80, "")},
		sets: []set{{"s", 1, []gwv1.Listener{httpsL("a", 443, "", "cert"), httpsL("b", 443, "", "cert")}}},
		want: map[string]string{"gw/gw-80": "", "s/a": host, "s/b": host},
	}, {
		name: "mixed: the older ListenerSet wins; an entry that lost does not take its siblings down",
		gw:   []gwv1.Listener{httpL("gw-80", 80, "")},
		sets: []set{
			{"old", 1, []gwv1.Listener{httpL("web", 8080, "")}},
			// https loses to old/web; http, compatible with old/web,
			// stays (as ListenerSetProtocolConflict expects).
			{"new", 2, []gwv1.Listener{httpsL("https", 8080, "", "cert"), httpL("http", 8080, "x.example.com")}},
		},
		want: map[string]string{"gw/gw-80": "", "old/web": "", "new/https": proto, "new/http": ""},
	}, {
		name: "mixed: entries that did not lose conflict among themselves",
		gw:   []gwv1.Listener{httpL("gw-80", 80, "")},
		sets: []set{
			{"old", 1, []gwv1.Listener{httpL("web", 8080, "")}},
			{"new", 2, []gwv1.Listener{httpsL("https", 8080, "", "cert"), httpL("a", 9090, ""), gwv1.Listener{Name: "b", Port: 9090, Protocol: gwv1.TCPProtocolType}}},
		},
		want: map[string]string{"gw/gw-80": "", "old/web": "", "new/https": proto, "new/a": proto, "new/b": proto},
	}, {
		name: "mixed: conflicted entries of an older object still take precedence",
		gw:   []gwv1.Listener{httpL("a", 8080, "a.example.com"), httpL("b", 8080, "a.example.com")},
		sets: []set{
			{"s", 1, []gwv1.Listener{httpL("dup", 8080, "a.example.com"), httpL("other", 8080, "o.example.com")}},
			{"t", 2, []gwv1.Listener{httpL("x", 9090, ""), httpL("y", 9090, "")}},
			{"u", 3, []gwv1.Listener{httpL("z", 9090, "")}},
		},
		want: map[string]string{"gw/a": host, "gw/b": host, "s/dup": host, "s/other": "", "t/x": host, "t/y": host, "u/z": host},
	}}
	for _, tc := range tests {
		for _, reversed := range []bool{false, true} {
			name := tc.name
			if reversed {
				name += " (reversed)"
			}
			t.Run(name, func(t *testing.T) {
				order := func(ls []gwv1.Listener) []gwv1.Listener {
					ls = slices.Clone(ls)
					if reversed {
						slices.Reverse(ls)
					}
					return ls
				}
				objs := []any{allowListeners(gateway("infra", "gw", order(tc.gw)...), gwv1.NamespacesFromAll, nil), tlsSecret("infra", "cert")}
				for _, s := range tc.sets {
					objs = append(objs, listenerSet("infra", s.name, s.created, "infra", "gw", order(s.ls)...))
				}
				res := translate(objs...)
				for key, reason := range tc.want {
					owner, name, _ := cut(key)
					var conds []metav1.Condition
					if owner == "gw" {
						conds = listenerStatus(t, res, "infra", "gw", name).Conditions
					} else {
						conds = entryStatus(t, res, "infra", owner, name).Conditions
					}
					if reason == "" {
						wantCond(t, conds, string(gwv1.ListenerConditionConflicted), metav1.ConditionFalse, string(gwv1.ListenerReasonNoConflicts))
						wantCond(t, conds, string(gwv1.ListenerConditionAccepted), metav1.ConditionTrue, string(gwv1.ListenerReasonAccepted))
						continue
					}
					wantCond(t, conds, string(gwv1.ListenerConditionConflicted), metav1.ConditionTrue, reason)
					wantCond(t, conds, string(gwv1.ListenerConditionAccepted), metav1.ConditionFalse, reason)
				}
			})
		}
	}
}

func cut(key string) (string, string, bool) {
	for i := range key {
		if key[i] == '/' {
			return key[:i], key[i+1:], true
		}
	}
	return key, "", false
}
