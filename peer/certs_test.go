package peer

import (
	"testing"
	"time"
)

// testCA wraps CA for the tests: a CA in dir, named name, and leaves
// valid for 127.0.0.1 and localhost.
type testCA struct {
	t  *testing.T
	ca *CA
}

func newTestCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	ca, err := NewCA(dir+"/"+name, name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{t: t, ca: ca}
}

func (c *testCA) issue(name string) TLSFiles {
	c.t.Helper()
	f, err := c.ca.Issue(c.ca.Dir, name, []string{"127.0.0.1", "localhost"}, time.Hour)
	if err != nil {
		c.t.Fatal(err)
	}
	return f
}

func TestCAReload(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA(dir, "c", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewCA(dir, "c", time.Hour); err == nil {
		t.Fatal("a second CA overwrote the first")
	}
	again, err := LoadCA(dir)
	if err != nil || !again.Cert.Equal(ca.Cert) {
		t.Fatalf("LoadCA: %v", err)
	}
	f, err := again.Issue(dir, "host", []string{"10.0.0.1", "peer.example"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ServerTLS(); err != nil {
		t.Fatal(err)
	}
	if _, err := (TLSFiles{CA: f.CA}).ServerTLS(); err == nil {
		t.Fatal("TLS without cert and key accepted")
	}
}
