package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestCertsRole: lastmile certs -role issues a certificate for one side
// of mutual TLS (peer: serverAuth, requester: clientAuth), both by
// default; another role is a usage error naming the ones there are.
func TestCertsRole(t *testing.T) {
	dir := t.TempDir()
	certs := func(args ...string) error {
		return runCerts(context.Background(), append([]string{"-dir", dir}, args...), io.Discard, io.Discard)
	}
	if err := certs("ca"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		name string
		want []x509.ExtKeyUsage
	}{
		{[]string{"-role", "peer", "cpu-7"}, "cpu-7", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		{[]string{"-role", "requester", "gpu-2"}, "gpu-2", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		{[]string{"gpu-3"}, "gpu-3", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}},
	} {
		if err := certs(c.args...); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		b, err := os.ReadFile(filepath.Join(dir, c.name+".pem"))
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cert.ExtKeyUsage, c.want) {
			t.Errorf("%v: usages %v; want %v", c.args, cert.ExtKeyUsage, c.want)
		}
	}
	if err := certs("-role", "gpu", "x"); !errors.Is(err, errUsage) {
		t.Errorf("-role gpu: %v; want a usage error", err)
	}
}
