package proxyspec

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Two Gateway names map to one provisioned name: a long one, shortened
// with a hash, and a short one equal to the result.
func TestNameCollides(t *testing.T) {
	long := "payments-production-gateway-eu-west-1-primary-" + strings.Repeat("x", 14)
	short := strings.TrimPrefix(Name(long), namePrefix)
	if short == long || Name(short) != Name(long) || len(Name(long)) > 63 {
		t.Fatalf("Name(%q) = %q, Name(%q) = %q", long, Name(long), short, Name(short))
	}
}

func TestCheckOwner(t *testing.T) {
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "edge", UID: "uid-edge"}}
	ref := func(apiVersion, kind, name, uid string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid), Controller: ptr.To(controller)}
	}
	gwRef := func(name, uid string) metav1.OwnerReference {
		return ref(gwv1.GroupVersion.String(), "Gateway", name, uid, true)
	}
	cases := []struct {
		name   string
		owners []metav1.OwnerReference
		holder string // "" means the object is the Gateway's
		msg    string
	}{
		{"this Gateway", []metav1.OwnerReference{gwRef("edge", "uid-edge")}, "", ""},
		{"a predecessor of the same name", []metav1.OwnerReference{gwRef("edge", "uid-old")}, "", ""},
		{"another Gateway", []metav1.OwnerReference{gwRef("edge-2", "uid-2")}, "edge-2", "belongs to Gateway apps/edge-2"},
		{"this Gateway, not as controller", []metav1.OwnerReference{func() metav1.OwnerReference {
			r := gwRef("edge", "uid-edge")
			r.Controller = ptr.To(false)
			return r
		}()}, "-", "no controller owner reference"},
		{"a Gateway of another group", []metav1.OwnerReference{ref("example.com/v1", "Gateway", "edge", "x", true)}, "-", "controlled by Gateway apps/edge"},
		{"no owner", nil, "-", "no controller owner reference"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: Name("edge"), OwnerReferences: tc.owners}}
			err := CheckOwner(obj, "ConfigMap", gw)
			if tc.holder == "" {
				if err != nil {
					t.Fatalf("CheckOwner: %v, want nil", err)
				}
				return
			}
			var c *ConflictError
			if !errors.As(err, &c) {
				t.Fatalf("CheckOwner: %v, want a *ConflictError", err)
			}
			if want := strings.TrimPrefix(tc.holder, "-"); c.HolderGateway() != want {
				t.Errorf("holder Gateway %q, want %q", c.HolderGateway(), want)
			}
			if !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), "ConfigMap apps/portico-edge") {
				t.Errorf("message %q lacks %q or the object", err, tc.msg)
			}
		})
	}
}

func TestNameIsAValidServiceName(t *testing.T) {
	long := strings.Repeat("g", 80)
	if n := Name(long); len(n) > 63 || Name(long) != n || Name(long+"x") == n {
		t.Errorf("Name(long) = %q", n)
	}
	if Name("edge") != "portico-edge" {
		t.Errorf("Name(edge) = %q", Name("edge"))
	}
	if ClientCertSecretName("edge") != "portico-edge-xds" {
		t.Errorf("ClientCertSecretName(edge) = %q", ClientCertSecretName("edge"))
	}
}

// A removed Gateway deletes what a Gateway of its name controls, whatever
// the UID, and nothing else.
func TestControlledByName(t *testing.T) {
	owned := func(refs ...metav1.OwnerReference) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: Name("edge"), OwnerReferences: refs}}
	}
	gwRef := metav1.OwnerReference{APIVersion: gwv1.GroupVersion.String(), Kind: "Gateway", Name: "edge", UID: "any", Controller: ptr.To(true)}
	other := gwRef
	other.Name = "edge-2"
	notController := gwRef
	notController.Controller = ptr.To(false)
	foreign := gwRef
	foreign.APIVersion = "example.com/v1"
	for name, tc := range map[string]struct {
		obj  *corev1.ConfigMap
		want bool
	}{
		"a Gateway of the name":      {owned(gwRef), true},
		"another Gateway":            {owned(other), false},
		"not as controller":          {owned(notController), false},
		"a Gateway of another group": {owned(foreign), false},
		"no owner":                   {owned(), false},
	} {
		if got := ControlledByName(tc.obj, "edge"); got != tc.want {
			t.Errorf("%s: ControlledByName = %v, want %v", name, got, tc.want)
		}
	}
}
