package decode

import (
	"bytes"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// TestDecompressLengths checks every codec against a page whose header
// gives its true size, a larger one and a smaller one: only the first
// decompresses, and the others name the codec in their error.
func TestDecompressLengths(t *testing.T) {
	page := bytes.Repeat([]byte("lastmile page bytes, "), 400)
	page = append(page, []byte("and a tail that does not repeat")...)
	encoders := []struct {
		codec int32
		name  string
		enc   func(t *testing.T, p []byte) []byte
	}{
		{codecNone, "uncompressed", func(t *testing.T, p []byte) []byte { return bytes.Clone(p) }},
		{codecSnappy, "snappy", func(t *testing.T, p []byte) []byte { return s2.EncodeSnappy(nil, p) }},
		{codecZstd, "zstd", func(t *testing.T, p []byte) []byte {
			w, err := zstd.NewWriter(nil)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			return w.EncodeAll(p, nil)
		}},
		{codecGzip, "gzip", func(t *testing.T, p []byte) []byte {
			var b bytes.Buffer
			w := gzip.NewWriter(&b)
			w.Write(p)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			return b.Bytes()
		}},
		{codecLz4Raw, "lz4", func(t *testing.T, p []byte) []byte {
			out := make([]byte, lz4.CompressBlockBound(len(p)))
			n, err := lz4.CompressBlock(p, out, nil)
			if err != nil {
				t.Fatal(err)
			}
			return out[:n]
		}},
		{codecBrotli, "brotli", func(t *testing.T, p []byte) []byte {
			var b bytes.Buffer
			w := brotli.NewWriterLevel(&b, 5)
			w.Write(p)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			return b.Bytes()
		}},
	}
	for _, e := range encoders {
		t.Run(e.name, func(t *testing.T) {
			src := e.enc(t, page)
			var z decompressor
			defer z.close()
			// Twice at each size: the second call reuses a reset decoder.
			for range 2 {
				dst := make([]byte, len(page))
				if err := z.decompress(e.codec, dst, src); err != nil {
					t.Fatalf("true size: %v", err)
				}
				if !bytes.Equal(dst, page) {
					t.Fatal("decompressed bytes differ from the page")
				}
				for _, n := range []int{len(page) + 1, len(page) - 1} {
					err := z.decompress(e.codec, make([]byte, n), src)
					if err == nil {
						t.Fatalf("header size %d (true %d): no error", n, len(page))
					}
					if !strings.Contains(err.Error(), e.name) {
						t.Errorf("header size %d: error %q does not name %s", n, err, e.name)
					}
				}
			}
			if len(src) > 8 {
				bad := bytes.Clone(src)
				bad = bad[:len(bad)/2]
				if err := z.decompress(e.codec, make([]byte, len(page)), bad); err == nil {
					t.Error("half the compressed bytes: no error")
				}
			}
		})
	}
}

// TestMaxExpand: what the codecs' own encoders make of the most
// compressible pages (zeros, one repeated byte pair), at their densest
// settings, stays within maxExpand, so no real page is refused by it.
func TestMaxExpand(t *testing.T) {
	gz := func(p []byte) []byte {
		var b bytes.Buffer
		w, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		w.Write(p)
		w.Close()
		return b.Bytes()
	}
	lz := func(p []byte) []byte {
		out := make([]byte, lz4.CompressBlockBound(len(p)))
		n, err := lz4.CompressBlockHC(p, out, lz4.Level9, nil, nil)
		if err != nil || n == 0 {
			t.Fatal(err)
		}
		return out[:n]
	}
	// Snappy's, deflate's and LZ4's densest ratios are limits of their
	// formats (a copy element's length against its size), reached by 1
	// MiB; zstd's grows with the page (a block of one repeated byte
	// costs a few bytes), so only it is tried at 8 MiB as well.
	for _, size := range []int{1, 100, 64 << 10, 1 << 20, 8 << 20} {
		for _, page := range [][]byte{make([]byte, size), bytes.Repeat([]byte{7, 9}, (size+1)/2)} {
			for _, c := range []struct {
				codec int32
				enc   func([]byte) []byte
			}{
				{codecNone, func(p []byte) []byte { return p }},
				{codecSnappy, func(p []byte) []byte { return s2.EncodeSnappyBest(nil, p) }},
				{codecGzip, gz},
				{codecLz4Raw, lz},
				{codecZstd, func(p []byte) []byte { return zstdFrames(t, p)["best"] }},
			} {
				if size > 1<<20 && c.codec != codecZstd && c.codec != codecNone {
					continue
				}
				src := c.enc(page)
				if size == 8<<20 {
					t.Logf("%s: %d bytes stored in %d (%.1f:1)", codecName(c.codec), len(page), len(src), float64(len(page))/float64(len(src)))
				}
				if most, err := codecBound(c.codec, src); err != nil || int64(len(page)) > most {
					t.Errorf("%s: a %d-byte page stored in %d bytes; the bound allows %d (%v)", codecName(c.codec), len(page), len(src), most, err)
				}
			}
		}
	}
}
