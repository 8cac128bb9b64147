// Package echoutil holds the small pieces the echo servers of this module
// share: environment parsing, TLS loading and reporting, and running a server
// until the process is told to stop.
package echoutil

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// Port returns the environment variable name as a port number, or def when
// it is unset or empty. A value that is not a port number is an error.
func Port(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	p, err := strconv.Atoi(v)
	if err != nil || p < 0 || p > 65535 {
		return 0, fmt.Errorf("%s=%q is not a port number", name, v)
	}
	return p, nil
}

// ServerTLSConfig loads a PEM certificate chain and private key into a TLS
// server configuration. Both paths empty means TLS is off: it returns nil and
// no error.
func ServerTLSConfig(certFile, keyFile string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading TLS key pair %s, %s: %w", certFile, keyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// CertPool reads a file of PEM certificates into a pool.
func CertPool(file string) (*x509.CertPool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("no PEM certificate found in %s", file)
	}
	return pool, nil
}

// TLSVersion names a TLS protocol version the way the HTTP and gRPC echo
// responses report it: "TLSv1.3", "TLSv1.2", "TLSv1.1" or "TLSv1.0"; other
// values give "".
func TLSVersion(v uint16) string {
	switch v {
	case tls.VersionTLS13:
		return "TLSv1.3"
	case tls.VersionTLS12:
		return "TLSv1.2"
	case tls.VersionTLS11:
		return "TLSv1.1"
	case tls.VersionTLS10:
		return "TLSv1.0"
	}
	return ""
}

// PEMCertificates encodes certificates as PEM "CERTIFICATE" blocks, one
// string per certificate, in the order given.
func PEMCertificates(certs []*x509.Certificate) []string {
	var out []string
	for _, c := range certs {
		out = append(out, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})))
	}
	return out
}

// Pod is the Pod context every server reports in its answers, from the
// environment the suite's manifests set: NAMESPACE, INGRESS_NAME,
// SERVICE_NAME and POD_NAME.
type Pod struct{ Namespace, Ingress, Service, Name string }

// PodFromEnv reads Pod from the environment.
func PodFromEnv() Pod {
	return Pod{Namespace: os.Getenv("NAMESPACE"), Ingress: os.Getenv("INGRESS_NAME"),
		Service: os.Getenv("SERVICE_NAME"), Name: os.Getenv("POD_NAME")}
}

// Main configures a server from the environment (fromEnv) and runs it
// (run) until SIGINT or SIGTERM: the whole of each server's Main.
func Main[C any](name string, fromEnv func() (C, error), run func(context.Context, C) error) {
	UntilSignal(name, func(ctx context.Context) error {
		cfg, err := fromEnv()
		if err != nil {
			return err
		}
		return run(ctx, cfg)
	})
}

// UntilSignal runs serve with a context that ends on SIGINT or SIGTERM and
// exits the process with status 1 if serve fails.
func UntilSignal(name string, serve func(context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		stop()
		os.Exit(1)
	}
}

// ShutdownGrace is how long servers let calls in progress finish once asked
// to stop, before closing their connections.
const ShutdownGrace = 5 * time.Second
