// Command portico-cluster is the helper of hack/cluster-up.sh: it generates
// the local cluster's PKI and kubeconfig, picks free loopback ports and talks
// to the kube-apiserver (readiness, fake Nodes) without kubectl. It uses only
// the standard library, so it builds in a second from a cold module cache.
//
// Usage:
//
//	portico-cluster ports N                 print N free loopback TCP ports
//	portico-cluster pki DIR URL             write DIR/pki/* and DIR/kubeconfig for the apiserver at URL
//	portico-cluster readyz DIR              exit 0 when the apiserver's /readyz is ok
//	portico-cluster exists DIR PATH         exit 0 when GET PATH returns 200
//	portico-cluster node DIR NAME           create the fake Node NAME (kwok-managed) unless it exists
//	portico-cluster node-ready DIR NAME     exit 0 when Node NAME has Ready=True
//	portico-cluster logs-crd DIR            create the kwok Logs CRD (kwok --enable-crds=Logs) unless it exists
//
// Commands that talk to the apiserver read DIR/apiserver.url and the admin
// client certificate from DIR/pki. Exit status 1 means "not (yet)"; 2 is a
// usage or setup error.
package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	args := os.Args[2:]
	var err error
	switch os.Args[1] {
	case "ports":
		need(args, 1)
		err = ports(args[0])
	case "pki":
		need(args, 2)
		err = writePKI(args[0], args[1], time.Now())
	case "readyz":
		need(args, 1)
		err = readyz(args[0])
	case "exists":
		need(args, 2)
		err = exists(args[0], args[1])
	case "node":
		need(args, 2)
		err = createNode(args[0], args[1])
	case "node-ready":
		need(args, 2)
		err = nodeReady(args[0], args[1])
	case "logs-crd":
		need(args, 1)
		err = createLogsCRD(args[0])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "portico-cluster %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: portico-cluster ports N | pki DIR URL | readyz DIR | exists DIR PATH | node DIR NAME | node-ready DIR NAME | logs-crd DIR")
	os.Exit(2)
}

func need(args []string, n int) {
	if len(args) != n {
		usage()
	}
}

// ports prints n distinct free TCP ports on 127.0.0.1. All listeners stay
// open until every port is chosen, so the ports differ from each other; a
// port can still be taken by someone else before its user binds it.
func ports(arg string) error {
	n, err := strconv.Atoi(arg)
	if err != nil || n < 1 {
		return fmt.Errorf("bad count %q", arg)
	}
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer l.Close()
		out = append(out, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	}
	fmt.Println(strings.Join(out, " "))
	return nil
}

// keyPair is a certificate with its private key.
type keyPair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	der  []byte
}

func newKeyPair(tmpl *x509.Certificate, parent *keyPair) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	signer, signerCert := key, tmpl
	if parent != nil {
		signer, signerCert = parent.key, parent.cert
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, &key.PublicKey, signer)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key, der: der}, nil
}

func (k *keyPair) certPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: k.der})
}

func (k *keyPair) keyPEM() ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(k.key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// writePKI creates the cluster CA, the apiserver's serving certificate, the
// service-account signing key pair and a cluster-admin client certificate
// (group system:masters), the aggregation layer's front-proxy CA and client
// certificate, and a kubeconfig embedding the admin's.
func writePKI(dir, server string, now time.Time) error {
	u, err := url.Parse(server)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("bad apiserver URL %q", server)
	}
	pkiDir := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pkiDir, 0o700); err != nil {
		return err
	}
	notBefore, notAfter := now.Add(-time.Hour), now.Add(365*24*time.Hour)
	ca, err := newKeyPair(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "portico-local-cluster-ca"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}, nil)
	if err != nil {
		return err
	}
	serving, err := newKeyPair(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:   notBefore,
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		// 10.96.0.1 is the "kubernetes" Service of --service-cluster-ip-range.
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
	}, ca)
	if err != nil {
		return err
	}
	admin, err := newKeyPair(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "portico-admin", Organization: []string{"system:masters"}},
		NotBefore:   notBefore,
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca)
	if err != nil {
		return err
	}
	// The aggregation layer's: the apiserver proxies to extension API
	// servers (a test's metrics.k8s.io) as front-proxy-client, which they
	// trust through front-proxy-ca.
	frontCA, err := newKeyPair(&x509.Certificate{
		Subject:               pkix.Name{CommonName: "portico-local-front-proxy-ca"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}, nil)
	if err != nil {
		return err
	}
	frontClient, err := newKeyPair(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "front-proxy-client"},
		NotBefore:   notBefore,
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, frontCA)
	if err != nil {
		return err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	saDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}

	files := map[string][]byte{
		"ca.crt":                 ca.certPEM(),
		"apiserver.crt":          serving.certPEM(),
		"admin.crt":              admin.certPEM(),
		"front-proxy-ca.crt":     frontCA.certPEM(),
		"front-proxy-client.crt": frontClient.certPEM(),
		"sa.key":                 pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saDER}),
		"sa.pub":                 pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}),
	}
	for name, kp := range map[string]*keyPair{"ca.key": ca, "apiserver.key": serving, "admin.key": admin, "front-proxy-client.key": frontClient} {
		if files[name], err = kp.keyPEM(); err != nil {
			return err
		}
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(pkiDir, name), data, 0o600); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "apiserver.url"), []byte(server+"\n"), 0o644); err != nil {
		return err
	}
	enc := base64.StdEncoding.EncodeToString
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: portico-local
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: portico-admin
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: portico-local
  context:
    cluster: portico-local
    user: portico-admin
current-context: portico-local
`, server, enc(files["ca.crt"]), enc(files["admin.crt"]), enc(files["admin.key"]))
	return os.WriteFile(filepath.Join(dir, "kubeconfig"), []byte(kubeconfig), 0o600)
}

// api is a minimal client of the apiserver with the admin certificate.
type api struct {
	base string
	http *http.Client
}

func newAPI(dir string) (*api, error) {
	server, err := os.ReadFile(filepath.Join(dir, "apiserver.url"))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "pki", "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no CA certificate in pki/ca.crt")
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "pki", "admin.crt"), filepath.Join(dir, "pki", "admin.key"))
	if err != nil {
		return nil, err
	}
	return &api{
		base: strings.TrimSpace(string(server)),
		http: &http.Client{
			Timeout: 5 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{
				RootCAs:      pool,
				Certificates: []tls.Certificate{cert},
				MinVersion:   tls.VersionTLS12,
			}},
		},
	}, nil
}

func (a *api) do(method, path string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, data, err
}

func readyz(dir string) error {
	a, err := newAPI(dir)
	if err != nil {
		return err
	}
	code, body, err := a.do(http.MethodGet, "/readyz", nil)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("/readyz: %d %s", code, strings.TrimSpace(string(body)))
	}
	return nil
}

func exists(dir, path string) error {
	a, err := newAPI(dir)
	if err != nil {
		return err
	}
	code, _, err := a.do(http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("GET %s: %d", path, code)
	}
	return nil
}

// createNode registers a Node that kwok (started with
// --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake) manages.
// It has no taints, so ordinary workloads schedule onto it.
func createNode(dir, name string) error {
	a, err := newAPI(dir)
	if err != nil {
		return err
	}
	node := map[string]any{
		"apiVersion": "v1",
		"kind":       "Node",
		"metadata": map[string]any{
			"name": name,
			"annotations": map[string]string{
				"kwok.x-k8s.io/node":           "fake",
				"node.alpha.kubernetes.io/ttl": "0",
			},
			"labels": map[string]string{
				"type":                   "kwok",
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		},
	}
	body, err := json.Marshal(node)
	if err != nil {
		return err
	}
	code, resp, err := a.do(http.MethodPost, "/api/v1/nodes", body)
	if err != nil {
		return err
	}
	if code != http.StatusCreated && code != http.StatusConflict {
		return fmt.Errorf("creating node %s: %d %s", name, code, strings.TrimSpace(string(resp)))
	}
	return nil
}

func nodeReady(dir, name string) error {
	a, err := newAPI(dir)
	if err != nil {
		return err
	}
	code, body, err := a.do(http.MethodGet, "/api/v1/nodes/"+url.PathEscape(name), nil)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("node %s: %d", name, code)
	}
	var node struct {
		Status struct {
			Conditions []struct{ Type, Status string }
		}
	}
	if err := json.Unmarshal(body, &node); err != nil {
		return err
	}
	for _, c := range node.Status.Conditions {
		if c.Type == "Ready" {
			if c.Status == "True" {
				return nil
			}
			return fmt.Errorf("node %s: Ready=%s", name, c.Status)
		}
	}
	return fmt.Errorf("node %s: no Ready condition yet", name)
}

// createLogsCRD registers kwok's Logs resource (kwok.x-k8s.io/v1alpha1,
// namespaced): with --enable-crds=Logs kwok's kubelet server answers a
// Pod's log request from the file its Logs object names, which is how
// the local data plane (internal/testenv/dataplane) serves its
// containers' logs through the API server. The schema keeps what kwok
// reads (spec.logs[].containers, logsFile, previousLogsFile, follow).
func createLogsCRD(dir string) error {
	a, err := newAPI(dir)
	if err != nil {
		return err
	}
	str := map[string]any{"type": "string"}
	logEntry := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"containers":       map[string]any{"type": "array", "items": str},
			"logsFile":         str,
			"previousLogsFile": str,
			"follow":           map[string]any{"type": "boolean"},
		},
	}
	crd := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "logs.kwok.x-k8s.io"},
		"spec": map[string]any{
			"group": "kwok.x-k8s.io",
			"names": map[string]any{"kind": "Logs", "listKind": "LogsList", "plural": "logs", "singular": "logs"},
			"scope": "Namespaced",
			"versions": []any{map[string]any{
				"name": "v1alpha1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"spec": map[string]any{
							"type":       "object",
							"required":   []any{"logs"},
							"properties": map[string]any{"logs": map[string]any{"type": "array", "items": logEntry}},
						},
						"status": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
					},
				}},
			}},
		},
	}
	body, err := json.Marshal(crd)
	if err != nil {
		return err
	}
	code, resp, err := a.do(http.MethodPost, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body)
	if err != nil {
		return err
	}
	if code != http.StatusCreated && code != http.StatusConflict {
		return fmt.Errorf("creating the Logs CRD: %d %s", code, strings.TrimSpace(string(resp)))
	}
	return nil
}
