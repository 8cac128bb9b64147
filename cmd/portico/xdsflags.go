package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/portico-dev/portico/internal/controller"
	"github.com/portico-dev/portico/internal/pki/certstore"
	"github.com/portico-dev/portico/internal/xds/server"
)

// Default xDS listen addresses: an xDS server that authenticates its
// clients by certificate listens on every interface; one that does not
// (plaintext, or TLS without client certificates) on loopback only, since
// whoever reaches it may ask for any Gateway's configuration.
const (
	defaultXDSAddressMTLS     = ":18000"
	defaultXDSAddressLoopback = "127.0.0.1:18000"
)

// xdsFlags are the xDS server flags standalone and controller share.
type xdsFlags struct {
	address       *string
	unauthSecrets *bool
	maxAge        *time.Duration
	maxAgeGrace   *time.Duration
	certValidity  *time.Duration // controller only
}

func addXDSFlags(fs *flag.FlagSet) *xdsFlags {
	return &xdsFlags{
		address: fs.String("xds-address", "", "`address` of the xDS gRPC server (default "+defaultXDSAddressMTLS+
			" with mutual TLS, else "+defaultXDSAddressLoopback+": loopback only)"),
		unauthSecrets: fs.Bool("xds-unauthenticated-secrets", false, "serve TLS private keys (SDS Secrets) to xDS clients "+
			"that present no client certificate (plaintext, or TLS without a client CA); without it they are withheld "+
			"and HTTPS listeners do not serve. Only on a trusted network (e.g. loopback)"),
		maxAge: fs.Duration("xds-max-connection-age", server.DefaultMaxConnectionAge, "close xDS connections "+
			"after this long (±10%), so proxies reconnect and authenticate with their current certificate; 0: never"),
		maxAgeGrace: fs.Duration("xds-max-connection-age-grace", server.DefaultMaxConnectionAgeGrace,
			"how long a connection past its maximum age is kept before it is closed"),
	}
}

// listenAddress is --xds-address, or the default for the mode.
func (f *xdsFlags) listenAddress(mtls bool) string {
	switch {
	case *f.address != "":
		return *f.address
	case mtls:
		return defaultXDSAddressMTLS
	}
	return defaultXDSAddressLoopback
}

// check validates the flags.
func (f *xdsFlags) check() error {
	if *f.maxAge < 0 || *f.maxAgeGrace < 0 {
		return errors.New("--xds-max-connection-age and --xds-max-connection-age-grace must not be negative")
	}
	if f.certValidity != nil && *f.certValidity < certstore.MinClientValidity {
		return fmt.Errorf("--xds-client-cert-validity %v is shorter than %v", *f.certValidity, certstore.MinClientValidity)
	}
	return nil
}

// connectionAge is the server's MaxConnectionAge of --xds-max-connection-age
// (0: no limit, which the Server spells negative).
func (f *xdsFlags) connectionAge() (age, grace time.Duration) {
	age = *f.maxAge
	if age == 0 {
		age = -1
	}
	return age, *f.maxAgeGrace
}

// apply sets the flags' settings on srv.
func (f *xdsFlags) apply(srv *server.Server) {
	srv.UnauthenticatedSecrets = *f.unauthSecrets
	srv.MaxConnectionAge, srv.MaxConnectionAgeGrace = f.connectionAge()
}

// standaloneTLSFlags are standalone's TLS files of the xDS server.
type standaloneTLSFlags struct {
	cert, key, clientCA *string
}

func addStandaloneTLSFlags(fs *flag.FlagSet) *standaloneTLSFlags {
	return &standaloneTLSFlags{
		cert: fs.String("xds-tls-cert", "", "PEM `file` of the xDS serving certificate (chain): serve xDS over TLS (with --xds-tls-key); "+
			"re-read when it changes"),
		key: fs.String("xds-tls-key", "", "PEM `file` of the xDS serving certificate's private key"),
		clientCA: fs.String("xds-client-ca", "", "PEM `file` of the CAs of proxies' client certificates: mutual TLS, and a proxy gets only "+
			"the Gateway its certificate names (URI SAN spiffe://portico.dev/ns/NS/gateway/NAME, see `portico certs`)"),
	}
}

// configure sets srv's transport security from the TLS flags and the
// shared xDS flags.
func (t *standaloneTLSFlags) configure(srv *server.Server, xf *xdsFlags, log *slog.Logger) error {
	if err := xf.check(); err != nil {
		return err
	}
	xf.apply(srv)
	switch {
	case *t.cert == "" && *t.key == "" && *t.clientCA == "":
		return nil
	case *t.cert == "" || *t.key == "":
		return errors.New("--xds-tls-cert and --xds-tls-key go together (--xds-client-ca needs them)")
	}
	src, err := server.NewFileSource(*t.cert, *t.key, *t.clientCA, log.With("component", "xds-tls"))
	if err != nil {
		return err
	}
	srv.TLS = server.ServerTLSConfig(src, *t.clientCA != "")
	return nil
}

// addClientCertValidity adds the controller's --xds-client-cert-validity.
func (f *xdsFlags) addClientCertValidity(fs *flag.FlagSet) {
	f.certValidity = fs.Duration("xds-client-cert-validity", certstore.DefaultClientValidity, "validity of the proxies' xDS "+
		"client certificates; the leader renews them two thirds into it (at least "+certstore.MinClientValidity.String()+")")
}

// security is the controller's xDS security settings of the flags.
func (f *xdsFlags) security() controller.XDSSecurity {
	age, grace := f.connectionAge()
	s := controller.XDSSecurity{MaxConnectionAge: age, MaxConnectionAgeGrace: grace, UnauthenticatedSecrets: *f.unauthSecrets}
	if f.certValidity != nil {
		s.ClientCertValidity = *f.certValidity
	}
	return s
}
