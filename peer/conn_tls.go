package peer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc/credentials"
)

// verifiedTLS is a peer connection's transport credentials: each
// handshake verifies the peer with the CA bundle its connection holds
// then (peerConn.roots), and records the chain the peer presented, or
// that its certificate was refused (conn.go).
type verifiedTLS struct {
	base *tls.Config // the pool's, ServerName set; RootCAs replaced per handshake
	pc   *peerConn
}

var _ credentials.TransportCredentials = (*verifiedTLS)(nil)

func (v *verifiedTLS) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	cfg := v.base.Clone()
	used := v.pc.bundle()
	if used != nil {
		cfg.RootCAs = used
	}
	conn, info, err := credentials.NewTLS(cfg).ClientHandshake(ctx, authority, raw)
	if err != nil {
		v.pc.handshook(nil, used, err)
		return nil, nil, err
	}
	var chain []*x509.Certificate
	if ti, ok := info.(credentials.TLSInfo); ok {
		chain = ti.State.PeerCertificates
	}
	if err := v.pc.handshook(chain, used, nil); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, info, nil
}

func (v *verifiedTLS) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("peer: a requester's credentials do not serve")
}

func (v *verifiedTLS) Info() credentials.ProtocolInfo { return credentials.NewTLS(v.base).Info() }

func (v *verifiedTLS) Clone() credentials.TransportCredentials {
	return &verifiedTLS{base: v.base.Clone(), pc: v.pc}
}

// OverrideServerName is deprecated in gRPC; it sets the name checked.
func (v *verifiedTLS) OverrideServerName(name string) error {
	v.base = v.base.Clone()
	v.base.ServerName = name
	return nil
}

// handshook records a handshake of pc verified with the bundle used,
// which presented chain, or failed with err. A chain verified with a
// bundle a reload has replaced meanwhile is checked with the new one:
// the error says why it is not trusted now.
func (pc *peerConn) handshook(chain []*x509.Certificate, used *x509.CertPool, err error) error {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if err != nil {
		pc.refused = nil
		if cve, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
			pc.refused = cve.Err
		}
		return nil
	}
	pc.refused = nil
	if pc.roots != used && chain != nil {
		if err := verifyChain(chain, pc.roots); err != nil {
			pc.refused = err
			return fmt.Errorf("peer certificate: the CA bundle reloaded during the handshake does not verify it: %w", err)
		}
	}
	pc.chain = chain
	return nil
}

// verifyChain verifies a peer's chain, leaf first, with roots (a peer's
// certificate is for serving).
func verifyChain(chain []*x509.Certificate, roots *x509.CertPool) error {
	return verifyChainAt(chain, roots, time.Time{})
}

// verifyChainAt is verifyChain as of the time at (zero: now).
func verifyChainAt(chain []*x509.Certificate, roots *x509.CertPool, at time.Time) error {
	if len(chain) == 0 {
		return errors.New("no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		CurrentTime: at})
	return err
}
