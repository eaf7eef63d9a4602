package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lastmile/lastmile/decode"
	"github.com/lastmile/lastmile/iceberg/icebergtest"
	"github.com/parquet-go/parquet-go"
)

// TestSchema: `lastmile schema` lists a table's columns by the names a
// spec uses (a struct's fields, a map's keys and values), with their
// types, and the columns it cannot read with what to do; given a spec,
// its hashed columns read as ids.
func TestSchema(t *testing.T) {
	dir := t.TempDir()
	type row struct {
		RowID int64 `parquet:"row_id"`
		User  struct {
			Age *int32 `parquet:"age,optional"`
		} `parquet:"user"`
		Tags   []string          `parquet:"tags,list"`
		Scores map[int64]float32 `parquet:"scores"`
	}
	path := filepath.Join(dir, "t.parquet")
	if err := parquet.WriteFile(path, []row{{RowID: 1, Tags: []string{"a"}, Scores: map[int64]float32{3: 0.5}}}); err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(specPath, []byte("version: 1\ninputs: [t.parquet]\nbatch: {size: 8}\nhashed: {tags: 1000}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{path}, []string{
			"1 file, 1 rows, 1 units",
			"row_id        int64",
			"user.age      int32",
			"scores.key    list<int64>",
			"scores.value  list<float32>",
			"not read (left out of every column; naming one is an error):",
			"tags: a list of strings, which a batch cannot hold; read it as ids with hashed: {tags: N} in the job spec",
		}},
		{[]string{specPath}, []string{"tags          list<int64>", "strings hashed mod 1000"}},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), append([]string{"schema"}, tc.args...), &out, &errb); code != 0 {
			t.Fatalf("schema %v: exit %d: %s", tc.args, code, errb.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("schema %v: no %q in\n%s", tc.args, w, out.String())
			}
		}
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"schema", "-json", path}, &out, &errb); code != 0 {
		t.Fatalf("schema -json: exit %d: %s", code, errb.String())
	}
	var got struct {
		Fields     []struct{ Name string }
		Unreadable []struct{ Name, Why string }
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got.Fields) != 4 || len(got.Unreadable) != 1 {
		t.Fatalf("schema -json: %v: %s", err, out.String())
	}
}

// TestSchemaRenamed: an Iceberg table's column renamed after its files
// were written is listed by its new name, with the name the files have,
// and a column added since, which no file has yet, as null in every row.
func TestSchemaRenamed(t *testing.T) {
	tab, err := icebergtest.New(filepath.Join(t.TempDir(), "events"), icebergtest.Layout{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tab.Append([]icebergtest.Row{{ID: 1, Part: "a", Key: 2, Score: 0.5}}); err != nil {
		t.Fatal(err)
	}
	if _, err := tab.Rename("score", "rating"); err != nil {
		t.Fatal(err)
	}
	meta, err := tab.AddColumns() // weight and tags, in no data file yet
	if err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(spec, []byte("version: 1\ninputs: [\"iceberg:"+meta+"\"]\nbatch: {size: 8}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"schema", spec}, &out, &errb); code != 0 {
		t.Fatalf("schema: exit %d: %s", code, errb.String())
	}
	for _, w := range []string{"rating  float64", "named score in the first file", "list<int64>", "in no file yet (added since): every row null"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("no %q in\n%s", w, out.String())
		}
	}
}

// TestFieldFrom: what lastmile schema says a column is read from, where
// that is not plain.
func TestFieldFrom(t *testing.T) {
	tests := []struct {
		name string
		f    decode.Field
		want string
	}{
		{"plain", decode.Field{Name: "x", Path: []string{"x"}}, ""},
		{"a struct's member", decode.Field{Name: "u.age", Path: []string{"u", "age"}}, "parquet u.age"},
		{"hashed", decode.Field{Name: "s", Path: []string{"s"}, Hash: 1000}, "strings hashed mod 1000"},
		{"renamed", decode.Field{Name: "rating", Path: []string{"score"}, StoredAs: "score"}, "named score in the first file"},
	}
	for _, tc := range tests {
		if got := fieldFrom(tc.f); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestSchemaChanged: lastmile schema says in how many of an Iceberg
// table's files a column added or promoted since they were written
// reads as nulls or is widened, or its dates read as instants.
func TestSchemaChanged(t *testing.T) {
	added, err := icebergtest.New(filepath.Join(t.TempDir(), "added"), icebergtest.Layout{ByPart: true})
	if err != nil {
		t.Fatal(err)
	}
	promoted, err := icebergtest.New(filepath.Join(t.TempDir(), "promoted"), icebergtest.Layout{ByPart: true, FloatScore: true})
	if err != nil {
		t.Fatal(err)
	}
	migrated, err := icebergtest.New(filepath.Join(t.TempDir(), "migrated"), icebergtest.Layout{ByPart: true, Hive: true})
	if err != nil {
		t.Fatal(err)
	}
	native := func() (string, error) { migrated.NativeWrites(); return "", nil }
	dated, err := icebergtest.New(filepath.Join(t.TempDir(), "dated"), icebergtest.Layout{ByPart: true, Dated: true, FormatVersion: 3})
	if err != nil {
		t.Fatal(err)
	}
	rows := func(from int64) []icebergtest.Row {
		return []icebergtest.Row{{ID: from, Part: "a", Score: 0.5}, {ID: from + 1, Part: "b", Score: 1.5}}
	}
	for _, tc := range []struct {
		name   string
		tab    *icebergtest.Table
		change func() (string, error)
		want   string
	}{
		{"added", added, added.AddColumns, "added since 2 of 4 files were written: null there"},
		{"promoted", promoted, promoted.PromoteScore, "stored as FLOAT in 2 of 4 files (promoted since): widened"},
		{"dated", dated, dated.PromoteDay, "timestamp in microseconds; stored as INT32 in 2 of 4 files (dates, a timestamp since): each day's first instant, in microseconds"},
		{"migrated", migrated, native, "timestamp in microseconds; stored as INT96 in 2 of 4 files (as Hive and Spark wrote timestamps): read as microseconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := tc.tab.Append(rows(0)); err != nil {
				t.Fatal(err)
			}
			if _, err := tc.change(); err != nil {
				t.Fatal(err)
			}
			if _, _, err := tc.tab.Append(rows(2)); err != nil {
				t.Fatal(err)
			}
			spec := filepath.Join(t.TempDir(), "job.yaml")
			if err := os.WriteFile(spec, []byte("version: 1\ninputs: [\"iceberg:"+tc.tab.MetadataPath()+"\"]\nbatch: {size: 8}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			if code := run(context.Background(), []string{"schema", spec}, &out, &errb); code != 0 {
				t.Fatalf("schema: exit %d: %s", code, errb.String())
			}
			if !strings.Contains(out.String(), tc.want) {
				t.Errorf("no %q in\n%s", tc.want, out.String())
			}
		})
	}
}
