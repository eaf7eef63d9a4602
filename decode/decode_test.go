package decode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lastmile/lastmile/column"
)

// checkPlan decodes every unit of plan with one decoder and compares each
// column with expectColumn; it also checks the units cover the rows once.
func checkPlan(t *testing.T, plan *Plan, firstID func(u Unit) int64) {
	t.Helper()
	d := NewDecoder(plan.Fields)
	defer d.Close()
	var b column.Batch
	var next int64
	for _, u := range plan.Units {
		if u.Ordinal != next {
			t.Fatalf("unit %d ordinal %d, want %d", u.Seq, u.Ordinal, next)
		}
		next += u.Rows
		if err := d.Decode(context.Background(), u, &b); err != nil {
			t.Fatal(err)
		}
		if err := b.Check(); err != nil {
			t.Fatal(err)
		}
		ids := make([]int64, u.Rows)
		for i := range ids {
			ids[i] = firstID(u) + int64(i)
		}
		for i := range b.Columns {
			want := expectColumn(b.Columns[i].Name, ids)
			if diff := diffColumn(&b.Columns[i], &want); diff != "" {
				t.Fatalf("unit %d (rg %d rows [%d,+%d)): %s", u.Seq, u.RowGroup, u.RowStart, u.Rows, diff)
			}
		}
	}
	if next != plan.Rows {
		t.Fatalf("units cover %d rows, plan says %d", next, plan.Rows)
	}
}

func TestDecodeFormats(t *testing.T) {
	rows := int64(3000)
	if testing.Short() || raceEnabled {
		rows = 1200
	}
	for _, version := range []int{1, 2} {
		for _, codec := range []string{"none", "snappy", "zstd"} {
			for _, maxRows := range []int64{0, 250} {
				for _, noOI := range []bool{false, true} {
					if maxRows == 0 && noOI {
						continue
					}
					name := fmt.Sprintf("v%d/%s/max%d/noOI=%v", version, codec, maxRows, noOI)
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						p := filepath.Join(t.TempDir(), "f.parquet")
						writeFile(t, p, fileSpec{rows: rows, rowGroupRows: 1000, codec: codec, pageVersion: version, pageBytes: 2048})
						plan, err := PlanFiles(context.Background(), []string{p}, PlanOptions{MaxUnitRows: maxRows, IgnoreOffsetIndex: noOI})
						if err != nil {
							t.Fatal(err)
						}
						for _, u := range plan.Units {
							if maxRows > 0 && u.Rows > maxRows {
								t.Fatalf("unit of %d rows, max %d", u.Rows, maxRows)
							}
						}
						checkPlan(t, plan, func(u Unit) int64 { return u.Ordinal })
					})
				}
			}
		}
	}
}

func TestDecodeSelection(t *testing.T) {
	for _, version := range []int{1, 2} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "f.parquet")
			writeFile(t, p, fileSpec{rows: 2000, rowGroupRows: 2000, codec: "snappy", pageVersion: version, pageBytes: 1024})
			plan, err := PlanFiles(context.Background(), []string{p}, PlanOptions{MaxUnitRows: 700})
			if err != nil {
				t.Fatal(err)
			}
			d := NewDecoder(plan.Fields)
			defer d.Close()
			sels := map[string]func(n int64) []int32{
				"none":   func(n int64) []int32 { return []int32{} },
				"first":  func(n int64) []int32 { return []int32{0} },
				"last":   func(n int64) []int32 { return []int32{int32(n - 1)} },
				"every7": func(n int64) []int32 { return stride(n, 7, 0) },
				"all":    func(n int64) []int32 { return stride(n, 1, 0) },
				"block": func(n int64) []int32 {
					var s []int32
					for i := n / 3; i < n/2; i++ {
						s = append(s, int32(i))
					}
					return s
				},
			}
			var col column.Column
			for _, u := range plan.Units {
				if err := d.Open(context.Background(), u); err != nil {
					t.Fatal(err)
				}
				for sname, mk := range sels {
					sel := mk(u.Rows)
					ids := make([]int64, len(sel))
					for i, s := range sel {
						ids[i] = u.Ordinal + int64(s)
					}
					for fi, f := range plan.Fields {
						if err := d.DecodeColumn(fi, sel, &col); err != nil {
							t.Fatal(err)
						}
						want := expectColumn(f.Name, ids)
						if diff := diffColumn(&col, &want); diff != "" {
							t.Fatalf("unit %d sel %s: %s", u.Seq, sname, diff)
						}
					}
				}
			}
			if err := d.DecodeColumn(0, []int32{3, 2}, &col); err == nil {
				t.Fatal("unsorted selection accepted")
			}
		})
	}
}

func stride(n, k, off int64) []int32 {
	var s []int32
	for i := off; i < n; i += k {
		s = append(s, int32(i))
	}
	return s
}

func TestDecodeCancel(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f.parquet")
	writeFile(t, p, fileSpec{rows: 500, codec: "snappy"})
	plan, err := PlanFiles(context.Background(), []string{p}, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d := NewDecoder(plan.Fields)
	defer d.Close()
	var b column.Batch
	if err := d.Decode(ctx, plan.Units[0], &b); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if _, err := PlanFiles(ctx, []string{p}, PlanOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("plan: got %v, want context.Canceled", err)
	}
}

// oneColumnFile writes a file of spec, plans its column col, and returns
// the file's path, the plan, its first unit and the file's bytes.
func oneColumnFile(t *testing.T, spec fileSpec, col string) (string, *Plan, Unit, []byte) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f.parquet")
	writeFile(t, p, spec)
	plan, err := PlanFiles(context.Background(), []string{p}, PlanOptions{Columns: []string{col}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, plan, plan.Units[0], raw
}

// TestSelectionSkipsPages corrupts the first data page of a v2 column and
// selects only rows after it: the page must be skipped undecompressed.
// Selecting a row in it must then fail, naming the page.
func TestSelectionSkipsPages(t *testing.T) {
	p, plan, u, raw := oneColumnFile(t, fileSpec{rows: 2000, codec: "snappy", pageVersion: 2, pageBytes: 1024}, "seq_0")
	c := u.Chunks[0]
	var h pageHeader
	off := int(c.Offset)
	for {
		n, err := parsePageHeader(raw[off:], &h)
		if err != nil {
			t.Fatal(err)
		}
		if h.typ == pageDataV2 {
			body := raw[off+n+int(h.repLen+h.defLen) : off+n+int(h.compressed)]
			for i := range body {
				body[i] ^= 0x5a
			}
			break
		}
		off += n + int(h.compressed)
	}
	firstRows := int64(h.numRows)
	if firstRows >= u.Rows {
		t.Fatalf("one page holds all %d rows", firstRows)
	}
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	// Same size; restore the planned modification time.
	mt := time.Unix(0, u.ModTime)
	os.Chtimes(p, mt, mt)
	d := NewDecoder(plan.Fields)
	defer d.Close()
	if err := d.Open(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	var col column.Column
	sel := stride(u.Rows, 3, firstRows)
	if err := d.DecodeColumn(0, sel, &col); err != nil {
		t.Fatalf("selection after the corrupt page: %v", err)
	}
	ids := make([]int64, len(sel))
	for i, s := range sel {
		ids[i] = int64(s)
	}
	want := expectColumn("seq_0", ids)
	if diff := diffColumn(&col, &want); diff != "" {
		t.Fatal(diff)
	}
	err := d.DecodeColumn(0, []int32{0}, &col)
	var e *Error
	if !errors.As(err, &e) || e.PageOffset != int64(off) || e.Column != "seq_0" {
		t.Fatalf("selecting row 0: got %v, want an error at page offset %d", err, off)
	}
}

// TestSmallReadWindow decodes with windows far smaller than pages, so that
// every page and most headers straddle a window boundary.
func TestSmallReadWindow(t *testing.T) {
	old := readWindow
	defer func() { readWindow = old }()
	for _, w := range []int64{1, 97, 3000} {
		readWindow = w
		for _, version := range []int{1, 2} {
			p := filepath.Join(t.TempDir(), "f.parquet")
			writeFile(t, p, fileSpec{rows: 700, rowGroupRows: 300, codec: "snappy", pageVersion: version, pageBytes: 2048})
			plan, err := PlanFiles(context.Background(), []string{p}, PlanOptions{MaxUnitRows: 200})
			if err != nil {
				t.Fatal(err)
			}
			checkPlan(t, plan, func(u Unit) int64 { return u.Ordinal })
		}
	}
}

// TestPageCRC flips one byte in the values of an uncompressed page, which
// no decompressor would notice and which keeps the file's size and mtime:
// decoding the page fails on its CRC, naming the page.
func TestPageCRC(t *testing.T) {
	p, plan, u, raw := oneColumnFile(t, fileSpec{rows: 2000, codec: "none", pageVersion: 1, pageBytes: 1024}, "dense_0")
	var h pageHeader
	off := int(u.Chunks[0].Offset)
	for {
		n, err := parsePageHeader(raw[off:], &h)
		if err != nil {
			t.Fatal(err)
		}
		if h.typ == pageData {
			if !h.hasCRC {
				t.Skip("the writer gave no page CRC")
			}
			raw[off+n+int(h.compressed)-3] ^= 0x40 // a float's exponent bits
			break
		}
		off += n + int(h.compressed)
	}
	os.WriteFile(p, raw, 0o644)
	mt := time.Unix(0, u.ModTime)
	os.Chtimes(p, mt, mt)
	d := NewDecoder(plan.Fields)
	defer d.Close()
	var b column.Batch
	err := d.Decode(context.Background(), u, &b)
	if err == nil || !strings.Contains(err.Error(), "CRC") || !strings.Contains(err.Error(), fmt.Sprintf("offset %d", off)) {
		t.Fatalf("decode of a page with a flipped byte: %v; want a CRC error naming the page at offset %d", err, off)
	}
}
