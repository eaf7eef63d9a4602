package peer

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// reviewCert is a certificate for key-pair use in TLS, signed by ca
// (nil: self-signed), valid for 127.0.0.1 and both EKUs unless mod
// changes the template.
func reviewCert(t *testing.T, ca *CA, mod func(*x509.Certificate)) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "review"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	if mod != nil {
		mod(tmpl)
	}
	parent, signer := tmpl, any(key)
	if ca != nil {
		parent, signer = ca.Cert, ca.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestTLSRefusesBadCertificates: a peer serves only clients whose
// certificate its CA signed, now valid, for client authentication, over
// TLS 1.3; a requester talks only to peers whose certificate its CA
// signed, now valid, for server authentication, naming the address.
func TestTLSRefusesBadCertificates(t *testing.T) {
	f := newFixture(t)
	tk := f.ticket("tls")
	ca := f.ca.ca
	_, addr := f.server(nil)
	client := func(cert tls.Certificate, mod func(*tls.Config)) grpc.DialOption {
		c := &tls.Config{RootCAs: caPool(t, f), MinVersion: tls.VersionTLS12,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }}
		if mod != nil {
			mod(c)
		}
		return grpc.WithTransportCredentials(credentials.NewTLS(c))
	}
	good := reviewCert(t, ca, nil)
	if err := callOnce(t, addr, client(good, nil), tk); err != nil {
		t.Fatalf("a good client certificate: %v", err)
	}
	for _, c := range []struct {
		name string
		dial grpc.DialOption
	}{
		{"expired", client(reviewCert(t, ca, func(c *x509.Certificate) {
			c.NotBefore, c.NotAfter = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
		}), nil)},
		{"not yet valid", client(reviewCert(t, ca, func(c *x509.Certificate) {
			c.NotBefore, c.NotAfter = time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)
		}), nil)},
		{"server-only EKU as a client", client(reviewCert(t, ca, func(c *x509.Certificate) {
			c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		}), nil)},
		{"self-signed", client(reviewCert(t, nil, nil), nil)},
		{"TLS 1.2", client(good, func(c *tls.Config) { c.MaxVersion = tls.VersionTLS12 })},
	} {
		t.Run("client "+c.name, func(t *testing.T) {
			if err := callOnce(t, addr, c.dial, tk); err == nil {
				t.Fatal("served")
			}
		})
	}
	requester, err := f.ca.issue("gpu-host").ClientTLS("")
	if err != nil {
		t.Fatal(err)
	}
	serve := func(cert tls.Certificate) string {
		sc, err := f.ca.issue("peer").ServerTLS()
		if err != nil {
			t.Fatal(err)
		}
		sc.Certificates = []tls.Certificate{cert}
		sc.GetConfigForClient = nil // present cert, not the files' certificate
		s := NewServer(ServerConfig{Roots: f.roots, TLS: sc, MaxInFlight: 4})
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go s.Serve(l)
		t.Cleanup(s.Stop)
		return l.Addr().String()
	}
	asRequester := grpc.WithTransportCredentials(credentials.NewTLS(requester))
	if err := callOnce(t, serve(good), asRequester, tk); err != nil {
		t.Fatalf("a good server certificate: %v", err)
	}
	for _, c := range []struct {
		name string
		cert tls.Certificate
	}{
		{"client-only EKU as a server", reviewCert(t, ca, func(c *x509.Certificate) {
			c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		})},
		{"another address", reviewCert(t, ca, func(c *x509.Certificate) { c.IPAddresses = []net.IP{net.ParseIP("10.9.9.9")} })},
		{"expired", reviewCert(t, ca, func(c *x509.Certificate) {
			c.NotBefore, c.NotAfter = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
		})},
		{"self-signed", reviewCert(t, nil, nil)},
	} {
		t.Run("server "+c.name, func(t *testing.T) {
			if err := callOnce(t, serve(c.cert), asRequester, tk); err == nil {
				t.Fatal("the requester accepted the peer")
			}
		})
	}
}
