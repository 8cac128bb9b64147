package gatewayapi

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/portico-dev/portico/internal/gatewayapi/inputs"
	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/resource"
)

// PatchEndpoints returns gw with the endpoints of the clusters of the
// Services svcs computed again from snap, or gw itself when none of them
// changed. Only endpoints change: statuses and the rest of the IR do not
// depend on them. The Gateway's assembly in cache (if any) gets the new
// cluster list.
func PatchEndpoints(snap *resource.Snapshot, gw *ir.Gateway, svcs []resource.Key, cache Cache) *ir.Gateway {
	in := inputs.New(snap, nil) // endpoints are followed by Service, not recorded
	// The clusters of a Service, named "<ns>/<name>/<port>", are adjacent
	// in the sorted list: found by binary search.
	var idx []int
	for _, svc := range svcs {
		prefix := svc.Namespace + "/" + svc.Name + "/"
		i, _ := slices.BinarySearchFunc(gw.Clusters, prefix, func(c *ir.Cluster, p string) int { return strings.Compare(c.Name, p) })
		for ; i < len(gw.Clusters) && strings.HasPrefix(gw.Clusters[i].Name, prefix); i++ {
			if c := gw.Clusters[i]; c.ServiceNamespace == svc.Namespace && c.ServiceName == svc.Name {
				idx = append(idx, i)
			}
		}
	}
	var clusters []*ir.Cluster
	for _, i := range idx {
		c := gw.Clusters[i]
		if c.TLS != nil && c.TLS.Blocked != "" {
			continue // never any endpoints (backendtls.go)
		}
		svc := resource.Key{Namespace: c.ServiceNamespace, Name: c.ServiceName}
		eps, ok := cache.Endpoints(c.Name)
		if !ok {
			udp := c.Protocol == ir.UpstreamUDP
			eps = clusterEndpoints(in.EndpointSlices(svc), servicePortName(in.Service(svc), c.ServicePort, udp), udp)
			cache.KeepEndpoints(c.Name, svc, eps)
		}
		if slices.Equal(eps, c.Endpoints) {
			continue
		}
		if clusters == nil {
			clusters = slices.Clone(gw.Clusters)
		}
		nc := *c
		nc.Endpoints = eps
		clusters[i] = &nc
	}
	if clusters == nil {
		return gw
	}
	out := *gw
	out.Clusters = clusters
	if a := cache.Assembly(resource.Key{Namespace: gw.Namespace, Name: gw.Name}); a != nil {
		a.clusters = clusters
	}
	return &out
}

// servicePortName is the name of the port of a Service a cluster uses
// (its UDP port for a UDP cluster, else its TCP one), as resolveBackend
// finds it.
func servicePortName(svc *corev1.Service, port int32, udp bool) string {
	if svc == nil {
		return ""
	}
	want := corev1.ProtocolTCP
	if udp {
		want = corev1.ProtocolUDP
	}
	for _, p := range svc.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		if p.Port == port && proto == want {
			return p.Name
		}
	}
	return ""
}
