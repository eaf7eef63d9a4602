package peer

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority for a cluster's lastmiled hosts: every
// GPU host and CPU peer gets a certificate it signed, and trusts only
// those (`lastmile certs`, docs/peers.md).
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	Dir  string // where ca.pem and ca-key.pem are
}

// NewCA makes a CA valid for validity and writes dir/ca.pem and
// dir/ca-key.pem (mode 0600). It refuses to overwrite an existing CA.
func NewCA(dir, name string, validity time.Duration) (*CA, error) {
	if _, err := os.Stat(filepath.Join(dir, "ca-key.pem")); err == nil {
		return nil, fmt.Errorf("%s already holds a CA key: use it (LoadCA) or choose another directory", dir)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(validity),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := writeKeyPair(filepath.Join(dir, "ca"), der, key); err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, Dir: dir}, nil
}

// LoadCA reads dir/ca.pem and dir/ca-key.pem.
func LoadCA(dir string) (*CA, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
	if err != nil {
		return nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, errors.New("ca.pem or ca-key.pem holds no PEM block")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, Dir: dir}, nil
}

// Role is what a certificate lets its holder be: a peer (TLS server), a
// requester (TLS client: a GPU host spilling units), or both.
type Role int

const (
	RoleBoth Role = iota
	RolePeer
	RoleRequester
)

// ParseRole reads a Role's name: "both", "peer" or "requester".
func ParseRole(s string) (Role, error) {
	switch s {
	case "both":
		return RoleBoth, nil
	case "peer":
		return RolePeer, nil
	case "requester":
		return RoleRequester, nil
	}
	return 0, fmt.Errorf("role %q: want peer (CPU peers), requester (GPU hosts) or both", s)
}

// usages are the extended key usages of r's certificates: Go's TLS
// refuses a client certificate without clientAuth and a server's without
// serverAuth, so a peer's key cannot ask other peers for units, and a
// requester's cannot pose as a peer.
func (r Role) usages() []x509.ExtKeyUsage {
	switch r {
	case RolePeer:
		return []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	case RoleRequester:
		return []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	return []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
}

// Issue writes dir/NAME.pem and dir/NAME-key.pem: a certificate for name
// valid for validity, for both sides of mutual TLS, with hosts (IP
// addresses or DNS names) as its subject alternative names, and returns
// the files with the CA's.
func (ca *CA) Issue(dir, name string, hosts []string, validity time.Duration) (TLSFiles, error) {
	return ca.IssueRole(dir, name, hosts, validity, RoleBoth)
}

// IssueRole is Issue for one role only.
func (ca *CA) IssueRole(dir, name string, hosts []string, validity time.Duration, role Role) (TLSFiles, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return TLSFiles{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: role.usages(),
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return TLSFiles{}, err
	}
	base := filepath.Join(dir, name)
	if err := writeKeyPair(base, der, key); err != nil {
		return TLSFiles{}, err
	}
	return TLSFiles{CA: filepath.Join(ca.Dir, "ca.pem"), Cert: base + ".pem", Key: base + "-key.pem"}, nil
}

func writeKeyPair(base string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(base+".pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(base+"-key.pem", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}
