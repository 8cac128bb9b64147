package integration

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/controller"
	"github.com/portico-dev/portico/internal/proxyspec"
)

// startProvisioner runs one replica that provisions proxies, with xDS
// mutual TLS (CA and serving Secrets in the fixture's namespace), as the
// chart runs it. It returns the admin address.
func startProvisioner(t *testing.T, f *fixture) string {
	t.Helper()
	xl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	al, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := controller.New(controller.Options{
		RESTConfig:     restCfg,
		Namespace:      f.ns,
		ControllerName: f.controller,
		LeaseDuration:  testLease,
		RenewDeadline:  testRenew,
		RetryPeriod:    testRetry,
		Debounce:       20 * time.Millisecond,
		MaxDelay:       200 * time.Millisecond,
		Provision:      true,
		XDSTLS:         true,
		XDSListener:    xl,
		AdminListener:  al,
		Log:            testLogger(t, "provisioner"),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("provisioner: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("provisioner did not stop within 30s")
		}
	})
	return al.Addr().String()
}

// provisionedObjects are the objects Portico writes for Gateway gw, by the
// names it gives them.
func provisionedObjects(gw string) []client.Object {
	name := proxyspec.Name(gw)
	return []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: proxyspec.ClientCertSecretName(gw)}},
	}
}

// ownedObjects reads the provisioned objects of gw and checks that every
// one has the controller owner reference uid; it returns their
// resourceVersions by kind.
func (f *fixture) ownedObjects(gw string, uid types.UID) (map[string]string, error) {
	rvs := map[string]string{}
	for _, o := range provisionedObjects(gw) {
		kind := fmt.Sprintf("%T", o)
		if err := k8s.Get(f.ctx, f.key(o.GetName()), o); err != nil {
			return nil, fmt.Errorf("%s %s: %w", kind, o.GetName(), err)
		}
		c := metav1.GetControllerOf(o)
		if c == nil || c.UID != uid {
			return nil, fmt.Errorf("%s %s is controlled by %+v, want the Gateway with UID %s", kind, o.GetName(), c, uid)
		}
		rvs[kind] = o.GetResourceVersion()
	}
	return rvs, nil
}

// metricValue scrapes the admin server's /metrics for the value of one
// sample (name with its labels, as exposed), "" when absent.
func metricValue(t *testing.T, admin, sample string) string {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		return ""
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Two Gateways whose names map to the same provisioned name (a long name is
// shortened with a hash; a short name can equal the result): the first
// keeps its proxies, the second is Programmed=False naming the first, and
// nothing of the first is written for the second. Once the first is
// deleted, the second gets the name.
func TestProvisionedNameCollision(t *testing.T) {
	// 60 characters: shortened (portico-<name> would exceed 63) yet a
	// valid label value, as every Gateway name Portico provisions for.
	long := "payments-production-gateway-eu-west-1-primary-" + strings.Repeat("x", 14)
	short := strings.TrimPrefix(proxyspec.Name(long), "portico-")
	if short == long || proxyspec.Name(short) != proxyspec.Name(long) {
		t.Fatalf("names %q and %q do not collide: %q vs %q", long, short, proxyspec.Name(long), proxyspec.Name(short))
	}
	f := newFixture(t)
	admin := startProvisioner(t, f)

	first := f.gateway(long)
	var before map[string]string
	eventually(t, 60*time.Second, "the first Gateway's proxies and client certificate", func() bool {
		var err error
		before, err = f.ownedObjects(long, first.UID)
		return err == nil
	})

	second := f.gateway(short)
	var cond *metav1.Condition
	eventually(t, 60*time.Second, "the second Gateway to be Programmed=False for the name collision", func() bool {
		if _, err := f.ownedObjects(long, first.UID); err != nil {
			t.Fatalf("the second Gateway took over the first's objects: %v", err)
		}
		var gw gwv1.Gateway
		if err := k8s.Get(f.ctx, f.key(short), &gw); err != nil {
			return false
		}
		cond = meta.FindStatusCondition(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed))
		return cond != nil && cond.ObservedGeneration == gw.Generation && cond.Status == metav1.ConditionFalse &&
			cond.Reason == string(gwv1.GatewayReasonInvalid)
	})
	if !strings.Contains(cond.Message, "Gateway "+f.ns+"/"+long) {
		t.Errorf("Programmed message %q does not name the Gateway holding the name", cond.Message)
	}
	var gw gwv1.Gateway
	if err := k8s.Get(f.ctx, f.key(short), &gw); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(gw.Status.Conditions, string(gwv1.GatewayConditionAccepted)); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Accepted = %+v, want True (the Gateway is valid; only its proxies cannot be provisioned)", c)
	}
	if len(gw.Status.Addresses) != 0 {
		t.Errorf("the second Gateway reports the first's addresses %v", gw.Status.Addresses)
	}
	// The leader refused to write (it counts the Gateway as blocked), and
	// nothing of the first Gateway changed: same owner, same versions.
	eventually(t, 30*time.Second, "the provisioner to report the blocked Gateway", func() bool {
		return metricValue(t, admin, "portico_infra_blocked_gateways") == "1"
	})
	after, err := f.ownedObjects(long, first.UID)
	if err != nil {
		t.Fatalf("after the collision: %v", err)
	}
	for kind, rv := range before {
		if after[kind] != rv {
			t.Errorf("%s of the first Gateway was written (resourceVersion %s → %s)", kind, rv, after[kind])
		}
	}
	var sec corev1.Secret
	if err := k8s.Get(f.ctx, f.key(proxyspec.ClientCertSecretName(long)), &sec); err != nil {
		t.Fatal(err)
	}
	if uris := certURIs(t, sec.Data[corev1.TLSCertKey]); !slices.ContainsFunc(uris, func(u string) bool {
		// spiffe://portico.dev/…<namespace>…/<name>[/uid/<uid>]
		return strings.Contains(u, "/"+f.ns+"/") && (strings.HasSuffix(u, "/"+long) || strings.Contains(u, "/"+long+"/"))
	}) {
		t.Errorf("the client certificate names %v, want Gateway %s/%s", uris, f.ns, long)
	}

	// The second Gateway goes: nothing of the first is removed, not even
	// the client certificate Secret whose name they share.
	if err := k8s.Delete(f.ctx, second); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the deleted Gateway to be no longer blocked", func() bool {
		return metricValue(t, admin, "portico_infra_blocked_gateways") == "0"
	})
	if after, err = f.ownedObjects(long, first.UID); err != nil {
		t.Fatalf("after the second Gateway's deletion: %v", err)
	}
	for kind, rv := range before {
		if after[kind] != rv {
			t.Errorf("%s of the first Gateway was written when the second was deleted (resourceVersion %s → %s)", kind, rv, after[kind])
		}
	}

	// Created again, it is blocked again; then the first Gateway goes:
	// its objects are removed and the second Gateway gets the name.
	second = f.gateway(short)
	eventually(t, 30*time.Second, "the re-created Gateway to be blocked", func() bool {
		return metricValue(t, admin, "portico_infra_blocked_gateways") == "1"
	})
	if err := k8s.Delete(f.ctx, first); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the second Gateway's own proxies", func() bool {
		_, err := f.ownedObjects(short, second.UID)
		return err == nil
	})
	eventually(t, 30*time.Second, "no blocked Gateway", func() bool {
		return metricValue(t, admin, "portico_infra_blocked_gateways") == "0"
	})
}

// A provisioned name taken by an object that no Gateway controls (here a
// ConfigMap someone created) is not overwritten either.
func TestProvisionedNameTakenByForeignObject(t *testing.T) {
	f := newFixture(t)
	admin := startProvisioner(t, f)
	foreign := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: proxyspec.Name("edge")},
		Data:       map[string]string{"owner": "someone else"},
	}
	f.create(foreign)
	f.gateway("edge")
	eventually(t, 60*time.Second, "the provisioner to report the blocked Gateway", func() bool {
		return metricValue(t, admin, "portico_infra_blocked_gateways") == "1"
	})
	var cm corev1.ConfigMap
	if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(foreign), &cm); err != nil {
		t.Fatal(err)
	}
	if cm.ResourceVersion != foreign.ResourceVersion || cm.Data["owner"] != "someone else" || len(cm.OwnerReferences) != 0 {
		t.Errorf("the foreign ConfigMap was written: %+v", cm)
	}
	var dep appsv1.Deployment
	if err := k8s.Get(f.ctx, f.key(proxyspec.Name("edge")), &dep); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment of a blocked Gateway: %v, want NotFound", err)
	}
}

// certURIs are the URI SANs of the first certificate of a PEM bundle.
func certURIs(t *testing.T, pemData []byte) []string {
	t.Helper()
	b, _ := pem.Decode(pemData)
	if b == nil {
		t.Fatal("no PEM certificate")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, u := range c.URIs {
		out = append(out, u.String())
	}
	return out
}
