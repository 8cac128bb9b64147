package gatewayapi

import (
	"fmt"
	"sort"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/resource"
)

// classState is a GatewayClass of ours.
type classState struct {
	obj      *gwv1.GatewayClass
	accepted bool
	problem  *problem
	// proxy is the ProxyConfig its parametersRef names, if any.
	proxy *v1alpha1.ProxyConfigSpec
}

// processClasses selects our GatewayClasses and computes their status.
// Classes of other controllers get no status.
func (t *translator) processClasses() {
	for _, name := range t.in.GatewayClassNames() {
		gc := t.in.GatewayClass(name)
		if gc == nil || t.opts.ControllerName == "" || string(gc.Spec.ControllerName) != t.opts.ControllerName {
			continue
		}
		cs := &classState{obj: gc, accepted: true}
		c := newConditions(gc.Generation)
		if ref := gc.Spec.ParametersRef; ref != nil {
			class := t.readingFor(resource.Ref{Kind: resource.KindGatewayClass, Key: resource.Key{Name: name}})
			cs.proxy, cs.problem = class.classParams(ref)
		}
		if cs.problem != nil {
			cs.accepted = false
			c.set(string(gwv1.GatewayClassConditionStatusAccepted), false, cs.problem.reason, cs.problem.message)
		} else {
			c.set(string(gwv1.GatewayClassConditionStatusAccepted), true, string(gwv1.GatewayClassReasonAccepted), "the GatewayClass is served by "+t.opts.ControllerName)
		}
		t.classes[name] = cs
		t.statuses = append(t.statuses, Status{
			Kind: resource.KindGatewayClass, Name: gc.Name, Generation: gc.Generation,
			GatewayClass: &gwv1.GatewayClassStatus{
				Conditions:        c.done(),
				SupportedFeatures: SupportedFeatures(),
			},
		})
	}
}

// gatewayState is a Gateway of one of our classes.
type gatewayState struct {
	obj *gwv1.Gateway
	// invalid is a Gateway-level reason not to accept the Gateway.
	invalid *problem
	own     []*listener
	// sets are the ListenerSets the Gateway allows, in merge order.
	sets   []*listenerSetState
	merged []*listener
	// accepted: the Gateway is Accepted, its IR is built.
	accepted bool
	// proxy is the effective ProxyConfig: the Gateway's own, else its
	// class's; nil for defaults.
	proxy *v1alpha1.ProxyConfigSpec
	// settings are the IR's proxy settings from proxy (proxysettings.go).
	settings *ir.ProxySettings
	// expansion is the Envoy routes its attached routes make, and
	// budgetHit whether a route was refused for its budget (budget.go).
	expansion int
	budgetHit bool
	// clientCert names the Secret of spec.tls.backend.clientCertificateRef
	// (empty: none, or unusable: clientCertProblem says why).
	clientCert        string
	clientCertProblem *problem
}

func (g *gatewayState) key() resource.Key {
	return resource.Key{Namespace: g.obj.Namespace, Name: g.obj.Name}
}

// processGateways selects the Gateways of our classes and validates them
// and their own listeners.
func (t *translator) processGateways() {
	keys := t.scope.gatewayKeys(t.in)
	for _, k := range keys {
		gw := t.in.Gateway(k)
		if gw == nil {
			continue
		}
		cs := t.classes[string(gw.Spec.GatewayClassName)]
		if cs == nil {
			continue
		}
		gt := t.readingFor(gatewayRef(k)) // reads for the Gateway
		g := &gatewayState{obj: gw, proxy: cs.proxy}
		var paramsProblem *problem
		if gw.Spec.Infrastructure != nil && gw.Spec.Infrastructure.ParametersRef != nil {
			var own *v1alpha1.ProxyConfigSpec
			own, paramsProblem = gt.gatewayParams(gw)
			if own != nil {
				g.proxy = own
			}
		}
		settings, settingsProblem := proxySettings(g.proxy)
		g.settings = settings
		switch {
		case !cs.accepted:
			g.invalid = &problem{string(gwv1.GatewayReasonInvalid), fmt.Sprintf("GatewayClass %q is not accepted: %s", cs.obj.Name, cs.problem.message)}
		case addressPlan(g).Unsupported != "":
			g.invalid = &problem{string(gwv1.GatewayReasonUnsupportedAddress), addressPlan(g).Unsupported}
		case paramsProblem != nil:
			g.invalid = paramsProblem
		case settingsProblem != nil:
			g.invalid = settingsProblem
		}
		if gw.Spec.TLS != nil && gw.Spec.TLS.Backend != nil && gw.Spec.TLS.Backend.ClientCertificateRef != nil {
			g.clientCert, g.clientCertProblem = gt.clientCertificate(gw)
		}
		from := objRef{gwv1.GroupName, resource.KindGateway.String(), gw.Namespace}
		seen := map[string]bool{}
		for _, l := range gw.Spec.Listeners {
			// Names are unique by CRD validation; a manifest breaking that
			// rule keeps the first listener of each name.
			if seen[string(l.Name)] {
				continue
			}
			seen[string(l.Name)] = true
			g.own = append(g.own, gt.newListener(g, nil, listenerSpec{
				name: string(l.Name), hostname: l.Hostname, port: l.Port, protocol: l.Protocol,
				tls: l.TLS, allowedRoutes: l.AllowedRoutes, filters: l.Filters,
				owner: "gateway/" + gw.Namespace + "/" + gw.Name,
			}, from))
		}
		t.gateways[k] = g
		t.gwOrder = append(t.gwOrder, g)
	}
}

// listenerSetReasonParentNotProgrammed is the ListenerSet Programmed=False
// reason listed by the ListenerSet specification (listenerset_types.go) for
// a parent Gateway that is not programmed; the API has no constant for it.
const listenerSetReasonParentNotProgrammed = "ParentNotProgrammed"

// listenerSetState is a ListenerSet whose parent is a Gateway of ours.
type listenerSetState struct {
	obj       *gwv1.ListenerSet
	gw        *gatewayState
	allowed   bool
	listeners []*listener
	accepted  bool
}

// processListenerSets resolves the parent of every ListenerSet. Those whose
// parent is not a Gateway of ours get no status.
func (t *translator) processListenerSets() {
	for _, k := range t.scope.setKeys(t.in) {
		ls := t.in.ListenerSet(k)
		if ls == nil {
			continue
		}
		key, ok := ListenerSetParent(ls)
		if !ok {
			continue
		}
		g := t.gateways[key]
		if g == nil {
			continue
		}
		s := &listenerSetState{obj: ls, gw: g}
		if al := g.obj.Spec.AllowedListeners; al != nil && al.Namespaces != nil {
			gt := t.readingFor(gatewayRef(g.key())) // the Gateway's policy reads for it
			s.allowed = newNSPolicy(al.Namespaces.From, al.Namespaces.Selector, gwv1.NamespacesFromNone, g.obj.Namespace).allows(gt, ls.Namespace)
		}
		if s.allowed {
			g.sets = append(g.sets, s)
		}
		t.sets = append(t.sets, s)
	}
}

// finishListeners merges each Gateway's listeners with those of its
// ListenerSets, detects conflicts and decides acceptance.
func (t *translator) finishListeners() {
	for _, g := range t.gwOrder {
		gt := t.readingFor(gatewayRef(g.key())) // reads for the Gateway
		sort.SliceStable(g.sets, func(i, j int) bool {
			a, b := g.sets[i].obj, g.sets[j].obj
			return olderFirst(a.CreationTimestamp, b.CreationTimestamp, a.Namespace, a.Name, b.Namespace, b.Name)
		})
		g.merged = append([]*listener(nil), g.own...)
		for _, s := range g.sets {
			from := objRef{gwv1.GroupName, resource.KindListenerSet.String(), s.obj.Namespace}
			seen := map[string]bool{}
			for _, e := range s.obj.Spec.Listeners {
				if seen[string(e.Name)] {
					continue
				}
				seen[string(e.Name)] = true
				l := gt.newListener(g, s, listenerSpec{
					name: string(e.Name), hostname: e.Hostname, port: e.Port, protocol: e.Protocol,
					tls: e.TLS, allowedRoutes: e.AllowedRoutes, filters: e.Filters,
					owner: "listenerset/" + s.obj.Namespace + "/" + s.obj.Name,
				}, from)
				s.listeners = append(s.listeners, l)
				g.merged = append(g.merged, l)
			}
		}
		detectConflicts(g.merged)
		checkSharedFilters(g.merged)

		// A Gateway (ListenerSet) with listeners is accepted when one of
		// them can be served: accepted, with usable certificates. The
		// conformance suite (ListenerSetReferenceGrant) expects a
		// ListenerSet whose only listener lacks a ReferenceGrant to be
		// rejected with ListenersNotValid.
		ownOK := len(g.own) == 0
		for _, l := range g.own {
			ownOK = ownOK || l.usable()
		}
		g.accepted = g.invalid == nil && ownOK
		for _, s := range g.sets {
			ok := false
			for _, l := range s.listeners {
				ok = ok || l.usable()
			}
			s.accepted = g.accepted && ok
		}
	}
}

// gatewayStatuses emits the status of every Gateway and ListenerSet of ours.
func (t *translator) gatewayStatuses() {
	for _, g := range t.gwOrder {
		gt := t.readingFor(gatewayRef(g.key())) // reads for the Gateway
		gw := g.obj
		c := newConditions(gw.Generation)
		var bad []string
		for _, l := range g.own {
			if !l.usable() {
				bad = append(bad, l.name)
			}
		}
		switch {
		case g.invalid != nil:
			c.set(string(gwv1.GatewayConditionAccepted), false, g.invalid.reason, g.invalid.message)
			c.set(string(gwv1.GatewayConditionProgrammed), false, string(gwv1.GatewayReasonInvalid), "the Gateway is not accepted: "+g.invalid.message)
		case !g.accepted:
			msg := "no listener can be served: " + strings.Join(bad, ", ") + "; see the listener conditions"
			c.set(string(gwv1.GatewayConditionAccepted), false, string(gwv1.GatewayReasonListenersNotValid), msg)
			c.set(string(gwv1.GatewayConditionProgrammed), false, string(gwv1.GatewayReasonInvalid), msg)
		case len(bad) > 0:
			msg := "listeners that cannot be served: " + strings.Join(bad, ", ") + " (see their conditions); the others are served"
			c.set(string(gwv1.GatewayConditionAccepted), true, string(gwv1.GatewayReasonListenersNotValid), msg)
			c.set(string(gwv1.GatewayConditionProgrammed), true, string(gwv1.GatewayReasonProgrammed), "configuration was generated for the listeners that can be served")
		default:
			c.set(string(gwv1.GatewayConditionAccepted), true, string(gwv1.GatewayReasonAccepted), "the Gateway is valid")
			c.set(string(gwv1.GatewayConditionProgrammed), true, string(gwv1.GatewayReasonProgrammed), "the Gateway's configuration was generated")
		}
		if insecureFrontend(gw) {
			c.set(string(gwv1.GatewayConditionInsecureFrontendValidationMode), true, string(gwv1.GatewayReasonConfigurationChanged),
				"a tls.frontend validation of the Gateway is AllowInsecureFallback: clients without a valid certificate are let in")
		}
		var addresses []gwv1.GatewayStatusAddress
		if t.opts.Infrastructure && g.invalid == nil && g.accepted {
			// Programmed also needs proxies that can take traffic.
			var p *problem
			var unsatisfied []string
			addresses, unsatisfied, p = gt.proxyReadiness(g)
			if p != nil {
				c.set(string(gwv1.GatewayConditionProgrammed), false, p.reason, p.message)
			}
			addressesAssigned(c, g, addresses, unsatisfied)
		} else if g.invalid == nil && g.accepted && len(gw.Spec.Addresses) > 0 {
			// Standalone: the addresses are the listeners' bind addresses.
			o := standaloneAddresses(addressPlan(g))
			addresses = o.addresses
			if o.problem != nil {
				c.set(string(gwv1.GatewayConditionProgrammed), false, o.problem.reason, o.problem.message)
			}
			addressesAssigned(c, g, addresses, o.unsatisfied)
		}
		if gw.Spec.TLS != nil && gw.Spec.TLS.Backend != nil {
			if p := g.clientCertProblem; p != nil {
				c.set(string(gwv1.GatewayConditionResolvedRefs), false, p.reason, p.message+"; TLS backends are connected to without a client certificate")
			} else {
				c.set(string(gwv1.GatewayConditionResolvedRefs), true, string(gwv1.GatewayReasonResolvedRefs), "the Gateway's references are resolved")
			}
		}
		st := &gwv1.GatewayStatus{Conditions: c.done(), Addresses: addresses}
		for _, l := range g.own {
			st.Listeners = append(st.Listeners, gwv1.ListenerStatus{
				Name:           gwv1.SectionName(l.name),
				SupportedKinds: l.supportedKinds(),
				AttachedRoutes: l.routes,
				Conditions:     listenerConditions(l, gw.Generation).done(),
			})
		}
		var attached int32
		for _, s := range g.sets {
			if s.accepted {
				attached++
			}
		}
		st.AttachedListenerSets = &attached
		t.statuses = append(t.statuses, Status{Kind: resource.KindGateway, Namespace: gw.Namespace, Name: gw.Name, Generation: gw.Generation, Gateway: st})
	}
	for _, s := range t.sets {
		t.statuses = append(t.statuses, t.listenerSetStatus(s))
	}
}

func (t *translator) listenerSetStatus(s *listenerSetState) Status {
	ls := s.obj
	c := newConditions(ls.Generation)
	st := &gwv1.ListenerSetStatus{}
	switch {
	case !s.allowed:
		msg := fmt.Sprintf("Gateway %s/%s does not allow ListenerSets from namespace %s (spec.allowedListeners)", s.gw.obj.Namespace, s.gw.obj.Name, ls.Namespace)
		c.set(string(gwv1.ListenerSetConditionAccepted), false, string(gwv1.ListenerSetReasonNotAllowed), msg)
		c.set(string(gwv1.ListenerSetConditionProgrammed), false, string(gwv1.ListenerSetReasonNotAllowed), msg)
	case !s.gw.accepted:
		msg := fmt.Sprintf("parent Gateway %s/%s is not accepted", s.gw.obj.Namespace, s.gw.obj.Name)
		c.set(string(gwv1.ListenerSetConditionAccepted), false, string(gwv1.ListenerSetReasonParentNotAccepted), msg)
		c.set(string(gwv1.ListenerSetConditionProgrammed), false, listenerSetReasonParentNotProgrammed, msg)
	case !s.accepted:
		msg := "no listener of the ListenerSet can be served; see the listener conditions"
		c.set(string(gwv1.ListenerSetConditionAccepted), false, string(gwv1.ListenerSetReasonListenersNotValid), msg)
		c.set(string(gwv1.ListenerSetConditionProgrammed), false, string(gwv1.ListenerSetReasonListenersNotValid), msg)
	default:
		var bad []string
		for _, l := range s.listeners {
			if !l.usable() {
				bad = append(bad, l.name)
			}
		}
		if len(bad) > 0 {
			msg := "listeners that cannot be served: " + strings.Join(bad, ", ") + " (see their conditions); the others are served"
			c.set(string(gwv1.ListenerSetConditionAccepted), true, string(gwv1.ListenerSetReasonListenersNotValid), msg)
			c.set(string(gwv1.ListenerSetConditionProgrammed), true, string(gwv1.ListenerSetReasonProgrammed), "configuration was generated for the listeners that can be served")
		} else {
			c.set(string(gwv1.ListenerSetConditionAccepted), true, string(gwv1.ListenerSetReasonAccepted), "the ListenerSet is attached to its Gateway")
			c.set(string(gwv1.ListenerSetConditionProgrammed), true, string(gwv1.ListenerSetReasonProgrammed), "configuration was generated for the accepted listeners")
		}
	}
	st.Conditions = c.done()
	if s.allowed {
		for _, l := range s.listeners {
			st.Listeners = append(st.Listeners, gwv1.ListenerEntryStatus{
				Name:           gwv1.SectionName(l.name),
				SupportedKinds: l.supportedKinds(),
				AttachedRoutes: l.routes,
				Conditions:     listenerConditions(l, ls.Generation).done(),
			})
		}
	}
	return Status{Kind: resource.KindListenerSet, Namespace: ls.Namespace, Name: ls.Name, Generation: ls.Generation, ListenerSet: st}
}
