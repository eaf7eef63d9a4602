package iceberg_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/lastmile/lastmile/iceberg"
	"github.com/lastmile/lastmile/iceberg/icebergtest"
)

// tableAvro returns the Avro files (manifest list, manifests) of a small
// table's metadata.
func tableAvro(t testing.TB) [][]byte {
	dir := filepath.Join(t.TempDir(), "t")
	tab, err := icebergtest.New(dir, icebergtest.Layout{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, _, err := tab.Append(rows(i*10, 10)); err != nil {
			t.Fatal(err)
		}
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "metadata", "*.avro"))
	var out [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	if len(out) < 2 {
		t.Fatalf("%d Avro files", len(out))
	}
	return out
}

// TestAvroBound: a table's own Avro files pass; a bound one record or
// one byte below what a file holds refuses it; a cut file is damaged.
func TestAvroBound(t *testing.T) {
	for i, b := range tableAvro(t) {
		if err := iceberg.AvroBound(b, 1<<20, 1<<30); err != nil {
			t.Fatalf("file %d: %v", i, err)
		}
		// The smallest record bound it passes is its record count.
		n := int64(0)
		for iceberg.AvroBound(b, n, 1<<30) != nil {
			n++
			if n > 1000 {
				t.Fatalf("file %d: refused at every record bound", i)
			}
		}
		if n > 0 {
			if err := iceberg.AvroBound(b, n-1, 1<<30); !errors.Is(err, iceberg.ErrAvroBound) {
				t.Fatalf("file %d, %d records, bound %d: %v", i, n, n-1, err)
			}
		}
		if err := iceberg.AvroBound(b, 1<<20, 1); !errors.Is(err, iceberg.ErrAvroBound) && n > 0 {
			t.Fatalf("file %d under a 1-byte bound: %v", i, err)
		}
		if err := iceberg.AvroBound(b[:len(b)-20], 1<<20, 1<<30); err == nil {
			t.Fatalf("file %d cut by 20 bytes: no error", i)
		}
	}
}

// FuzzAvroBound: lastmiled walks the Avro files of tables its users can
// write; any bytes give a verdict, never a panic.
func FuzzAvroBound(f *testing.F) {
	for _, b := range tableAvro(f) {
		f.Add(b)
	}
	f.Add([]byte("Obj\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		iceberg.AvroBound(b, 1<<16, 1<<24)
	})
}
