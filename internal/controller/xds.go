package controller

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// XDSSecurity are the settings of the proxies' authentication on xDS.
//
// With Options.XDSTLS, each Gateway's proxies get a client certificate
// naming the Gateway and its UID, valid ClientCertValidity (default
// certstore.DefaultClientValidity, one day) and renewed by the leader two thirds
// into it; every replica refuses a certificate whose UID is not that of the
// current Gateway of its name (its informer cache's), and closes the
// connections of one that stops being so (the Gateway deleted or
// re-created). Connections live at most MaxConnectionAge (plus
// MaxConnectionAgeGrace), so proxies present their renewed certificate at
// least that often.
//
// Without Options.XDSTLS xDS is plaintext and unauthenticated: TLS private
// keys are not served unless UnauthenticatedSecrets.
type XDSSecurity struct {
	ClientCertValidity time.Duration
	// MaxConnectionAge and MaxConnectionAgeGrace: see
	// xdsserver.Server; zero means the defaults (30 min, 1 min), a
	// negative MaxConnectionAge no limit.
	MaxConnectionAge, MaxConnectionAgeGrace time.Duration
	UnauthenticatedSecrets                  bool
}

// wireXDSSecurity sets the xDS server's security settings; with mTLS the
// Gateway UIDs come from the provider's informer cache. Call it once the
// provider exists.
func (c *Controller) wireXDSSecurity() {
	sec := c.opts.XDSSecurity
	c.xds.UnauthenticatedSecrets = sec.UnauthenticatedSecrets
	c.xds.MaxConnectionAge, c.xds.MaxConnectionAgeGrace = sec.MaxConnectionAge, sec.MaxConnectionAgeGrace
	if c.xds.TLS == nil {
		if c.opts.Provision {
			c.log.Warn("xDS without TLS (--xds-tls=false) while provisioning proxies: the provisioned proxies dial " +
				"xDS with mutual TLS and mount a client certificate Secret that is not issued, so they will not start")
		}
		return
	}
	reader := c.provider.Cache()
	c.xds.GatewayUID = func(ctx context.Context, ns, name string) (string, bool, error) {
		var g gwv1.Gateway
		err := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &g)
		switch {
		case apierrors.IsNotFound(err):
			return "", false, nil
		case err != nil:
			return "", false, err
		}
		return string(g.UID), true, nil
	}
}
