package decode

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go/format"
	"github.com/pierrec/lz4/v4"
)

// lz4Writer is a parquet-go codec that writes the deprecated LZ4 codec
// (5) as parquet-mr does (Hadoop framing: blocks of at most block bytes,
// each compressed in chunks of at most chunk bytes), or, with bare, as
// old parquet-cpp did (one LZ4 block).
type lz4Writer struct {
	bare         bool
	block, chunk int
}

func (c *lz4Writer) String() string { return "LZ4" }

func (c *lz4Writer) CompressionCodec() format.CompressionCodec { return format.Lz4 }

func (c *lz4Writer) Encode(dst, src []byte) ([]byte, error) {
	dst = dst[:0]
	if c.bare {
		buf := make([]byte, lz4.CompressBlockBound(len(src)))
		n, err := lz4.CompressBlock(src, buf, nil)
		if err != nil || n == 0 && len(src) > 0 {
			return nil, fmt.Errorf("lz4: %d bytes, %v", n, err)
		}
		return append(dst, buf[:n]...), nil
	}
	for len(src) > 0 {
		b := src[:min(c.block, len(src))]
		src = src[len(b):]
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
		for len(b) > 0 {
			k := b[:min(c.chunk, len(b))]
			b = b[len(k):]
			buf := make([]byte, lz4.CompressBlockBound(len(k)))
			n, err := lz4.CompressBlock(k, buf, nil)
			if err != nil || n == 0 {
				return nil, fmt.Errorf("lz4: %d bytes, %v", n, err)
			}
			dst = binary.BigEndian.AppendUint32(dst, uint32(n))
			dst = append(dst, buf[:n]...)
		}
	}
	return dst, nil
}

func (c *lz4Writer) Decode(dst, src []byte) ([]byte, error) {
	return nil, fmt.Errorf("lz4Writer only writes")
}

// TestDecodeLz4 reads the deprecated LZ4 codec in both framings, on v1
// and v2 pages, against the values written.
func TestDecodeLz4(t *testing.T) {
	for _, version := range []int{1, 2} {
		for _, codec := range []string{"lz4-hadoop", "lz4-hadoop-chunked", "lz4-bare"} {
			t.Run(fmt.Sprintf("v%d/%s", version, codec), func(t *testing.T) {
				t.Parallel()
				p := filepath.Join(t.TempDir(), "f.parquet")
				writeFile(t, p, fileSpec{rows: 1500, rowGroupRows: 1000, codec: codec, pageVersion: version, pageBytes: 2048})
				plan := planPaths(t, PlanOptions{MaxUnitRows: 600}, p)
				if c := plan.Units[0].Chunks[0].Codec; c != codecLz4 {
					t.Fatalf("the file's codec is %s, want LZ4", codecName(c))
				}
				// arrow-go reads no LZ4 (5) at all; the values are checked
				// against those written.
				checkPlan(t, plan, func(u Unit) int64 { return u.Ordinal })
			})
		}
	}
}

func TestLz4PageErrors(t *testing.T) {
	data := bytes.Repeat([]byte("lastmile lz4 "), 100)
	framed, _ := (&lz4Writer{block: 1 << 20, chunk: 1 << 20}).Encode(nil, data)
	for _, tc := range []struct {
		name string
		src  []byte
		dst  int
	}{
		{"a page header longer than the data", framed, len(data) + 1},
		{"a page header shorter than the data", framed, len(data) - 1},
		{"truncated", framed[:len(framed)-3], len(data)},
		{"garbage", []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0xff}, len(data)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := lz4Page(make([]byte, tc.dst), tc.src); err == nil {
				t.Fatal("no error")
			}
		})
	}
	got := make([]byte, len(data))
	if err := lz4Page(got, framed); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the framed page: %v", err)
	}
}

// FuzzLz4Page: any bytes into any page size give an error or a full
// page, never a panic.
func FuzzLz4Page(f *testing.F) {
	data := bytes.Repeat([]byte("abcdefgh"), 64)
	for _, w := range []*lz4Writer{{block: 100, chunk: 30}, {block: 1 << 20, chunk: 1 << 20}, {bare: true}} {
		src, err := w.Encode(nil, data)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src, uint16(len(data)))
	}
	f.Fuzz(func(t *testing.T, src []byte, n uint16) {
		lz4Page(make([]byte, n), src)
	})
}
