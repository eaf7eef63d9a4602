package datagen_test

import (
	"fmt"
	"io"
	"os"
	"slices"
	"testing"

	"github.com/lastmile/lastmile/datagen"
	"github.com/parquet-go/parquet-go"
)

// openFile opens a Parquet file with parquet-go.
func openFile(t testing.TB, path string) *parquet.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	return pf
}

// readRows reads every row of the files with parquet-go's row reader,
// independent of datagen's writer, and returns them in file order.
func readRows(t testing.TB, cfg datagen.Config, paths ...string) []datagen.Row {
	t.Helper()
	cols := datagen.Schema(cfg)
	var out []datagen.Row
	buf := make([]parquet.Row, 128)
	for _, path := range paths {
		pf := openFile(t, path)
		if got := len(pf.Schema().Columns()); got != len(cols) {
			t.Fatalf("%s: %d leaf columns, want %d", path, got, len(cols))
		}
		for _, rg := range pf.RowGroups() {
			rows := rg.Rows()
			for {
				n, err := rows.ReadRows(buf)
				for _, row := range buf[:n] {
					r, err := decodeRow(cols, row)
					if err != nil {
						t.Fatalf("%s: %v", path, err)
					}
					out = append(out, r)
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("read %s: %v", path, err)
				}
			}
			rows.Close()
		}
	}
	return out
}

func decodeRow(cols []datagen.ColumnInfo, row parquet.Row) (datagen.Row, error) {
	var r datagen.Row
	var err error
	row.Range(func(ci int, vals []parquet.Value) bool {
		c := cols[ci]
		if len(vals) == 0 {
			err = fmt.Errorf("column %s: no values", c.Name)
			return false
		}
		v := vals[0]
		null := v.IsNull()
		if !c.List && null && !c.Nullable {
			err = fmt.Errorf("column %s: null in a required column", c.Name)
			return false
		}
		var list []int64
		listValid := true
		if c.List {
			maxDef := 1
			if c.Nullable {
				maxDef = 2
			}
			switch {
			case len(vals) == 1 && v.DefinitionLevel() == maxDef-2:
				listValid = false
			case len(vals) == 1 && v.DefinitionLevel() == maxDef-1:
				// empty list
			default:
				for _, e := range vals {
					list = append(list, e.Int64())
				}
			}
		}
		switch name := c.Name; {
		case name == "row_id":
			r.RowID = v.Int64()
		case name == "user_id":
			r.UserID = v.Int64()
		case name == "item_id":
			r.ItemID = v.Int64()
		case name == "label":
			r.Label = v.Int32()
		case name == "query":
			r.Query = string(v.ByteArray())
		case name == "dense_opt":
			if !null {
				r.DenseOpt, r.DenseOptValid = v.Float(), true
			}
		case name == "cat_opt":
			if !null {
				r.CatOpt, r.CatOptValid = v.Int64(), true
			}
		case name == "seq_opt":
			r.SeqOpt, r.SeqOptValid = list, listValid
		case name == "query_opt":
			if !null {
				r.QueryOpt, r.QueryOptValid = string(v.ByteArray()), true
			}
		case c.Physical == "FLOAT":
			r.Dense = append(r.Dense, v.Float())
		case c.List:
			r.Seqs = append(r.Seqs, list)
		case c.Physical == "INT64":
			r.Cats = append(r.Cats, v.Int64())
		default:
			err = fmt.Errorf("unexpected column %s", name)
		}
		return err == nil
	})
	return r, err
}

// diffRow describes how got differs from want, or returns "".
func diffRow(got, want datagen.Row) string {
	eq := func(a, b []int64) bool { return len(a) == len(b) && (len(a) == 0 || slices.Equal(a, b)) }
	switch {
	case got.RowID != want.RowID:
		return fmt.Sprintf("row_id %d, want %d", got.RowID, want.RowID)
	case got.UserID != want.UserID:
		return fmt.Sprintf("user_id %d, want %d", got.UserID, want.UserID)
	case got.ItemID != want.ItemID:
		return fmt.Sprintf("item_id %d, want %d", got.ItemID, want.ItemID)
	case got.Label != want.Label:
		return fmt.Sprintf("label %d, want %d", got.Label, want.Label)
	case !slices.Equal(got.Dense, want.Dense):
		return fmt.Sprintf("dense %v, want %v", got.Dense, want.Dense)
	case !slices.Equal(got.Cats, want.Cats):
		return fmt.Sprintf("cats %v, want %v", got.Cats, want.Cats)
	case len(got.Seqs) != len(want.Seqs):
		return fmt.Sprintf("%d seqs, want %d", len(got.Seqs), len(want.Seqs))
	case got.Query != want.Query:
		return fmt.Sprintf("query %q, want %q", got.Query, want.Query)
	case got.DenseOpt != want.DenseOpt || got.DenseOptValid != want.DenseOptValid:
		return fmt.Sprintf("dense_opt %v/%v, want %v/%v", got.DenseOpt, got.DenseOptValid, want.DenseOpt, want.DenseOptValid)
	case got.CatOpt != want.CatOpt || got.CatOptValid != want.CatOptValid:
		return fmt.Sprintf("cat_opt %v/%v, want %v/%v", got.CatOpt, got.CatOptValid, want.CatOpt, want.CatOptValid)
	case !eq(got.SeqOpt, want.SeqOpt) || got.SeqOptValid != want.SeqOptValid:
		return fmt.Sprintf("seq_opt %v/%v, want %v/%v", got.SeqOpt, got.SeqOptValid, want.SeqOpt, want.SeqOptValid)
	case got.QueryOpt != want.QueryOpt || got.QueryOptValid != want.QueryOptValid:
		return fmt.Sprintf("query_opt %q/%v, want %q/%v", got.QueryOpt, got.QueryOptValid, want.QueryOpt, want.QueryOptValid)
	}
	for j := range got.Seqs {
		if !eq(got.Seqs[j], want.Seqs[j]) {
			return fmt.Sprintf("seq_%d %v, want %v", j, got.Seqs[j], want.Seqs[j])
		}
	}
	return ""
}

// checkRows checks that rows hold each row id of cfg exactly once, in
// order, with the values Expected gives.
func checkRows(t testing.TB, cfg datagen.Config, rows []datagen.Row) {
	t.Helper()
	if int64(len(rows)) != cfg.Rows {
		t.Fatalf("read %d rows, want %d", len(rows), cfg.Rows)
	}
	g := datagen.NewGenerator(cfg)
	var want datagen.Row
	for i, got := range rows {
		g.Fill(int64(i), &want)
		if d := diffRow(got, want); d != "" {
			t.Fatalf("row %d: %s", i, d)
		}
	}
}

func parquetOpen(f *os.File, size int64) (*parquet.File, error) { return parquet.OpenFile(f, size) }

// readAllPages reads every value of every page of path and returns the
// first error.
func readAllPages(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return err
	}
	for _, rg := range pf.RowGroups() {
		for _, cc := range rg.ColumnChunks() {
			pages := cc.Pages()
			for {
				p, err := pages.ReadPage()
				if err == io.EOF {
					break
				}
				if err != nil {
					pages.Close()
					return err
				}
				vals := make([]parquet.Value, p.NumValues())
				if _, err := p.Values().ReadValues(vals); err != nil && err != io.EOF {
					pages.Close()
					return err
				}
				parquet.Release(p)
			}
			pages.Close()
		}
	}
	return nil
}
