package decode

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// rewriteFooter rewrites the footer of the Parquet file at path with
// edit applied, keeping every page byte as it was: the footer's numbers are
// the writer's word, and a hostile writer can put any there.
func rewriteFooter(t testing.TB, path string, edit func(md *format.FileMetaData)) {
	t.Helper()
	b, n, md := readFileFooter(t, path)
	edit(md)
	footer, err := thrift.Marshal(&thrift.CompactProtocol{}, md)
	if err != nil {
		t.Fatal(err)
	}
	out := append([]byte(nil), b[:len(b)-8-n]...)
	out = append(out, footer...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(footer)))
	out = append(out, "PAR1"...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// claimRows rewrites the footer of the file at path to claim n rows in
// its first row group, and n values in each of its column chunks.
func claimRows(t testing.TB, path string, n int64) {
	t.Helper()
	rewriteFooter(t, path, func(md *format.FileMetaData) {
		md.NumRows = n
		g := &md.RowGroups[0]
		g.NumRows = n
		for i := range g.Columns {
			g.Columns[i].MetaData.NumValues = n
		}
	})
}

// readFileFooter reads the Parquet file at path: its bytes, its footer's
// length and the footer.
func readFileFooter(t testing.TB, path string) ([]byte, int, *format.FileMetaData) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := int(binary.LittleEndian.Uint32(b[len(b)-8:]))
	md := new(format.FileMetaData)
	if err := thrift.Unmarshal(&thrift.CompactProtocol{}, b[len(b)-8-n:len(b)-8], md); err != nil {
		t.Fatal(err)
	}
	return b, n, md
}

// leafOf returns the index of the leaf column chunk whose path starts
// with name.
func leafOf(t testing.TB, g *format.RowGroup, name string) int {
	t.Helper()
	for i := range g.Columns {
		if p := g.Columns[i].MetaData.PathInSchema; len(p) > 0 && p[0] == name {
			return i
		}
	}
	t.Fatalf("no column %q", name)
	return -1
}

// allocatedBy runs fn and returns the bytes it allocated (all
// goroutines; the test runs alone).
func allocatedBy(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

func sizeOf(t testing.TB, path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestPlanRefusesRowsPastChunkValues: a row group's num_rows is the
// footer's word, and with max_unit_rows set the planner used to make
// num_rows/max_unit_rows units whatever the file held: a 10 KiB file
// claiming 2^40 rows with max_unit_rows 16384 made 2^26 units, tens of GB
// in the shared daemon, before a page was read. Every row has a level in
// every leaf column, so a row group claiming more rows than a chunk's
// num_values is refused (checkGroupRows), naming the column.
func TestPlanRefusesRowsPastChunkValues(t *testing.T) {
	p := filepath.Join(t.TempDir(), "rows.parquet")
	writeFile(t, p, fileSpec{rows: 100, codec: "snappy", pageVersion: 1})
	const claimed = 1 << 16
	rewriteFooter(t, p, func(md *format.FileMetaData) {
		md.NumRows = claimed
		md.RowGroups[0].NumRows = claimed
	})
	size := sizeOf(t, p)
	var plan *Plan
	var err error
	alloc := allocatedBy(func() {
		plan, err = PlanFiles(context.Background(), []string{p}, PlanOptions{Columns: []string{"row_id"}, MaxUnitRows: 1})
	})
	units := 0
	if plan != nil {
		units = len(plan.Units)
	}
	t.Logf("file of %d bytes: err %v, %d units, %d bytes allocated planning", size, err, units, alloc)
	if err == nil || units > 1000 || alloc > 16<<20 {
		t.Fatalf("a file of %d bytes whose row group claims %d rows (its chunk declares 100 values) planned into %d units, %d MiB allocated; want an error",
			size, claimed, units, alloc>>20)
	}
}

// TestPlanUnitsCappedByFileSize: when the chunks' num_values lie along
// with num_rows, planning still makes at most maxFileUnits units of a
// file (one a byte, and 1024), and says to raise max_unit_rows.
func TestPlanUnitsCappedByFileSize(t *testing.T) {
	p := filepath.Join(t.TempDir(), "rows.parquet")
	writeFile(t, p, fileSpec{rows: 100, codec: "snappy", pageVersion: 1})
	const claimed = 1 << 30
	claimRows(t, p, claimed)
	var err error
	alloc := allocatedBy(func() {
		_, err = PlanFiles(context.Background(), []string{p}, PlanOptions{Columns: []string{"row_id"}, MaxUnitRows: 1 << 10})
	})
	t.Logf("err %v, %d bytes allocated planning", err, alloc)
	if err == nil || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "max_unit_rows") {
		t.Fatalf("a %d-byte file claiming %d rows planned at 1024 rows a unit: %v; want an error naming max_unit_rows", sizeOf(t, p), claimed, err)
	}
	if alloc > 16<<20 {
		t.Fatalf("%d MiB allocated planning", alloc>>20)
	}
}

// TestListSelectionReserveBounded: reserveSel (chunk.go) reserved a list
// column's values for a selection from the chunk's
// total_uncompressed_size, the footer's word, unbounded: a file of a few
// KiB whose footer says 256 MiB made a 320 MiB buffer, and 2^40 made the
// runtime die of "out of memory" (fatal, not a panic DecodeColumn can
// recover). It is now bounded like reserveWhole (storedBound).
func TestListSelectionReserveBounded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "list.parquet")
	writeFile(t, p, fileSpec{rows: 100, codec: "snappy", pageVersion: 1})
	const claimed = 256 << 20
	rewriteFooter(t, p, func(md *format.FileMetaData) {
		g := &md.RowGroups[0]
		g.Columns[leafOf(t, g, "seq_0")].MetaData.TotalUncompressedSize = claimed
	})
	size := sizeOf(t, p)
	plan := planPaths(t, PlanOptions{Columns: []string{"seq_0"}}, p)
	d := NewDecoder(plan.Fields)
	defer d.Close()
	if err := d.Open(context.Background(), plan.Units[0]); err != nil {
		t.Fatal(err)
	}
	var col column.Column
	var err error
	sel := make([]int32, 100) // every row: est = Uncompressed/Rows*k = Uncompressed
	for i := range sel {
		sel[i] = int32(i)
	}
	alloc := allocatedBy(func() { err = d.DecodeColumn(0, sel, &col) })
	t.Logf("file of %d bytes: err %v, cap(Data) %d, %d bytes allocated", size, err, cap(col.Data), alloc)
	if alloc > 16<<20 {
		t.Fatalf("a selection of a %d-byte file allocated %d MiB (cap(Data) %d): reserved from the footer's total_uncompressed_size",
			size, alloc>>20, cap(col.Data))
	}
}

// TestGrowDataBoundedByStoredBytes: growData (decoder.go) sized a unit's
// column from the unit's declared rows and the chunk's declared
// num_values (d.want, d.wantMax), both the footer's word: a few-KiB file
// whose row group claims 2^22 rows allocated 32 MiB before failing, and
// 2^31-1 rows 16 GiB a column. Its estimate is now bounded by the stored
// bytes (storedBound), and the decode still fails.
func TestGrowDataBoundedByStoredBytes(t *testing.T) {
	for _, codec := range []string{"snappy"} {
		for _, v := range []int{1, 2} {
			t.Run(codec+"/v"+string(rune('0'+v)), func(t *testing.T) {
				p := filepath.Join(t.TempDir(), "grow.parquet")
				writeFile(t, p, fileSpec{rows: 1000, codec: codec, pageVersion: v, pageBytes: 1024})
				const claimed = 1 << 22
				claimRows(t, p, claimed)
				size := sizeOf(t, p)
				plan := planPaths(t, PlanOptions{Columns: []string{"row_id", "seq_0"}}, p)
				d := NewDecoder(plan.Fields)
				defer d.Close()
				if err := d.Open(context.Background(), plan.Units[0]); err != nil {
					t.Fatal(err)
				}
				for fi := range plan.Fields {
					var col column.Column
					var err error
					alloc := allocatedBy(func() { err = d.DecodeColumn(fi, nil, &col) })
					t.Logf("%s: file of %d bytes: err %v, %d bytes allocated", plan.Fields[fi].Name, size, err, alloc)
					if err == nil {
						t.Errorf("%s: decoded a chunk claiming %d rows", plan.Fields[fi].Name, claimed)
					}
					if alloc > 8<<20 {
						t.Errorf("%s: a %d-byte file claiming %d rows allocated %d MiB before failing", plan.Fields[fi].Name, size, claimed, alloc>>20)
					}
				}
			})
		}
	}
}

// rawV2Page returns a v2 data page, uncompressed, whose header says
// it holds n values, nulls of them, in n rows, with the given level and
// value bytes.
func rawV2Page(t testing.TB, n, nulls int32, def, vals []byte) []byte {
	t.Helper()
	body := append(append([]byte(nil), def...), vals...)
	h := format.PageHeader{
		Type: format.DataPageV2, UncompressedPageSize: int32(len(body)), CompressedPageSize: int32(len(body)),
		DataPageHeaderV2: thrift.New(format.DataPageHeaderV2{NumValues: n, NumNulls: nulls, NumRows: n, Encoding: format.Plain,
			DefinitionLevelsByteLength: int32(len(def)), IsCompressed: thrift.New(false)}),
	}
	b, err := thrift.Marshal(&thrift.CompactProtocol{}, &h)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, body...)
}

// TestPageRowsPastTheRowGroup: a data page's num_values was bounded only
// by the chunk's declared num_values (pageKind), never by the rows its
// row group has: a page of a few bytes whose definition levels are one
// RLE run of 2^22 nulls (valid RLE: a run's count is a varint) was
// decoded whole, 2^22 levels, validity bytes and null values, into a
// 100-row unit's column and only then cut to 100 rows (~40 MiB; at
// 2^31-1 values some 20 GiB). The same held for required PLAIN pages,
// whose values were sized from num_values before fixedAt saw there were
// no value bytes. A page whose rows run past the unit's row group
// (Unit.GroupRowCount) is now refused before anything is sized by it.
func TestPageRowsPastTheRowGroup(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f.parquet")
	writeFile(t, p, fileSpec{rows: 100, codec: "none", pageVersion: 2})
	plan := planPaths(t, PlanOptions{Columns: []string{"dense_opt", "row_id"}}, p)
	u := plan.Units[0]
	const n = 1 << 22
	for _, c := range []struct {
		name  string
		fi    int
		nulls int32
		def   []byte
	}{
		{"optional, all null (valid RLE)", 0, n, binary.AppendUvarint(nil, n<<1)},
		{"required PLAIN, no value bytes", 1, 0, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			def := c.def
			if def != nil {
				def = append(def, 0) // the run's level: 0, null
			}
			raw := rawV2Page(t, n, c.nulls, def, nil)
			d := NewDecoder(plan.Fields)
			defer d.Close()
			ch := u.Chunks[c.fi]
			ch.DictLen, ch.FirstRow = 0, 0
			ch.Values = n // the footer's num_values, the writer's word like the page's
			d.unit, d.ctx, d.open = u, context.Background(), true
			var col column.Column
			d.resetColumn(c.fi, &col)
			var err error
			alloc := allocatedBy(func() {
				var pr pageReader
				pr.resetBytes(raw, &d.hdr)
				err = d.decodePages(c.fi, &ch, &pr, nil, &col)
			})
			t.Logf("page of %d bytes, unit of %d rows: err %v, %d rows, %d bytes allocated", len(raw), u.Rows, err, col.Len, alloc)
			if alloc > 8<<20 {
				t.Fatalf("a %d-byte page declaring %d values for a %d-row unit allocated %d MiB", len(raw), n, u.Rows, alloc>>20)
			}
		})
	}
}

// TestSliceLinearInPages: sliceRowGroup (plan.go) used to scan every
// page location of the heaviest column's OffsetIndex for each cut, and
// narrowChunk every location of every column for each unit: a row group
// of L pages sliced at about a page per unit cost L^2 steps, hours of a
// daemon planner for 10^6 pages (a 1 GB row group of 1 KB pages, or a
// hostile OffsetIndex of 16 MiB over a chunk of 1 MB). The cut walk now
// moves one index over the pages and narrowChunk searches them, so the
// steps (counted by sliceSteps, not timed) are about pages + units x 2
// log2(pages): 4x the pages may take a little over 4x the steps, never
// 16x.
func TestSliceLinearInPages(t *testing.T) {
	planSteps := func(n int64) (int64, int) {
		_, dir := generatedPlan(t, n, n, 1)
		before := sliceSteps.Load()
		plan, err := PlanFiles(context.Background(), []string{dir}, PlanOptions{Columns: []string{"label"}, MaxUnitRows: 1})
		if err != nil {
			t.Fatal(err)
		}
		return sliceSteps.Load() - before, len(plan.Units)
	}
	small, su := planSteps(3000)
	large, lu := planSteps(12000)
	t.Logf("%d units: %d steps; %d units: %d steps", su, small, lu, large)
	if su < 3000 || lu < 12000 {
		t.Fatalf("%d and %d units: the row groups were not sliced a page a unit", su, lu)
	}
	for _, c := range []struct {
		units int
		steps int64
	}{{su, small}, {lu, large}} {
		log2 := int64(bits.Len(uint(c.units)))
		if bound := int64(c.units) * (2*(log2+1) + 1); c.steps > bound {
			t.Errorf("%d units of as many pages took %d steps, over pages + units x 2 log2(pages) (%d): quadratic in the pages", c.units, c.steps, bound)
		}
	}
	if ratio := float64(large) / float64(small); ratio > 6 {
		t.Errorf("slicing 4x the pages took %.1fx the steps (%d, %d): quadratic in the pages", ratio, small, large)
	}
}

// rewriteOffsetIndex rewrites the OffsetIndex of column name in
// row group 0 of the file at path with edit applied: the new index is
// written after the pages, and the footer points at it.
func rewriteOffsetIndex(t testing.TB, path, name string, edit func(oi *format.OffsetIndex)) {
	t.Helper()
	b, n, md := readFileFooter(t, path)
	cc := &md.RowGroups[0].Columns[leafOf(t, &md.RowGroups[0], name)]
	if cc.OffsetIndexLength <= 0 {
		t.Fatalf("column %s has no offset index", name)
	}
	oi := new(format.OffsetIndex)
	if err := thrift.Unmarshal(&thrift.CompactProtocol{}, b[cc.OffsetIndexOffset:cc.OffsetIndexOffset+int64(cc.OffsetIndexLength)], oi); err != nil {
		t.Fatal(err)
	}
	edit(oi)
	raw, err := thrift.Marshal(&thrift.CompactProtocol{}, oi)
	if err != nil {
		t.Fatal(err)
	}
	out := append([]byte(nil), b[:len(b)-8-n]...)
	cc.OffsetIndexOffset, cc.OffsetIndexLength = int64(len(out)), int32(len(raw))
	out = append(out, raw...)
	footer, err := thrift.Marshal(&thrift.CompactProtocol{}, md)
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, footer...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(footer)))
	out = append(out, "PAR1"...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// decodeAllInt decodes every unit of plan and returns each field's
// values, row by row, as int64s.
func decodeAllInt(t testing.TB, plan *Plan) ([][]int64, error) {
	d := NewDecoder(plan.Fields)
	defer d.Close()
	out := make([][]int64, len(plan.Fields))
	var b column.Batch
	for _, u := range plan.Units {
		if err := d.Decode(context.Background(), u, &b); err != nil {
			return nil, err
		}
		for i := range b.Columns {
			c := &b.Columns[i]
			for r := range c.Len {
				switch c.DType {
				case column.Int64:
					out[i] = append(out[i], c.Int64s()[r])
				case column.Int32:
					out[i] = append(out[i], int64(c.Int32s()[r]))
				}
			}
		}
	}
	return out, nil
}

// TestLyingOffsetIndexSlicesRefused: with max_unit_rows set, the planner
// cuts row groups at pages the OffsetIndex lists, and each unit of a
// column starts decoding at the page the index says holds the unit's
// first row, taking that page's first_row_index (narrowChunk, plan.go,
// into Chunk.FirstRow) as the truth. An OffsetIndex whose
// first_row_index values are shifted (each page but the first said to
// start 5 rows late) made that column's rows of every unit after the
// first come from the wrong rows, silently. The planner now checks the
// index against the page headers (checkOffsetIndex) and refuses it; a
// decode that gave the true rows would be sound too, other rows never.
func TestLyingOffsetIndexSlicesRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "oi.parquet")
	writeFile(t, p, fileSpec{rows: 2000, codec: "none", pageVersion: 2, pageBytes: 1024})
	honest, err := decodeAllInt(t, planPaths(t, PlanOptions{Columns: []string{"row_id", "label"}, MaxUnitRows: 500}, p))
	if err != nil {
		t.Fatal(err)
	}
	pages := 0
	rewriteOffsetIndex(t, p, "label", func(oi *format.OffsetIndex) {
		pages = len(oi.PageLocations)
		for i := 1; i < len(oi.PageLocations); i++ {
			oi.PageLocations[i].FirstRowIndex += 5
		}
	})
	if pages < 4 {
		t.Fatalf("only %d pages", pages)
	}
	plan, err := PlanFiles(context.Background(), []string{p}, PlanOptions{Columns: []string{"row_id", "label"}, MaxUnitRows: 500})
	if err != nil {
		var e *Error
		if !errors.As(err, &e) || e.Column != "label" || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("refused, but not as a corrupt label column: %v", err)
		}
		t.Logf("refused at planning: %v", err)
		return // refused: sound
	}
	got, err := decodeAllInt(t, plan)
	t.Logf("%d pages, %d units: err %v", pages, len(plan.Units), err)
	if err != nil {
		return // refused: sound
	}
	for fi := range got {
		if len(got[fi]) != len(honest[fi]) {
			t.Fatalf("%s: %d rows, want %d", plan.Fields[fi].Name, len(got[fi]), len(honest[fi]))
		}
		for r := range got[fi] {
			if got[fi][r] != honest[fi][r] {
				t.Fatalf("%s row %d: %d, the file holds %d (a shifted OffsetIndex returned other rows, no error)",
					plan.Fields[fi].Name, r, got[fi][r], honest[fi][r])
			}
		}
	}
}

// TestLyingOffsetIndexSelectionRefused: a selection's decode skips the
// pages holding no selected row by the OffsetIndex and takes the next
// page's first_row_index as the row it reaches (skipByIndex,
// pageindex.go). The check "page at offset X starts at row R, its offset
// index says S" compared the index with itself after a skip, so an index
// whose pages after the first are all said to start 5 rows early went
// unnoticed and the selected rows were read 5 rows off. Skipped pages'
// headers are now checked against the index, and the decode fails.
func TestLyingOffsetIndexSelectionRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "oi.parquet")
	writeFile(t, p, fileSpec{rows: 2000, codec: "none", pageVersion: 2, pageBytes: 1024})
	pages := 0
	rewriteOffsetIndex(t, p, "row_id", func(oi *format.OffsetIndex) {
		pages = len(oi.PageLocations)
		for i := 1; i < len(oi.PageLocations); i++ {
			oi.PageLocations[i].FirstRowIndex -= 5
		}
	})
	plan := planPaths(t, PlanOptions{Columns: []string{"row_id"}}, p)
	d := NewDecoder(plan.Fields)
	defer d.Close()
	if err := d.Open(context.Background(), plan.Units[0]); err != nil {
		t.Fatal(err)
	}
	var all column.Column
	if err := d.DecodeColumn(0, nil, &all); err != nil {
		t.Fatal(err)
	}
	var sel []int32
	for r := int32(1000); r < 1300; r += 3 { // past the first pages, before the last
		sel = append(sel, r)
	}
	var some column.Column
	err := d.DecodeColumn(0, sel, &some)
	st := d.Stats()
	t.Logf("%d pages, %d skipped unread: err %v", pages, st.PagesUnread, err)
	if err != nil {
		return // refused: sound
	}
	for i, r := range sel {
		if got, want := some.Int64s()[i], all.Int64s()[r]; got != want {
			t.Fatalf("selected row %d: %d, the unfiltered decode says %d (an OffsetIndex said its pages start 5 rows early; no error)", r, got, want)
		}
	}
}

// TestHugeRowGroupNotDropped: sliceRowGroup (plan.go) counted its slices
// as (NumRows + max - 1) / max, which overflows for a row group claiming
// close to 2^63 rows: the count went negative, no slice was cut, and the
// row group yielded no unit at all while the plan still counted its
// rows. The file is corrupt, and is refused, not read as if the row
// group were not there.
func TestHugeRowGroupNotDropped(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.parquet")
	writeFile(t, p, fileSpec{rows: 100, codec: "snappy", pageVersion: 2})
	rewriteFooter(t, p, func(md *format.FileMetaData) {
		md.NumRows = math.MaxInt64
		md.RowGroups[0].NumRows = math.MaxInt64
	})
	// Without the OffsetIndex: cut evenly (with it, the same row group
	// makes 2^43 cuts: TestPlanRefusesRowsPastChunkValues's OOM).
	plan, err := PlanFiles(context.Background(), []string{p}, PlanOptions{Columns: []string{"row_id"}, MaxUnitRows: 1 << 20, IgnoreOffsetIndex: true})
	if err != nil {
		t.Logf("refused: %v", err)
		return
	}
	t.Logf("%d units, plan rows %d, file rows %d", len(plan.Units), plan.Rows, plan.Files[0].Rows)
	var covered int64
	for _, u := range plan.Units {
		covered += u.Rows
	}
	if covered != plan.Files[0].Rows {
		t.Fatalf("the row group claims %d rows; its units cover %d (%d units), and planning did not fail", plan.Files[0].Rows, covered, len(plan.Units))
	}
}

// TestSliceEvenCutsNoOverflow: even cuts of a row group near 2^63 rows
// are counted and placed without overflow: every row is in exactly one
// unit, none over max_unit_rows.
func TestSliceEvenCutsNoOverflow(t *testing.T) {
	for _, c := range []struct{ rows, max int64 }{
		{math.MaxInt64, math.MaxInt64 / 2},
		{math.MaxInt64, math.MaxInt64 - 1},
		{math.MaxInt64 - 5, 1 << 61},
		{1000, 7},
	} {
		g := &format.RowGroup{NumRows: c.rows}
		base := Unit{Rows: c.rows, GroupRowCount: c.rows}
		units, err := sliceRowGroup(context.Background(), nil, 1<<20, g, nil, base, PlanOptions{MaxUnitRows: c.max, IgnoreOffsetIndex: true}, 1<<20)
		if err != nil {
			t.Fatalf("%d rows by %d: %v", c.rows, c.max, err)
		}
		next := int64(0)
		for _, u := range units {
			if u.RowStart != next || u.Rows <= 0 || u.Rows > c.max {
				t.Fatalf("%d rows by %d: unit [%d, +%d) after row %d", c.rows, c.max, u.RowStart, u.Rows, next)
			}
			next += u.Rows
		}
		if next != c.rows {
			t.Fatalf("%d rows by %d: %d units cover %d rows", c.rows, c.max, len(units), next)
		}
	}
}
