package iceberg_test

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"

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

// avroContainer lays out an Avro object container by hand: the header
// with codec, then one block per payload (its record count, its bytes as
// the codec compresses them, the sync marker).
func avroContainer(t *testing.T, codec string, counts []int64, payloads [][]byte) []byte {
	t.Helper()
	var b []byte
	str := func(s string) { b = binary.AppendVarint(b, int64(len(s))); b = append(b, s...) }
	b = append(b, "Obj\x01"...)
	b = binary.AppendVarint(b, 2)
	str("avro.schema")
	str(`"long"`)
	str("avro.codec")
	str(codec)
	b = binary.AppendVarint(b, 0)
	sync := bytes.Repeat([]byte{7}, 16)
	b = append(b, sync...)
	for i, p := range payloads {
		var c []byte
		switch codec {
		case "null":
			c = p
		case "deflate":
			var buf bytes.Buffer
			w, _ := flate.NewWriter(&buf, flate.BestCompression)
			w.Write(p)
			w.Close()
			c = buf.Bytes()
		case "snappy":
			c = binary.BigEndian.AppendUint32(snappy.Encode(nil, p), crc32.ChecksumIEEE(p))
		case "zstandard":
			e, _ := zstd.NewWriter(nil)
			c = e.EncodeAll(p, nil)
			e.Close()
		}
		b = binary.AppendVarint(b, counts[i])
		b = binary.AppendVarint(b, int64(len(c)))
		b = append(b, c...)
		b = append(b, sync...)
	}
	return b
}

// TestAvroBoundCodecs: every codec's blocks are counted by their size
// once decompressed: a bound at that size passes, one byte below refuses.
func TestAvroBoundCodecs(t *testing.T) {
	payloads := [][]byte{bytes.Repeat([]byte("a"), 100000), bytes.Repeat([]byte("bc"), 30000)}
	const size = 160000
	for _, codec := range []string{"null", "deflate", "snappy", "zstandard"} {
		b := avroContainer(t, codec, []int64{3, 4}, payloads)
		if err := iceberg.AvroBound(b, 7, size); err != nil {
			t.Errorf("%s: %v", codec, err)
		}
		if err := iceberg.AvroBound(b, 7, size-1); !errors.Is(err, iceberg.ErrAvroBound) {
			t.Errorf("%s, a bound one byte below its %d bytes: %v", codec, size, err)
		}
		if err := iceberg.AvroBound(b, 6, size); !errors.Is(err, iceberg.ErrAvroBound) {
			t.Errorf("%s, a bound one record below its 7: %v", codec, err)
		}
	}
	if err := iceberg.AvroBound(avroContainer(t, "bzip2", []int64{1}, payloads[:1]), 7, size); err == nil {
		t.Error("codec bzip2: no error")
	}
}
