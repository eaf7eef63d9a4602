package decode

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/format"
)

// readsFS is OSFS whose files record every ReadAt as a byte range.
type readsFS struct {
	mu    sync.Mutex
	reads []span
}

type readsFile struct {
	File
	fs *readsFS
}

func (r *readsFS) Open(name string) (File, error) {
	f, err := OSFS{}.Open(name)
	if err != nil {
		return nil, err
	}
	return readsFile{f, r}, nil
}
func (r *readsFS) Stat(name string) (fs.FileInfo, error)      { return os.Stat(name) }
func (r *readsFS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }

func (f readsFile) ReadAt(b []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	f.fs.reads = append(f.fs.reads, span{off, off + int64(len(b))})
	f.fs.mu.Unlock()
	return f.File.ReadAt(b, off)
}

func (r *readsFS) take() []span {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.reads
	r.reads = nil
	return s
}

// TestSelectionReadsOnlyWantedPages decodes selections that leave whole
// pages without a selected row, on v1 and v2 pages with an OffsetIndex,
// through an FS that records every read: no read may touch a page the
// selection skips, but for the header of one skipped before a selected
// row (its first headerProbe bytes: the header is checked against the
// index), the decoder's Stats count those pages and bytes, and
// the output is byte for byte the rows gathered from decoding everything.
func TestSelectionReadsOnlyWantedPages(t *testing.T) {
	rfs := &readsFS{}
	forIndexedFiles(t, rfs, func(t *testing.T, plan *Plan) {
		d := plan.NewDecoder()
		defer d.Close()
		ref := NewDecoder(plan.Fields)
		defer ref.Close()
		for _, u := range plan.Units {
			var all column.Batch
			if err := ref.Decode(context.Background(), u, &all); err != nil {
				t.Fatal(err)
			}
			for _, s := range selectionCases {
				checkSelectionReads(t, d, rfs, u, &all, s.name, s.make(u.Rows), s.skips)
			}
		}
	})
}

// selectionCases are selections of a unit's n rows, and whether they
// leave some page without a selected row in forIndexedFiles' files.
var selectionCases = []struct {
	name  string
	make  func(n int64) []int32
	skips bool // some page must go unread
}{
	{"none", func(n int64) []int32 { return []int32{} }, false},
	{"head", func(n int64) []int32 { return stride(10, 1, 0) }, true},
	{"tail", func(n int64) []int32 { return stride(n, 1, n-10) }, true},
	{"middle block", func(n int64) []int32 { return stride(n/2, 1, n/3) }, true},
	{"runs of 50 every 400", func(n int64) []int32 {
		var s []int32
		for i := int64(0); i < n; i++ {
			if i%400 < 50 {
				s = append(s, int32(i))
			}
		}
		return s
	}, true},
	{"every 3rd", func(n int64) []int32 { return stride(n, 3, 1) }, false},
	{"all", func(n int64) []int32 { return stride(n, 1, 0) }, false},
}

// forIndexedFiles runs fn, as a subtest, on a plan read through fsys of a
// 3,000-row snappy file of 1 KiB pages with a page index: with v1 and v2
// pages, and units whole and sliced at 1,100 rows.
func forIndexedFiles(t *testing.T, fsys FS, fn func(t *testing.T, plan *Plan)) {
	for _, version := range []int{1, 2} {
		for _, maxRows := range []int64{0, 1100} {
			t.Run(fmt.Sprintf("v%d/max%d", version, maxRows), func(t *testing.T) {
				p := filepath.Join(t.TempDir(), "f.parquet")
				writeFile(t, p, fileSpec{rows: 3000, codec: "snappy", pageVersion: version, pageBytes: 1024})
				plan, err := PlanFiles(context.Background(), []string{p}, PlanOptions{MaxUnitRows: maxRows, FS: fsys})
				if err != nil {
					t.Fatal(err)
				}
				fn(t, plan)
			})
		}
	}
}

// checkSelectionReads decodes every field of u for sel with d and checks
// the reads, the stats and the output (see the test above).
func checkSelectionReads(t *testing.T, d *Decoder, rfs *readsFS, u Unit, all *column.Batch, name string, sel []int32, skips bool) {
	t.Helper()
	if err := d.Open(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(u.File)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	unread := int64(0)
	for fi := range d.Fields() {
		c := &u.Chunks[fi]
		if c.IndexLen == 0 {
			t.Fatalf("field %s: no OffsetIndex in the plan", d.Fields()[fi].Name)
		}
		// The pages that hold no selected row, by the index.
		raw := make([]byte, c.IndexLen)
		if _, err := f.ReadAt(raw, c.Index); err != nil {
			t.Fatal(err)
		}
		var skipped []span
		var skippedBytes int64
		locs := indexPages(t, raw, c)
		if len(sel) == 0 {
			locs = nil // nothing is wanted: the decoder reads nothing at all
		}
		si := 0
		for k, l := range locs {
			if !holdsSelected(sel, &si, u.RowStart, l.first, pageEnd(locs, k)) {
				// A page skipped before a selected row has its header
				// read (its first headerProbe bytes), to check the
				// index's rows; nothing after them.
				probe := int64(0)
				if si < len(sel) {
					probe = min(headerProbe, l.end-l.off)
				}
				skipped = append(skipped, span{l.off + probe, l.end})
				skippedBytes += l.end - l.off - probe
			}
		}
		before := d.Stats()
		rfs.take()
		var got column.Column
		if err := d.DecodeColumn(fi, sel, &got); err != nil {
			t.Fatalf("%s, field %d: %v", name, fi, err)
		}
		reads := rfs.take()
		if len(sel) == 0 && len(reads) > 0 {
			t.Errorf("%s, field %s: %d reads for no row", name, got.Name, len(reads))
		}
		st := d.Stats()
		if n := st.PagesUnread - before.PagesUnread; n != int64(len(skipped)) {
			t.Errorf("%s, field %s: %d pages unread, want %d", name, got.Name, n, len(skipped))
		}
		if n := st.BytesUnread - before.BytesUnread; n != skippedBytes {
			t.Errorf("%s, field %s: %d bytes unread, want %d", name, got.Name, n, skippedBytes)
		}
		for _, r := range reads {
			for _, s := range skipped {
				if r.start < s.end && s.start < r.end {
					t.Fatalf("%s, field %s: read [%d, %d) touches the skipped page's bytes [%d, %d) (its header probe aside); reads %v locs %v chunk %+v", name, got.Name, r.start, r.end, s.start, s.end, reads, locs, *c)
				}
			}
		}
		unread += int64(len(skipped))
		// Byte-identical to gathering the rows from the whole decode.
		var want column.Batch
		want.Gather(&column.Batch{Rows: all.Rows, Columns: all.Columns[fi : fi+1]}, sel)
		w := &want.Columns[0]
		if got.Len != w.Len || !bytes.Equal(got.Data, w.Data) || !slices.Equal(got.Offsets, w.Offsets) ||
			!bytes.Equal(got.Valid, allValidNil(w.Valid)) {
			t.Fatalf("%s, field %s: the selection's output differs from the gathered rows:\n%+v\n%+v", name, got.Name, got, *w)
		}
	}
	if skips && unread == 0 {
		t.Errorf("%s: no page went unread", name)
	}
	if !skips && len(sel) == int(u.Rows) && unread != 0 {
		t.Errorf("%s: %d pages unread with every row selected", name, unread)
	}
}

// indexPages parses an OffsetIndex and keeps the pages within c's range.
func indexPages(t *testing.T, raw []byte, c *Chunk) []pageLoc {
	t.Helper()
	var oi format.OffsetIndex
	if err := unmarshalThrift(raw, &oi); err != nil {
		t.Fatal(err)
	}
	var locs []pageLoc
	for _, l := range oi.PageLocations {
		if l.Offset >= c.Offset && l.Offset < c.End {
			locs = append(locs, pageLoc{l.Offset, l.Offset + int64(l.CompressedPageSize), l.FirstRowIndex})
		}
	}
	return locs
}

// allValidNil is v, or nil when no row is null: the decoder's convention
// (Gather keeps an all-valid mask).
func allValidNil(v []byte) []byte {
	if bytes.IndexByte(v, 0) < 0 {
		return nil
	}
	return v
}

// BenchmarkSelectionPages decodes a list column for a selection that
// keeps runs of rows covering about half the pages, walking the pages by
// the OffsetIndex (skipped pages unread) and by their headers alone
// (skipped pages read, not decompressed), and everything with no
// selection for reference.
func BenchmarkSelectionPages(b *testing.B) {
	p := filepath.Join(b.TempDir(), "f.parquet")
	writeFile(b, p, fileSpec{rows: 100_000, codec: "snappy", pageVersion: 2, pageBytes: 64 << 10})
	plan, err := PlanFiles(context.Background(), []string{p}, PlanOptions{Columns: []string{"seq_0"}})
	if err != nil {
		b.Fatal(err)
	}
	u := plan.Units[0]
	var sel []int32
	for i := int64(0); i < u.Rows; i++ {
		if i%4000 < 2000 {
			sel = append(sel, int32(i))
		}
	}
	noIndex := u
	noIndex.Chunks = slices.Clone(u.Chunks)
	noIndex.Chunks[0].Index, noIndex.Chunks[0].IndexLen = 0, 0
	for _, c := range []struct {
		name string
		u    Unit
		sel  []int32
	}{{"index", u, sel}, {"headers", noIndex, sel}, {"all", u, nil}} {
		b.Run(c.name, func(b *testing.B) {
			d := NewDecoder(plan.Fields)
			defer d.Close()
			var col column.Column
			for b.Loop() {
				if err := d.Open(context.Background(), c.u); err != nil {
					b.Fatal(err)
				}
				if err := d.DecodeColumn(0, c.sel, &col); err != nil {
					b.Fatal(err)
				}
			}
			st := d.Stats()
			b.ReportMetric(float64(st.PagesUnread)/float64(b.N), "unread/op")
			b.ReportMetric(float64(st.PagesSkipped)/float64(b.N), "skipped/op")
		})
	}
}
