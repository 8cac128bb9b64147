package infra

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/proxyspec"
)

// DefaultAgentImage is the image of the shutdown-manager sidecar when
// Params names none. The other defaults of a proxy (ports, replicas,
// drain, autoscaling, budget) are proxyspec's: the translator checks and
// reports them too.
const DefaultAgentImage = "ghcr.io/portico-dev/portico:v0.1.0"

// terminationSlack is what terminationGracePeriodSeconds adds to the
// drain timeout: Envoy's own exit after the drain.
const terminationSlack = 10 * time.Second

// TerminationGracePeriod of the proxy Pods: the drain timeout and slack.
func TerminationGracePeriod(pc v1alpha1.ProxyConfigSpec) time.Duration {
	return proxyspec.DrainTimeout(pc) + terminationSlack
}

// Requests of the Envoy container when the ProxyConfig names neither a
// request nor a limit of the resource: a HorizontalPodAutoscaler's
// utilization targets are percentages of requests, and a Pod without
// requests is the first evicted under node pressure.
var (
	defaultCPURequest    = resource.MustParse("100m")
	defaultMemoryRequest = resource.MustParse("128Mi")
)
