package gatewayapi

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/proxyspec"
)

// Bounds on the ProxyConfig of a Gateway.
//
// The ProxyConfig a GatewayClass references is the administrator's; the
// one a Gateway references (spec.infrastructure.parametersRef, in the
// Gateway's namespace) is whoever may write ProxyConfigs there, usually
// the tenant. Portico creates the Gateway's Deployment and Service with its
// own rights, so what a Gateway's ProxyConfig may ask for is bounded by its
// class's: the class's spec.gatewayOverrides lists the fields a Gateway may
// set to another value (v1alpha1.DefaultOverridableFields when absent),
// which images it may name and how many replicas it may run. The effective
// spec is the class's with the fields the Gateway's ProxyConfig sets; a
// field it sets to the class's own value is no override. A value outside
// the bounds is refused, naming the field (Accepted=False,
// InvalidParameters): never silently clamped, so that what runs is what
// someone wrote.
//
// The fields added for production proxies (autoscaling,
// podDisruptionBudget, placement, pod, shutdown, metrics, accessLog,
// timeouts, circuitBreakers, overload) are replaced whole: a Gateway's
// value, when set, is the effective one, if the class's bounds list the
// field or the value is the class's (semantic equality; an empty value is
// the same as none, but for autoscaling, where it turns on an
// autoscaler). gatewayOverrides.maxReplicas bounds autoscaling.maxReplicas
// as it bounds replicas (and so minReplicas, which may not exceed it).
//
// Content: a ProxyConfig whose values Portico cannot render as written
// (autoscaling.minReplicas above maxReplicas, a budget with both
// minAvailable and maxUnavailable or a malformed percentage, a metrics
// port among the Pod's reserved ports, a drain shorter than its minimum
// or a negative duration, invalid Pod labels, annotations or node
// selector) is refused with a message naming the field, never clamped:
// proxyspec.CheckProxyConfig, the rule the reconciler applies too. A class's
// makes the GatewayClass Accepted=False (InvalidParameters) and its
// Gateways Invalid; their infra spec stays the class's, which the
// reconciler does not render (what runs stays until the ProxyConfig is
// fixed), never the defaults, which could expose the proxies more than
// the administrator chose. A Gateway's makes the Gateway Accepted=False
// (InvalidParameters), its proxies the class's. The access log, timeouts,
// circuit breakers and overload are checked with the Gateway's effective
// settings (proxysettings.go).
//
// A Gateway may always pick a Service type that exposes its proxies no
// more than its class's (ClusterIP, then NodePort, then LoadBalancer, which
// also opens node ports): that takes nothing the administrator did not
// give. The Gateway API's own spec.infrastructure.labels and annotations
// are not bounded here: the specification requires them on the provisioned
// objects (GatewayInfrastructurePropagation); the class's
// service.annotations win over them key by key, so an administrator pins
// the load-balancer annotations that matter in the class's ProxyConfig.

// overrideBounds are the effective bounds of one class.
type overrideBounds struct {
	fields      []v1alpha1.OverridableField
	images      []string
	maxReplicas *int32
}

func boundsOf(class *v1alpha1.ProxyConfigSpec) overrideBounds {
	if class == nil || class.GatewayOverrides == nil {
		return overrideBounds{fields: v1alpha1.DefaultOverridableFields}
	}
	o := class.GatewayOverrides
	return overrideBounds{fields: o.Fields, images: o.Images, maxReplicas: o.MaxReplicas}
}

func (b overrideBounds) allows(f v1alpha1.OverridableField) bool { return slices.Contains(b.fields, f) }

// allowed lists the overridable fields for a message.
func (b overrideBounds) allowed() string {
	if len(b.fields) == 0 {
		return "none"
	}
	out := make([]string, len(b.fields))
	for i, f := range b.fields {
		out[i] = string(f)
	}
	return strings.Join(out, ", ")
}

// The values Render gives unset fields.
func imageOf(s *v1alpha1.ProxyConfigSpec) string {
	if s.Image == "" {
		return v1alpha1.DefaultEnvoyImage
	}
	return s.Image
}

func replicasOf(s *v1alpha1.ProxyConfigSpec) int32 {
	if s.Replicas == nil {
		return proxyspec.DefaultReplicas
	}
	return *s.Replicas
}

func logLevelOf(s *v1alpha1.ProxyConfigSpec) string {
	if s.LogLevel == "" {
		return proxyspec.DefaultLogLevel
	}
	return s.LogLevel
}

func serviceTypeOf(s *v1alpha1.ProxyConfigSpec) corev1.ServiceType {
	if s.Service.Type == "" {
		return proxyspec.DefaultServiceType
	}
	return s.Service.Type
}

// serviceExposure orders Service types by what they expose.
func serviceExposure(t corev1.ServiceType) int {
	switch t {
	case corev1.ServiceTypeClusterIP:
		return 0
	case corev1.ServiceTypeNodePort:
		return 1
	default: // LoadBalancer, the default
		return 2
	}
}

// imageAllowed reports whether image matches one of the allowed entries:
// equal, or starting with an entry that ends in "/", ":" or "@". No entry
// allows any image.
func imageAllowed(image string, allowed []string) bool {
	if len(allowed) == 0 {
		return true
	}
	for _, a := range allowed {
		if image == a {
			return true
		}
		if a != "" && strings.ContainsAny(a[len(a)-1:], "/:@") && strings.HasPrefix(image, a) {
			return true
		}
	}
	return false
}

// boundedProxy merges a Gateway's ProxyConfig spec own over its class's
// (nil: the defaults) within the class's bounds. It returns the effective
// spec, or a message naming the first field (in spec order) that is out of
// bounds or whose content is invalid (checkProxyContent). own.GatewayOverrides
// is ignored.
func boundedProxy(class, own *v1alpha1.ProxyConfigSpec) (*v1alpha1.ProxyConfigSpec, string) {
	if why := checkProxyContent(own); why != "" {
		return nil, why
	}
	b := boundsOf(class)
	eff := &v1alpha1.ProxyConfigSpec{}
	if class != nil {
		eff = class.DeepCopy()
	}
	refuse := func(field v1alpha1.OverridableField, why string) (*v1alpha1.ProxyConfigSpec, string) {
		return nil, fmt.Sprintf("spec.%s %s (Gateways of the class may override: %s)", field, why, b.allowed())
	}
	notAllowed := func(field v1alpha1.OverridableField) (*v1alpha1.ProxyConfigSpec, string) {
		return refuse(field, "may not be overridden by a Gateway")
	}

	if own.Image != "" && own.Image != imageOf(eff) {
		switch {
		case !b.allows(v1alpha1.OverrideImage):
			return notAllowed(v1alpha1.OverrideImage)
		case !imageAllowed(own.Image, b.images):
			return refuse(v1alpha1.OverrideImage, fmt.Sprintf("%q is not among the allowed images (%s)", own.Image, strings.Join(b.images, ", ")))
		}
		eff.Image = own.Image
	}
	if own.Replicas != nil && *own.Replicas != replicasOf(eff) {
		switch {
		case !b.allows(v1alpha1.OverrideReplicas):
			return notAllowed(v1alpha1.OverrideReplicas)
		case b.maxReplicas != nil && *own.Replicas > *b.maxReplicas:
			return refuse(v1alpha1.OverrideReplicas, fmt.Sprintf("%d exceeds the maximum of %d (gatewayOverrides.maxReplicas)", *own.Replicas, *b.maxReplicas))
		}
		eff.Replicas = own.Replicas
	}
	if own.Resources != nil && !equality.Semantic.DeepEqual(own.Resources, eff.Resources) {
		if !b.allows(v1alpha1.OverrideResources) {
			return notAllowed(v1alpha1.OverrideResources)
		}
		eff.Resources = own.Resources.DeepCopy()
	}
	if own.Service.Type != "" && own.Service.Type != serviceTypeOf(eff) {
		if !b.allows(v1alpha1.OverrideServiceType) && serviceExposure(own.Service.Type) > serviceExposure(serviceTypeOf(eff)) {
			return refuse(v1alpha1.OverrideServiceType, fmt.Sprintf("%s exposes the proxies more than the class's %s", own.Service.Type, serviceTypeOf(eff)))
		}
		eff.Service.Type = own.Service.Type
	}
	if own.Service.AddressFromClusterIP && !eff.Service.AddressFromClusterIP {
		if !b.allows(v1alpha1.OverrideAddressFromClusterIP) {
			return notAllowed(v1alpha1.OverrideAddressFromClusterIP)
		}
		eff.Service.AddressFromClusterIP = true
	}
	if len(own.Service.Annotations) > 0 {
		keys := slices.Collect(maps.Keys(own.Service.Annotations))
		sort.Strings(keys)
		for _, k := range keys {
			if v, ok := eff.Service.Annotations[k]; ok && v == own.Service.Annotations[k] {
				continue
			}
			if !b.allows(v1alpha1.OverrideServiceAnnotations) {
				return refuse(v1alpha1.OverrideServiceAnnotations, fmt.Sprintf("(annotation %q) may not be overridden by a Gateway", k))
			}
		}
		if b.allows(v1alpha1.OverrideServiceAnnotations) {
			merged := maps.Clone(eff.Service.Annotations)
			if merged == nil {
				merged = map[string]string{}
			}
			maps.Copy(merged, own.Service.Annotations)
			eff.Service.Annotations = merged
		}
	}
	if own.LogLevel != "" && own.LogLevel != logLevelOf(eff) {
		if !b.allows(v1alpha1.OverrideLogLevel) {
			return notAllowed(v1alpha1.OverrideLogLevel)
		}
		eff.LogLevel = own.LogLevel
	}
	if a := own.Autoscaling; a != nil && !equality.Semantic.DeepEqual(a, eff.Autoscaling) {
		switch {
		case !b.allows(v1alpha1.OverrideAutoscaling):
			return notAllowed(v1alpha1.OverrideAutoscaling)
		case b.maxReplicas != nil && a.MaxReplicas > *b.maxReplicas:
			// minReplicas ≤ maxReplicas (checkProxyContent): bounded too.
			return nil, fmt.Sprintf("spec.autoscaling.maxReplicas %d exceeds the maximum of %d (gatewayOverrides.maxReplicas; Gateways of the class may override: %s)", a.MaxReplicas, *b.maxReplicas, b.allowed())
		}
		eff.Autoscaling = a.DeepCopy()
	}
	// The other fields are replaced whole.
	for _, f := range []struct {
		field v1alpha1.OverridableField
		set   bool
		same  bool
		take  func()
	}{
		{v1alpha1.OverrideDisruptionBudget, own.PodDisruptionBudget != nil, sameValue(own.PodDisruptionBudget, eff.PodDisruptionBudget),
			func() { eff.PodDisruptionBudget = own.PodDisruptionBudget.DeepCopy() }},
		{v1alpha1.OverridePlacement, own.Placement != nil, sameValue(own.Placement, eff.Placement),
			func() { eff.Placement = own.Placement.DeepCopy() }},
		{v1alpha1.OverridePod, own.Pod != nil, sameValue(own.Pod, eff.Pod),
			func() { eff.Pod = own.Pod.DeepCopy() }},
		{v1alpha1.OverrideShutdown, own.Shutdown != nil, sameValue(own.Shutdown, eff.Shutdown),
			func() { eff.Shutdown = own.Shutdown.DeepCopy() }},
		{v1alpha1.OverrideMetrics, own.Metrics != nil, sameValue(own.Metrics, eff.Metrics),
			func() { eff.Metrics = own.Metrics.DeepCopy() }},
		{v1alpha1.OverrideAccessLog, own.AccessLog != nil, sameValue(own.AccessLog, eff.AccessLog),
			func() { eff.AccessLog = own.AccessLog.DeepCopy() }},
		{v1alpha1.OverrideTimeouts, own.Timeouts != nil, sameValue(own.Timeouts, eff.Timeouts),
			func() { eff.Timeouts = own.Timeouts.DeepCopy() }},
		{v1alpha1.OverrideCircuitBreakers, own.CircuitBreakers != nil, sameValue(own.CircuitBreakers, eff.CircuitBreakers),
			func() { eff.CircuitBreakers = own.CircuitBreakers.DeepCopy() }},
		{v1alpha1.OverrideOverload, own.Overload != nil, sameValue(own.Overload, eff.Overload),
			func() { eff.Overload = own.Overload.DeepCopy() }},
	} {
		if !f.set || f.same {
			continue
		}
		if !b.allows(f.field) {
			return notAllowed(f.field)
		}
		f.take()
	}
	return eff, ""
}

// sameValue reports whether a Gateway's value of a field replaced whole is
// its class's: semantically equal, an empty value being the same as none
// (the defaults).
func sameValue[T any](own, class *T) bool {
	var zero T
	if own == nil {
		own = &zero
	}
	if class == nil {
		class = &zero
	}
	return equality.Semantic.DeepEqual(own, class)
}

// checkProxyContent checks the values of a ProxyConfig spec that Portico
// renders into the proxies' objects (proxyspec.CheckProxyConfig: the
// reconciler renders nothing else), and returns a message naming the
// first offending field, or "".
func checkProxyContent(s *v1alpha1.ProxyConfigSpec) string {
	if err := proxyspec.CheckProxyConfig(*s); err != nil {
		return err.Error()
	}
	return ""
}
