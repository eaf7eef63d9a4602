package peer

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
)

// TLSFiles names a CA bundle, a certificate and its key, in PEM.
type TLSFiles struct {
	CA   string `yaml:"ca"`
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// loaded is what TLSFiles held when they were read.
type loaded struct {
	pool  *x509.CertPool
	caPEM []byte // the CA bundle as read: a reload of the same keeps pool
	cert  tls.Certificate
	// caEnd is the earliest end of the CA bundle's certificates (zero:
	// none parsed): after it, peers signed by that CA are refused.
	caEnd time.Time
}

// bundleEnd is the earliest NotAfter of the PEM certificates in pem.
func bundleEnd(data []byte) time.Time {
	var end time.Time
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return end
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil && (end.IsZero() || c.NotAfter.Before(end)) {
			end = c.NotAfter
		}
	}
}

func (f TLSFiles) load() (*loaded, error) {
	if f.CA == "" || f.Cert == "" || f.Key == "" {
		return nil, errors.New("tls needs ca, cert and key (PEM files; see docs/peers.md for making them)")
	}
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("tls ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("tls ca %s: no PEM certificate in it", f.CA)
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("tls cert %s, key %s: %w", f.Cert, f.Key, err)
	}
	return &loaded{pool: pool, caPEM: caPEM, cert: cert, caEnd: bundleEnd(caPEM)}, nil
}

// Creds are TLS files loaded for a long-running daemon, read again by
// Reload: a certificate renewed in place (the same paths, new contents)
// is presented from the next handshake on, and a CA bundle replaced in
// place verifies the other side from then on, without a restart.
//
// A peer's configs (ServerTLS) take the certificate, its key and the CA
// bundle from the last load at each handshake. A requester's
// (ClientTLS) take the certificate and key so; its CA bundle is the one
// loaded when the config was made, since gRPC copies a client's config
// when it dials and a client's tls.Config offers no hook to choose the
// roots per handshake (verifying by hand, with InsecureSkipVerify and a
// VerifyConnection, would put the check of every peer's identity in our
// code). A Pool given Roots (PoolConfig.Roots) therefore chooses the
// bundle per handshake in its own transport credentials, and at a
// reload (Pool.CredsReloaded) closes the connections whose peer the new
// bundle does not verify (conn.go).
type Creds struct {
	files TLSFiles
	cur   atomic.Pointer[loaded]
}

// Open loads f.
func (f TLSFiles) Open() (*Creds, error) {
	l, err := f.load()
	if err != nil {
		return nil, err
	}
	c := &Creds{files: f}
	c.cur.Store(l)
	return c, nil
}

// Reload reads the files again. On an error the last good load stays in
// use, and the error says why the files were not taken.
//
// A certificate that is not valid now (it has ended, or starts later) is
// refused too, while the one in use is: taken, every handshake after it
// would fail.
func (c *Creds) Reload() error {
	l, err := c.files.load()
	if err != nil {
		return err
	}
	if leaf, err := x509.ParseCertificate(l.cert.Certificate[0]); err == nil {
		now := time.Now()
		if cur := c.NotAfter(); (now.After(leaf.NotAfter) || now.Before(leaf.NotBefore)) && now.Before(cur) {
			return fmt.Errorf("tls cert %s is valid from %v to %v, not now; the one in use is, until %v",
				c.files.Cert, leaf.NotBefore, leaf.NotAfter, cur)
		}
	}
	if cur := c.cur.Load(); bytes.Equal(l.caPEM, cur.caPEM) {
		l.pool = cur.pool // the same bundle: Roots' callers keep their connections
	}
	c.cur.Store(l)
	return nil
}

// Roots is the CA bundle as last loaded, which a requester verifies
// peers with (PoolConfig.Roots). It is the same *x509.CertPool until a
// reload reads a bundle of other contents.
func (c *Creds) Roots() *x509.CertPool { return c.cur.Load().pool }

// NotAfter is the end of the current certificate's validity.
func (c *Creds) NotAfter() time.Time {
	l := c.cur.Load()
	if l.cert.Leaf != nil {
		return l.cert.Leaf.NotAfter
	}
	if len(l.cert.Certificate) == 0 {
		return time.Time{}
	}
	leaf, err := x509.ParseCertificate(l.cert.Certificate[0])
	if err != nil {
		return time.Time{}
	}
	return leaf.NotAfter
}

// CANotAfter is the earliest end of the CA certificates the other side
// is verified against, as last loaded; zero if none was parsed. A
// certificate renewed in place may outlive the CA that signed it, and
// the CA's end then fails every handshake first.
func (c *Creds) CANotAfter() time.Time { return c.cur.Load().caEnd }

// ServerTLS is a peer's mutual TLS: it presents its certificate and
// accepts only clients whose certificate the CA signed, both as last
// loaded.
func (c *Creds) ServerTLS() *tls.Config {
	now := func() *tls.Config {
		l := c.cur.Load()
		return &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{l.cert},
			ClientCAs:    l.pool,
			ClientAuth:   tls.RequireAndVerifyClientCert,
		}
	}
	cfg := now()
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) { return now(), nil }
	return cfg
}

// ClientTLS is a requester's mutual TLS: it presents its certificate as
// last loaded at each handshake, and accepts only peers whose
// certificate a CA of the bundle as loaded now signed (a Pool replaces
// the bundle as reloaded: PoolConfig.Roots, Creds.Roots). serverName,
// if not empty, is the name peers' certificates must carry; otherwise
// each peer's host name is checked.
func (c *Creds) ClientTLS(serverName string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		RootCAs:    c.Roots(),
		ServerName: serverName,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			l := c.cur.Load()
			return &l.cert, nil
		},
	}
}

// ServerTLS is Open's ServerTLS, for a process that never reloads.
func (f TLSFiles) ServerTLS() (*tls.Config, error) {
	c, err := f.Open()
	if err != nil {
		return nil, err
	}
	return c.ServerTLS(), nil
}

// ClientTLS is Open's ClientTLS, for a process that never reloads.
func (f TLSFiles) ClientTLS(serverName string) (*tls.Config, error) {
	c, err := f.Open()
	if err != nil {
		return nil, err
	}
	return c.ClientTLS(serverName), nil
}
