package faultproxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"strings"
	"time"
)

// Request classes (Record.Class).
const (
	ClassWatch       = "watch"
	ClassList        = "list"
	ClassGet         = "get"
	ClassCreate      = "create"
	ClassUpdate      = "update"
	ClassPatch       = "patch"
	ClassApply       = "apply" // server-side apply
	ClassDelete      = "delete"
	ClassStatusWrite = "status-write"
	ClassLeaseRead   = "lease-read"
	ClassLeaseWrite  = "lease-write"
	ClassOther       = "other" // discovery, /readyz, …
)

// Record is one request that reached the proxy.
type Record struct {
	Method, Path, Query string
	UserAgent           string
	Class               string
	// Parsed from the path of a resource request.
	Group, Resource, Subresource, Namespace, Name string
	// Start is when the request arrived; Forwarded when it was sent to the
	// server (zero: never); End when the proxy finished it (zero: still in
	// flight).
	Start, Forwarded, End time.Time
	// Code is the status sent to the client; 0 if none (reset, or the
	// client went away first).
	Code int
	// Fault is the action applied ("partition" for a partition), "" if none.
	Fault string
	// Err is the upstream error, if any.
	Err string
}

// Write reports whether the request changes something.
func (r *Record) Write() bool {
	return r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions
}

// OK reports a 2xx answer.
func (r *Record) OK() bool { return r.Code >= 200 && r.Code < 300 }

// InFlight reports whether the proxy is still handling the request.
func (r *Record) InFlight() bool { return r.End.IsZero() }

func newRecord(r *http.Request) *Record {
	rec := &Record{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, UserAgent: r.UserAgent(), Start: time.Now()}
	parsePath(rec)
	rec.Class = classify(rec, r)
	return rec
}

// parsePath splits /api/v1/namespaces/NS/RES/NAME/SUB and
// /apis/GROUP/VERSION/... paths.
func parsePath(rec *Record) {
	parts := strings.Split(strings.Trim(rec.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		rec.Group = parts[1]
		parts = parts[3:]
	default:
		return
	}
	if len(parts) > 0 && parts[0] == "watch" {
		parts = parts[1:]
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		rec.Namespace = parts[1]
		parts = parts[2:]
	}
	if len(parts) > 0 {
		rec.Resource = parts[0]
	}
	if len(parts) > 1 {
		rec.Name = parts[1]
	}
	if len(parts) > 2 {
		rec.Subresource = parts[2]
	}
}

func classify(rec *Record, r *http.Request) string {
	if rec.Resource == "" {
		return ClassOther
	}
	q := r.URL.Query()
	if r.Method == http.MethodGet && (q.Get("watch") == "true" || q.Get("watch") == "1" || strings.Contains(rec.Path, "/watch/")) {
		return ClassWatch
	}
	if rec.Resource == "leases" && rec.Group == "coordination.k8s.io" {
		if r.Method == http.MethodGet {
			return ClassLeaseRead
		}
		return ClassLeaseWrite
	}
	if rec.Subresource == "status" && (r.Method == http.MethodPut || r.Method == http.MethodPatch) {
		return ClassStatusWrite
	}
	switch r.Method {
	case http.MethodGet:
		if rec.Name == "" {
			return ClassList
		}
		return ClassGet
	case http.MethodPost:
		return ClassCreate
	case http.MethodPut:
		return ClassUpdate
	case http.MethodPatch:
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/apply-patch") {
			return ClassApply
		}
		return ClassPatch
	case http.MethodDelete:
		return ClassDelete
	}
	return ClassOther
}

// Records returns copies of the recorded requests that match (all if
// match is nil), in arrival order.
func (p *Proxy) Records(match func(*Record) bool) []Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Record
	for _, r := range p.records {
		if match == nil || match(r) {
			out = append(out, *r)
		}
	}
	return out
}

// Count is the number of recorded requests that match.
func (p *Proxy) Count(match func(*Record) bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.records {
		if match == nil || match(r) {
			n++
		}
	}
	return n
}

// Counts is the number of requests per class.
func (p *Proxy) Counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for _, r := range p.records {
		out[r.Class]++
	}
	return out
}

// SelfSigned returns a fresh CA (PEM) and a serving certificate it signed
// for 127.0.0.1 and localhost, for a proxy's clients to trust.
func SelfSigned() (tls.Certificate, []byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "faultproxy-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "faultproxy"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}

func discardLogger() *log.Logger { return log.New(io.Discard, "", 0) }
