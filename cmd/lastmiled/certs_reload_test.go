package main_test

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lastmile/lastmile/peer"
)

// TestReloadRenewsCertificates: a CPU peer's certificate renewed in place
// (lastmile certs again, same paths) is presented after SIGHUP, and the
// log says so with its new end; a key that does not match leaves the
// renewed pair in use, with a Warn. Before, certificates were read once
// at start, and SIGHUP changed nothing.
func TestReloadRenewsCertificates(t *testing.T) {
	c, ca, notAfter := peerWithCerts(t)
	first := notAfter()
	if _, err := ca.Issue(ca.Dir, "cpu", []string{"127.0.0.1"}, 5*time.Hour); err != nil {
		t.Fatal(err)
	}
	c.cpu.signal(syscall.SIGHUP)
	waitFor(t, "the renewed certificate logged", 10*time.Second, func() bool {
		return strings.Contains(c.cpu.log.String(), "certificates reloaded")
	})
	renewed := notAfter()
	if d := renewed.Sub(first); d < 3*time.Hour {
		t.Fatalf("after SIGHUP the peer presents a certificate ending %v, %v after the first; want the renewed one, 4h later", renewed, d)
	}

	// A key from another pair: refused, the renewed certificate kept.
	other, err := ca.Issue(t.TempDir(), "other", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := os.ReadFile(other.Key)
	os.WriteFile(filepath.Join(ca.Dir, "cpu-key.pem"), key, 0o600)
	c.cpu.signal(syscall.SIGHUP)
	waitFor(t, "the bad key logged", 10*time.Second, func() bool {
		return strings.Contains(c.cpu.log.String(), "the ones read before stay in use")
	})
	if got := notAfter(); !got.Equal(renewed) {
		t.Fatalf("after a SIGHUP with a mismatched key the peer presents a certificate ending %v; want the renewed one (%v)", got, renewed)
	}
}

// TestReloadRenewsCertificatesDespiteBadConfig: SIGHUP reads the
// certificate files again even when the config file, edited meanwhile,
// is refused: the certificates are files of their own at the paths in
// use, and a renewal that a config typo held back would let them expire
// under a peer that said nothing of them but "configuration not
// reloaded".
func TestReloadRenewsCertificatesDespiteBadConfig(t *testing.T) {
	c, ca, notAfter := peerWithCerts(t)
	first := notAfter()
	cfgPath := filepath.Join(c.cpu.dir, "lastmiled.yaml")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, append(cfg, "grace: 1ms\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Issue(ca.Dir, "cpu", []string{"127.0.0.1"}, 5*time.Hour); err != nil {
		t.Fatal(err)
	}
	c.cpu.signal(syscall.SIGHUP)
	waitFor(t, "the refused config logged", 10*time.Second, func() bool {
		return strings.Contains(c.cpu.log.String(), "configuration not reloaded")
	})
	time.Sleep(200 * time.Millisecond)
	if renewed := notAfter(); renewed.Sub(first) < 3*time.Hour {
		t.Fatalf("after SIGHUP with a refused config the peer presents a certificate ending %v (the first ended %v); want the renewed one, 4h later", renewed, first)
	}
}

// peerWithCerts starts a CPU peer lastmiled over mutual TLS and returns
// it, its CA, and the end of the certificate it presents now, as the GPU
// host's certificate sees it.
func peerWithCerts(t *testing.T) (*cluster, *peer.CA, func() time.Time) {
	t.Helper()
	c := newCluster(t, "never", "", "")
	c.cpu.start("-workers", "1")
	ca, err := peer.LoadCA(filepath.Join(c.gpu.dir, "certs"))
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := peer.TLSFiles{CA: filepath.Join(ca.Dir, "ca.pem"), Cert: filepath.Join(ca.Dir, "gpu.pem"), Key: filepath.Join(ca.Dir, "gpu-key.pem")}.ClientTLS("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return c, ca, func() time.Time {
		conn, err := tls.Dial("tcp", c.peerAddr, gpu)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].NotAfter
	}
}
