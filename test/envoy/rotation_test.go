package envoy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/pki"
	"github.com/portico-dev/portico/internal/pki/certstore"
	"github.com/portico-dev/portico/internal/testenv"
	"github.com/portico-dev/portico/internal/testenv/dataplane"
)

// xdsCertMount is where the provisioned Envoy container mounts its xDS
// client certificate Secret (infra's xdsCertDir).
const xdsCertMount = "/etc/portico/xds"

// rotateClientCert renews the xDS client certificate of the running
// provisioned proxy the way a cluster does: a new certificate of the same
// Gateway identity from the controller's CA (what the leader writes into
// the Secret when it renews) lands in the Secret volume by the kubelet's
// atomic swap of ..data. Envoy must load it without a restart (file-based
// SDS watching the directory), and, once the controller closes the old
// connection at its maximum age, present it on the new one.
func rotateClientCert(t *testing.T, k8s client.Client, ctrl *testenv.Process, envoy *testenv.Envoy,
	ctr *dataplane.Container, dir string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var caSec corev1.Secret
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "portico-system", Name: certstore.CASecretName}, &caSec); err != nil {
		t.Fatal(err)
	}
	ca, err := pki.ParseCA(caSec.Data[certstore.CACertKey], caSec.Data[certstore.CAKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	var gw gwv1.Gateway
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "edge"}, &gw); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueClient(pki.Identity{Namespace: "apps", Name: "edge", UID: string(gw.UID)}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := pki.ParseCertificates(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	serial := leaf[0].SerialNumber.Text(16)

	vol := -1
	for i, v := range ctr.Process.Volumes {
		if v.MountPath == xdsCertMount {
			vol = i
		}
	}
	if vol < 0 {
		t.Fatalf("the container mounts nothing at %s", xdsCertMount)
	}
	swapVolume(t, filepath.Join(dir, fmt.Sprintf("vol%d", vol)), map[string][]byte{
		certstore.CertKey: certPEM, certstore.KeyKey: keyPEM,
	})

	eventually(t, 30*time.Second, "Envoy using the rotated client certificate "+serial, func() error {
		serials, err := envoyCertSerials(envoy)
		if err != nil {
			return err
		}
		if !serials[serial] {
			return fmt.Errorf("Envoy's certificates: %v", serials)
		}
		return nil
	})
	select {
	case <-envoy.Exited():
		t.Fatalf("Envoy exited: %v", envoy.ExitErr())
	default:
	}
	eventually(t, 30*time.Second, "the controller authenticating the rotated certificate", func() error {
		if !strings.Contains(ctrl.Output(), "serial="+serial) {
			return fmt.Errorf("no xDS stream authenticated with serial %s yet", serial)
		}
		return nil
	})
	eventually(t, 20*time.Second, "Envoy connected to xDS", func() error {
		stats, err := envoy.Stats(context.Background(), "control_plane.connected_state")
		if err != nil {
			return err
		}
		if stats["control_plane.connected_state"] != 1 {
			return fmt.Errorf("connected_state %d", stats["control_plane.connected_state"])
		}
		return nil
	})
}

// swapVolume replaces files of a Secret volume laid out like the
// kubelet's atomic writer (testenv.Container.Prepare): a new timestamped
// directory with every key (the others copied), then ..data renamed onto a
// link to it, the files keeping their owner and mode.
func swapVolume(t *testing.T, vol string, files map[string][]byte) {
	t.Helper()
	old, err := os.Readlink(filepath.Join(vol, "..data"))
	if err != nil {
		t.Fatal(err)
	}
	oldDir := filepath.Join(vol, old)
	entries, err := os.ReadDir(oldDir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(oldDir)
	if err != nil {
		t.Fatal(err)
	}
	next := filepath.Join(vol, "..2026_01_01_00_00_00.000000002")
	if err := os.Mkdir(next, st.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		src := filepath.Join(oldDir, e.Name())
		fi, err := os.Stat(src)
		if err != nil {
			t.Fatal(err)
		}
		data, ok := files[e.Name()]
		if !ok {
			if data, err = os.ReadFile(src); err != nil {
				t.Fatal(err)
			}
		}
		dst := filepath.Join(next, e.Name())
		if err := os.WriteFile(dst, data, 0o600); err != nil {
			t.Fatal(err)
		}
		uid, gid := fileOwner(fi)
		if err := os.Chown(dst, uid, gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dst, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	uid, gid := fileOwner(st)
	if err := os.Chown(next, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(next, st.Mode()&os.ModePerm|st.Mode()&os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(vol, "..data_tmp")
	if err := os.Symlink(filepath.Base(next), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(vol, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(oldDir); err != nil {
		t.Fatal(err)
	}
}

// envoyCertSerials are the serial numbers (lower-case hex, no leading
// zeros) of the certificates Envoy's admin /certs lists.
func envoyCertSerials(e *testenv.Envoy) (map[string]bool, error) {
	_, body, err := e.Admin(context.Background(), "/certs")
	if err != nil {
		return nil, err
	}
	var certs struct {
		Certificates []struct {
			CertChain []struct {
				SerialNumber string `json:"serial_number"`
			} `json:"cert_chain"`
		} `json:"certificates"`
	}
	if err := json.Unmarshal([]byte(body), &certs); err != nil {
		return nil, fmt.Errorf("/certs: %w", err)
	}
	out := map[string]bool{}
	for _, c := range certs.Certificates {
		for _, cc := range c.CertChain {
			out[strings.TrimLeft(strings.ToLower(cc.SerialNumber), "0")] = true
		}
	}
	return out, nil
}

// fileOwner is the owner and group of a file.
func fileOwner(fi os.FileInfo) (uid, gid int) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), int(st.Gid)
	}
	return 0, 0
}
