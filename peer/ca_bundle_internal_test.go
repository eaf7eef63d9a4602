package peer

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// twoCAs makes the two certificate authorities of a CA rotation under
// dir: the one in use and its successor.
func twoCAs(t *testing.T, dir string) (old, next *CA) {
	t.Helper()
	old, err := NewCA(filepath.Join(dir, "old"), "old-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	next, err = NewCA(filepath.Join(dir, "new"), "new-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return old, next
}

// writeBundle writes the certificates of cas, in order, to the CA
// bundle at path, replacing it.
func writeBundle(t *testing.T, path string, cas ...*CA) {
	t.Helper()
	var b []byte
	for _, ca := range cas {
		c, err := os.ReadFile(filepath.Join(ca.Dir, "ca.pem"))
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, c...)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
