package peer

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// TLSFiles names a CA bundle, a certificate and its key, in PEM.
type TLSFiles struct {
	CA   string `yaml:"ca"`
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

func (f TLSFiles) load() (*x509.CertPool, tls.Certificate, error) {
	if f.CA == "" || f.Cert == "" || f.Key == "" {
		return nil, tls.Certificate{}, errors.New("tls needs ca, cert and key (PEM files; see docs/peers.md for making them)")
	}
	pem, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("tls ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, tls.Certificate{}, fmt.Errorf("tls ca %s: no PEM certificate in it", f.CA)
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("tls cert %s, key %s: %w", f.Cert, f.Key, err)
	}
	return pool, cert, nil
}

// ServerTLS is a peer's mutual TLS: it presents its certificate and
// accepts only clients whose certificate the CA signed.
func (f TLSFiles) ServerTLS() (*tls.Config, error) {
	pool, cert, err := f.load()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}, nil
}

// ClientTLS is a requester's mutual TLS: it presents its certificate and
// accepts only peers whose certificate the CA signed. serverName, if not
// empty, is the name peers' certificates must carry; otherwise each
// peer's host name is checked.
func (f TLSFiles) ClientTLS(serverName string) (*tls.Config, error) {
	pool, cert, err := f.load()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ServerName:   serverName,
	}, nil
}
