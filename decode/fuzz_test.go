package decode

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/lastmile/lastmile/column"
)

// fuzzSeeds writes small files (v1 snappy, v2 uncompressed, v2 brotli, v1
// zstd) and returns their plans: real column chunks to mutate.
func fuzzSeeds(f *testing.F) []*Plan {
	var plans []*Plan
	for _, s := range []fileSpec{
		{rows: 120, codec: "snappy", pageVersion: 1, pageBytes: 512},
		{rows: 120, codec: "none", pageVersion: 2, pageBytes: 512},
		{rows: 120, codec: "brotli", pageVersion: 2, pageBytes: 512},
		{rows: 120, codec: "zstd", pageVersion: 1, pageBytes: 512},
	} {
		p := filepath.Join(f.TempDir(), "seed.parquet")
		writeFile(f, p, s)
		plan := planPaths(f, PlanOptions{}, p)
		plans = append(plans, plan)
	}
	return plans
}

// FuzzDecodePage feeds mutated column-chunk bytes (dictionary and data
// pages, headers included) to the page decoder of every field kind. It
// must return an error or rows, never panic or loop. Inputs are whole
// chunks, so run it with -fuzzminimizetime=5s or the fuzzer spends its
// time minimizing.
func FuzzDecodePage(f *testing.F) { fuzzDecodePages(f, fuzzSeeds(f)) }

// FuzzDecodeInt96Page is FuzzDecodePage for INT96 timestamps, required,
// optional and in lists: dictionary pages (v1, snappy) and PLAIN ones
// (v2, uncompressed).
func FuzzDecodeInt96Page(f *testing.F) {
	dir := f.TempDir()
	dict, plain := filepath.Join(dir, "dict.parquet"), filepath.Join(dir, "plain.parquet")
	writeInt96PG(f, dict, 120, "snappy", 1, int96At)
	writeInt96File(f, plain, 120, compress.Codecs.Uncompressed, true)
	var plans []*Plan
	for _, p := range []string{dict, plain} {
		plan := planPaths(f, PlanOptions{}, p)
		plans = append(plans, plan)
	}
	fuzzDecodePages(f, plans)
}

// FuzzDecodeDecimalPage is FuzzDecodePage for DECIMAL columns: INT32
// dictionaries, INT64 delta, 16-byte PLAIN and dictionary pages.
func FuzzDecodeDecimalPage(f *testing.F) {
	var plans []*Plan
	for _, v := range []int{1, 2} {
		p := filepath.Join(f.TempDir(), "dec.parquet")
		writeDecimals(f, p, 120, v, "snappy")
		plan := planPaths(f, PlanOptions{}, p)
		plans = append(plans, plan)
	}
	fuzzDecodePages(f, plans)
}

// FuzzDecodeHashedPage is FuzzDecodePage for strings and lists of
// strings read as ids: PLAIN, dictionary and DELTA_LENGTH_BYTE_ARRAY
// lists, DELTA_BYTE_ARRAY and dictionary strings, v1 and v2 pages.
func FuzzDecodeHashedPage(f *testing.F) {
	var plans []*Plan
	for _, v := range []int{1, 2} {
		p := filepath.Join(f.TempDir(), "h.parquet")
		writeHashRows(f, p, 120, v, "snappy")
		plans = append(plans, planPaths(f, PlanOptions{Hashed: hashMods}, p))
	}
	fuzzDecodePages(f, plans)
}

// fuzzDecodePages seeds f with the chunks of plans' first units, whose
// fields must be alike, and decodes mutations of them.
func fuzzDecodePages(f *testing.F, plans []*Plan) {
	plan := plans[0]
	d := NewDecoder(plan.Fields)
	for _, p := range plans {
		dd := NewDecoder(p.Fields)
		u := p.Units[0]
		if err := dd.Open(context.Background(), u); err != nil {
			f.Fatal(err)
		}
		for fi := range p.Fields {
			raw, err := chunkBytes(dd, &u.Chunks[fi])
			if err != nil {
				f.Fatal(err)
			}
			f.Add(uint8(fi), uint8(0), append([]byte(nil), raw...))
			f.Add(uint8(fi), uint8(3), append([]byte(nil), raw...))
		}
		dd.Close()
	}
	u := plan.Units[0]
	f.Fuzz(func(t *testing.T, field, mode uint8, raw []byte) {
		fi := int(field) % len(plan.Fields)
		c := u.Chunks[fi]
		c.DictLen, c.FirstRow = 0, 0
		d.unit, d.ctx, d.open = u, context.Background(), true
		var sel []int32
		if mode%4 == 3 {
			sel = stride(u.Rows, 7, 1)
		}
		var col column.Column
		d.resetColumn(fi, &col)
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("field %s: panic: %v", plan.Fields[fi].Name, r)
				}
			}()
			var pr pageReader
			pr.resetBytes(raw, &d.hdr)
			if err := d.decodePages(fi, &c, &pr, sel, &col); err == nil {
				if err := col.Check(); err != nil {
					t.Fatalf("field %s: decoded column fails Check: %v", plan.Fields[fi].Name, err)
				}
			}
		}()
	})
}

// FuzzPageHeader: the hand-written thrift reader on arbitrary bytes.
func FuzzPageHeader(f *testing.F) {
	for _, p := range fuzzSeeds(f) {
		dd := NewDecoder(p.Fields)
		u := p.Units[0]
		dd.Open(context.Background(), u)
		for fi := range p.Fields {
			raw, _ := chunkBytes(dd, &u.Chunks[fi])
			f.Add(append([]byte(nil), raw[:min(len(raw), 64)]...))
		}
		dd.Close()
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var h pageHeader
		n, err := parsePageHeader(b, &h)
		if err == nil && (n <= 0 || n > len(b)) {
			t.Fatalf("consumed %d of %d bytes", n, len(b))
		}
	})
}

// FuzzHybrid: the RLE/bit-packed level and index decoders.
func FuzzHybrid(f *testing.F) {
	f.Add([]byte{0x03, 0xff, 0x02, 0x01}, uint8(1), uint16(10))
	f.Add([]byte{0x10, 0x01, 0x05, 0xab, 0xcd, 0xef, 0x12}, uint8(3), uint16(24))
	f.Fuzz(func(t *testing.T, src []byte, width uint8, n uint16) {
		lv := make([]uint8, n)
		decodeLevels(lv, src, uint(width%9))
		ix := make([]int32, n)
		decodeIndexes(ix, src, uint(width%33))
		dv := make([]int64, n)
		decodeDelta(dv, src)
	})
}

// FuzzUnitUnmarshal: UnmarshalBinary never panics, and what it accepts
// marshals back to the same unit.
func FuzzUnitUnmarshal(f *testing.F) {
	for _, p := range fuzzSeeds(f) {
		b, err := p.Units[0].MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{1, '{', '}'})
	f.Add([]byte{2})
	absent := Unit{File: "t/x.parquet", FileSize: 100, Rows: 10, Chunks: []Chunk{{Leaf: -1, Absent: true, Values: 10}}}
	if b, err := absent.MarshalBinary(); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var u Unit
		if err := u.UnmarshalBinary(b); err != nil {
			return
		}
		b2, err := u.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var u2 Unit
		if err := u2.UnmarshalBinary(b2); err != nil {
			t.Fatalf("re-unmarshal: %v", err)
		}
		if string(b2) != string(mustMarshal(t, u2)) {
			t.Fatal("unit changed across a round trip")
		}
	})
}

func mustMarshal(t testing.TB, u Unit) []byte {
	b, err := u.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzSnappyPrefix: the prefix decoder never panics, and on a block s2
// accepts it agrees with s2.
func FuzzSnappyPrefix(f *testing.F) {
	f.Add(snappy.Encode(nil, []byte("levels levels levels and values values values")), uint16(20))
	f.Add(snappy.Encode(nil, make([]byte, 300)), uint16(299))
	f.Fuzz(func(t *testing.T, src []byte, until uint16) {
		n, err := s2.DecodedLen(src)
		if err != nil || n > 1<<20 {
			n = int(until) + 1
		}
		var p snappyPrefix
		if !p.init(src, n, nil) || !p.fill(min(int(until), n)) {
			return
		}
		full, err := s2.Decode(nil, src)
		if err != nil {
			return
		}
		if !bytes.Equal(p.out, full[:len(p.out)]) {
			t.Fatalf("prefix differs from s2")
		}
	})
}

// chunkBytes reads a whole-chunk unit's column chunk as stored.
func chunkBytes(d *Decoder, c *Chunk) ([]byte, error) {
	b := make([]byte, c.End-c.Offset)
	return b, readFull(d.file, b, c.Offset)
}

// FuzzVerifiedUnit mutates units of a real file: a decoder that verifies
// units (a CPU peer's) either refuses one or opens one whose row range
// and chunk figures are the file's own, and then decodes it or fails
// with an error.
func FuzzVerifiedUnit(f *testing.F) {
	plan := fuzzSeeds(f)[0]
	for _, u := range plan.Units {
		f.Add(mustMarshal(f, u))
	}
	d := NewDecoder(plan.Fields)
	d.VerifyUnits()
	f.Fuzz(func(t *testing.T, b []byte) {
		var u Unit
		if err := u.UnmarshalBinary(b); err != nil || u.File != plan.Units[0].File {
			return
		}
		if err := d.Open(context.Background(), u); err != nil {
			return
		}
		var ref *Unit
		for i := range plan.Units {
			if plan.Units[i].RowGroup == u.RowGroup {
				ref = &plan.Units[i]
			}
		}
		if ref == nil || u.RowStart+u.Rows > ref.RowStart+ref.Rows {
			t.Fatalf("opened rows [%d, %d) of row group %d, which the plan does not have", u.RowStart, u.RowStart+u.Rows, u.RowGroup)
		}
		for i, c := range u.Chunks {
			w := ref.Chunks[i]
			if c.Values != w.Values || c.Uncompressed != w.Uncompressed || c.Leaf != w.Leaf || c.Codec != w.Codec ||
				c.Offset < w.Offset || c.End > w.End {
				t.Fatalf("opened chunk %d as %+v; the file's is %+v", i, c, w)
			}
		}
		var batch column.Batch
		_ = d.Decode(context.Background(), u, &batch)
	})
}
