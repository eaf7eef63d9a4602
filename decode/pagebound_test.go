package decode

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
	"github.com/lastmile/lastmile/column"
)

// zstdFrames encodes p with klauspost's encoder: whole (the content size
// in the frame header), at the best level, and streamed (no content size,
// a checksum, blocks as they fill).
func zstdFrames(t testing.TB, p []byte) map[string][]byte {
	out := map[string][]byte{}
	for name, opts := range map[string][]zstd.EOption{
		"default": nil,
		"best":    {zstd.WithEncoderLevel(zstd.SpeedBestCompression)},
		"fastest": {zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false)},
	} {
		w, err := zstd.NewWriter(nil, opts...)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = w.EncodeAll(p, nil)
		w.Close()
	}
	var b bytes.Buffer
	w, err := zstd.NewWriter(&b, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	for len(p) > 0 {
		n := min(len(p), 100<<10)
		w.Write(p[:n])
		p = p[n:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out["streamed"] = b.Bytes()
	return out
}

// TestZstdBound: the bound read from the block headers is never below
// what a frame really holds, for pages from all-zero (the densest) to
// random (stored raw), whole or streamed; and it stays near the truth
// where the blocks say their sizes.
func TestZstdBound(t *testing.T) {
	random := make([]byte, 1<<20)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	pages := map[string][]byte{
		"empty":     {},
		"one byte":  {7},
		"zeros 1M":  make([]byte, 1<<20),
		"zeros 8M":  make([]byte, 8<<20),
		"pairs 64K": bytes.Repeat([]byte{7, 9}, 32<<10),
		"random 1M": random,
	}
	for name, page := range pages {
		for enc, src := range zstdFrames(t, page) {
			n, err := zstdBound(src)
			if err != nil {
				t.Fatalf("%s, %s: %v", name, enc, err)
			}
			if n < int64(len(page)) {
				t.Errorf("%s, %s: bound %d below the page's %d bytes", name, enc, n, len(page))
			}
			if name == "random 1M" && n > int64(len(page))+zstdBlockMax {
				t.Errorf("%s, %s: bound %d for %d raw bytes", name, enc, n, len(page))
			}
			if name == "zeros 8M" {
				t.Logf("%s, %s: %d bytes stored in %d, bound %d", name, enc, len(page), len(src), n)
			}
		}
	}
}

// TestZstdBoundFrames covers the frame layouts a writer may use and the
// inputs that are not zstd, which the decoder refuses too.
func TestZstdBoundFrames(t *testing.T) {
	frame := zstdFrames(t, bytes.Repeat([]byte("lastmile "), 1000))["default"]
	skippable := binary.LittleEndian.AppendUint32(nil, 0x184D2A53)
	skippable = binary.LittleEndian.AppendUint32(skippable, 5)
	skippable = append(skippable, 1, 2, 3, 4, 5)
	// A frame of one RLE block of 100,000 bytes: magic, a descriptor with
	// the single-segment flag and a 4-byte content size, then the block.
	rle := binary.LittleEndian.AppendUint32(nil, zstdMagic)
	rle = append(rle, 0x80|0x20)
	rle = binary.LittleEndian.AppendUint32(rle, 100000)
	bh := uint32(1) | 1<<1 | 100000<<3
	rle = append(rle, byte(bh), byte(bh>>8), byte(bh>>16), 'x')
	for _, c := range []struct {
		name string
		src  []byte
		want int64 // -1: an error
		out  int   // what the decoder makes of it, -1: an error
	}{
		{"one frame", frame, 9000, 9000},
		{"two frames", append(bytes.Clone(frame), frame...), 18000, 18000},
		{"a skippable frame first", append(bytes.Clone(skippable), frame...), 9000, 9000},
		{"an RLE block", rle, 100000, 100000},
		{"an RLE block, content size smaller", append(rle[:5:5], append(binary.LittleEndian.AppendUint32(nil, 10), rle[9:]...)...), 10, -1},
		{"three bytes after it", append(bytes.Clone(frame), 0, 0, 0), 9000, -1}, // left to the decoder
		{"cut in its last block", frame[:len(frame)-6], -1, -1},
		{"cut in its header", frame[:5], -1, -1},
		{"not zstd", []byte("PAR1PAR1PAR1"), -1, -1},
		{"reserved bit", append(append(bytes.Clone(frame[:4]), frame[4]|1<<3), frame[5:]...), -1, -1},
		{"reserved block type", append(bytes.Clone(rle[:9]), 0x07, 0, 0, 'x'), -1, -1},
		{"skippable frame cut", skippable[:7], -1, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, err := zstdBound(c.src)
			switch {
			case c.want < 0 && err == nil:
				t.Errorf("bound %d, want an error", n)
			case c.want >= 0 && err != nil:
				t.Errorf("error %v, want %d", err, c.want)
			case c.want >= 0 && n != c.want:
				t.Errorf("bound %d, want %d", n, c.want)
			}
			dec, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
			defer dec.Close()
			out, derr := dec.DecodeAll(c.src, nil)
			if (derr != nil) != (c.out < 0) || derr == nil && len(out) != c.out {
				t.Errorf("the decoder gave %d bytes, error %v; want %d", len(out), derr, c.out)
			}
		})
	}
}

// FuzzZstdBound holds zstdBound to the decoder: whatever the decoder
// decompresses is within the bound, and whatever the bound refuses the
// decoder refuses too, so no readable page is turned away.
func FuzzZstdBound(f *testing.F) {
	for _, p := range [][]byte{{}, bytes.Repeat([]byte("ab"), 3000), make([]byte, 300<<10)} {
		for _, src := range zstdFrames(f, p) {
			f.Add(src)
		}
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(8<<20),
		zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		n, berr := zstdBound(src)
		if berr == nil && n > 4<<20 {
			return // not decoded here: too large to check cheaply
		}
		capacity := 1 << 20
		if berr == nil {
			capacity = int(n) + 1
		}
		out, derr := dec.DecodeAll(src, make([]byte, 0, capacity))
		if derr != nil {
			return
		}
		if berr != nil {
			t.Fatalf("the decoder read %d bytes from a stream the bound refused: %v", len(out), berr)
		}
		if int64(len(out)) > n {
			t.Fatalf("decoded %d bytes, bound %d", len(out), n)
		}
	})
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// TestPageClaimsTooMuch: a data page of a few stored bytes whose header
// says it holds 1 GiB less one byte is refused without its buffer being
// made. Snappy and zstd are refused by their bound before anything is
// decoded; a brotli page is decoded ahead, into a buffer that grows only
// with what it really holds.
func TestPageClaimsTooMuch(t *testing.T) {
	var bz bytes.Buffer
	w := brotli.NewWriter(&bz)
	w.Write(make([]byte, 12))
	w.Close()
	zs := zstdFrames(t, make([]byte, 12))["default"]
	for _, c := range []struct {
		codec string
		body  []byte
		want  string
	}{
		{"snappy", make([]byte, 12), "more than SNAPPY can expand them to (328)"},
		{"zstd", zs, "more than ZSTD can expand them to (12)"},
		{"brotli", bz.Bytes(), "brotli: page shorter than its header's 1073741823 bytes: 12"},
	} {
		t.Run(c.codec, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "f.parquet")
			writeFile(t, p, fileSpec{rows: 50, codec: c.codec, pageVersion: 1})
			plan := planPaths(t, PlanOptions{Columns: []string{"row_id"}}, p)
			u := plan.Units[0]
			ch := u.Chunks[0]
			ch.Uncompressed, ch.Values = 0, 0 // the chunk's own sizes allow anything
			// PageHeader{type: DATA_PAGE, uncompressed: 2^30-1,
			// compressed: len(body), data_page_header: {num_values: 50,
			// encodings PLAIN, RLE, RLE}}.
			hdr := []byte{0x15, 0x00, 0x15}
			hdr = binary.AppendUvarint(hdr, uint64(2*(1<<30-1)))
			hdr = append(hdr, 0x15)
			hdr = binary.AppendUvarint(hdr, uint64(2*len(c.body)))
			hdr = append(hdr, 0x2c, 0x15, 100, 0x15, 0, 0x15, 6, 0x15, 6, 0, 0)
			raw := append(hdr, c.body...)
			d := NewDecoder(plan.Fields)
			defer d.Close()
			d.unit, d.ctx, d.open = u, context.Background(), true
			var col column.Column
			d.resetColumn(0, &col)
			var pr pageReader
			var err error
			n := allocated(func() {
				pr.resetBytes(raw, &d.hdr)
				err = d.decodePages(0, &ch, &pr, nil, &col)
			})
			t.Logf("%s: a page of %d stored bytes refused, %d bytes allocated", c.codec, len(c.body), n)
			if n > 8<<20 {
				t.Errorf("refusing the page allocated %d bytes", n)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}

// TestPageHoldsMoreThanItSays: a zstd page whose header says 100 bytes
// and whose one frame, without a content size, holds 8 MiB of zeros fails
// at the header's size, without the decoder growing its buffer to the
// frame's size; so does the same page in brotli, whose held buffer grows
// no further than the header's size.
func TestPageHoldsMoreThanItSays(t *testing.T) {
	zeros := make([]byte, 8<<20)
	var bz bytes.Buffer
	w := brotli.NewWriter(&bz)
	w.Write(zeros)
	w.Close()
	for _, c := range []struct {
		codec int32
		src   []byte
	}{
		{codecZstd, zstdFrames(t, zeros)["streamed"]},
		{codecBrotli, bz.Bytes()},
	} {
		// The brotli reader's window (4 MiB here) is made once per
		// decompressor, on its first stream: not counted.
		var z decompressor
		if c.codec == codecBrotli {
			if err := z.holdBrotli(c.src, len(zeros)); err != nil {
				t.Fatal(err)
			}
			z.held = nil
		}
		var err error
		n := allocated(func() {
			if c.codec == codecBrotli {
				err = z.holdBrotli(c.src, 100)
			} else {
				err = z.decompress(c.codec, make([]byte, 100), c.src)
			}
		})
		z.close()
		if err == nil {
			t.Errorf("%s: no error", codecName(c.codec))
		}
		if n > 2<<20 {
			t.Errorf("%s: %d bytes allocated for a page of 100", codecName(c.codec), n)
		}
	}
}

// TestHoldBrotli: a page decoded ahead is copied, not decoded again, by
// the decompress of the same bytes that follows, and only by that one.
func TestHoldBrotli(t *testing.T) {
	page := bytes.Repeat([]byte("a brotli page of lastmile, "), 5000)
	var b bytes.Buffer
	w := brotli.NewWriterLevel(&b, 5)
	w.Write(page)
	w.Close()
	src := b.Bytes()
	var z decompressor
	defer z.close()
	if err := z.holdBrotli(src, len(page)); err != nil {
		t.Fatal(err)
	}
	z.held[0] ^= 0xff // so that a copy shows
	dst := make([]byte, len(page))
	if err := z.decompress(codecBrotli, dst, src); err != nil {
		t.Fatal(err)
	}
	if dst[0] != page[0]^0xff || !bytes.Equal(dst[1:], page[1:]) {
		t.Fatal("the held page was not the one copied")
	}
	// The hold is used once: the next decompress decodes.
	if err := z.decompress(codecBrotli, dst, src); err != nil || !bytes.Equal(dst, page) {
		t.Fatalf("second decompress: %v, equal %v", err, bytes.Equal(dst, page))
	}
	// A hold of other bytes is not used for these.
	if err := z.holdBrotli(src[:len(src):len(src)], len(page)); err != nil {
		t.Fatal(err)
	}
	other := bytes.Clone(src)
	if err := z.decompress(codecBrotli, dst, other); err != nil || !bytes.Equal(dst, page) {
		t.Fatalf("other bytes: %v", err)
	}
	for _, n := range []int{len(page) - 1, len(page) + 1} {
		if err := z.holdBrotli(src, n); err == nil {
			t.Errorf("a header of %d bytes for a page of %d: no error", n, len(page))
		}
	}
	// A page whose claim is within brotliDirect is not held: it
	// decompresses in place.
	d := NewDecoder(nil)
	defer d.Close()
	c := &Chunk{Codec: codecBrotli}
	h := &pageHeader{typ: pageData, uncompressed: int32(len(page))}
	if err := d.holdPage(c, h, src); err != nil || d.z.heldLen > 0 {
		t.Errorf("a true claim of %d bytes in %d: held %v, error %v", len(page), len(src), d.z.heldLen > 0, err)
	}
	// One byte more than that is decoded ahead, and found short.
	h.uncompressed = int32(brotliDirect(len(src))) + 1
	if err := d.holdPage(c, h, src); err == nil || !strings.Contains(err.Error(), "page shorter than its header's") {
		t.Errorf("a claim of %d bytes in %d: %v", h.uncompressed, len(src), err)
	}
}
