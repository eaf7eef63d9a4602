package decode

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/parquet-go/parquet-go/format"
)

// FuzzPlanFooter feeds mutated footers (the file's thrift metadata: its
// schema, row groups, chunk offsets, statistics, page index locations) of
// real files to the planner, and decodes every unit of a plan it accepts.
// A footer is what a user hands lastmiled when they name a file, so
// planning and decoding it must end in a plan or an error naming the
// problem: never a panic (the decoder turns its own into "decoder panic"
// errors, which count as failures here), a hang, or a decoded batch that
// fails its checks.
func FuzzPlanFooter(f *testing.F) {
	var seeds []string
	for _, s := range []fileSpec{
		{rows: 120, codec: "snappy", pageVersion: 1, pageBytes: 512},
		{rows: 120, rowGroupRows: 50, codec: "none", pageVersion: 2, pageBytes: 512},
	} {
		p := filepath.Join(f.TempDir(), "seed.parquet")
		writeFile(f, p, s)
		seeds = append(seeds, p)
	}
	// A file whose columns carry field ids, as Iceberg's writers store
	// them (fieldid.go).
	ided := filepath.Join(f.TempDir(), "ids.parquet")
	writePG(f, ided, []idRowBefore{{1, 0.5, []int64{1}}, {2, 1, nil}, {3, 1.5, []int64{3, 4}}}, "snappy", 1)
	seeds = append(seeds, ided)
	for _, dir := range []string{"small", "weighted"} {
		m, _ := filepath.Glob(filepath.Join("..", "testdata", dir, "*.parquet"))
		seeds = append(seeds, m...)
	}
	// Each seed is a file's body (everything before its footer) and its
	// footer; the fuzzer mutates both, the footer most usefully.
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		n := int(binary.LittleEndian.Uint32(b[len(b)-8:]))
		body, footer := b[:len(b)-8-n], b[len(b)-8-n:len(b)-8]
		f.Add(append([]byte(nil), body...), append([]byte(nil), footer...))
	}
	path := filepath.Join(f.TempDir(), "fuzz.parquet")
	f.Fuzz(func(t *testing.T, body, footer []byte) {
		if len(body) > 1<<20 || len(footer) > 1<<20 {
			return
		}
		var file bytes.Buffer
		file.Write(body)
		file.Write(footer)
		file.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(footer))))
		file.WriteString("PAR1")
		if err := os.WriteFile(path, file.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		planAndDecode(t, path)
	})
}

// planAndDecode plans path and decodes every unit, failing t on a panic or
// on output that does not match its plan.
func planAndDecode(t *testing.T, path string) {
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic: %v", r)
		}
	}()
	ctx := context.Background()
	// By name, and by field id as an Iceberg table's data files are
	// read (the names a table gives the seeds' columns' ids).
	table := &TableSchema{IDs: map[string]int32{"id": 1, "score": 4, "tags": 5, "row_id": 2}, Mapped: map[string]int32{"points": 4}}
	byID := func(string) *TableSchema { return table }
	// And with a column added since (read as nulls), every column in
	// the table's order.
	added := &TableSchema{IDs: map[string]int32{"id": 1, "score": 4, "tags": 5, "extra": 12}, Mapped: table.Mapped,
		Stored:   map[int32][]format.SchemaElement{12: optionalDouble("extra", 12), 5: optionalLongList("tags", 5)},
		Nullable: map[int32]bool{12: true, 5: true},
		Order:    []string{"id", "score", "tags", "extra"}}
	withAdded := func(string) *TableSchema { return added }
	for _, opts := range []PlanOptions{{}, {Table: byID}, {Columns: []string{"id", "score", "tags"}, Table: byID}, {Table: withAdded}} {
		plan, err := PlanFiles(ctx, []string{path}, opts)
		if err != nil {
			continue
		}
		decodeEvery(t, plan, opts.Table != nil)
	}
}

// decodeEvery decodes every unit of plan, failing t on output that does
// not match it; verify checks each unit against its file's footer first,
// as a CPU peer does.
func decodeEvery(t *testing.T, plan *Plan, verify bool) {
	ctx := context.Background()
	d := plan.NewDecoder()
	defer d.Close()
	if verify {
		d.VerifyUnits()
	}
	var b column.Batch
	for _, u := range plan.Units {
		if err := d.Decode(ctx, u, &b); err != nil {
			if strings.Contains(err.Error(), "decoder panic") {
				t.Fatalf("unit %d: %v", u.Seq, err)
			}
			continue
		}
		if int64(b.Rows) != u.Rows {
			t.Fatalf("unit %d: decoded %d rows, planned %d", u.Seq, b.Rows, u.Rows)
		}
		if err := b.Check(); err != nil {
			t.Fatalf("unit %d: decoded batch fails Check: %v", u.Seq, err)
		}
		selectByIndex(t, d, u)
	}
}

// selectByIndex reads unit u's page indexes as the engine does for a
// filter (PageBounds) and for a selection (DecodeColumn of every third
// row walks the OffsetIndex), failing t on a panic or a column that does
// not hold the rows selected.
func selectByIndex(t *testing.T, d *Decoder, u Unit) {
	ctx := context.Background()
	if err := d.Open(ctx, u); err != nil {
		return
	}
	sel := stride(u.Rows, 3, 0)
	for fi := range d.fields {
		if _, err := d.PageBounds(fi); err != nil {
			continue
		}
		var col column.Column
		err := d.DecodeColumn(fi, sel, &col)
		switch {
		case err != nil && strings.Contains(err.Error(), "decoder panic"):
			t.Fatalf("unit %d field %d: %v", u.Seq, fi, err)
		case err == nil && col.Len != len(sel):
			t.Fatalf("unit %d field %d: %d rows for a selection of %d", u.Seq, fi, col.Len, len(sel))
		}
	}
}
