package ops_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/lastmile/lastmile/column"
	"github.com/lastmile/lastmile/ops"
	"github.com/lastmile/lastmile/spec"
)

func joinTables(t *testing.T) (ints, strings string) {
	dir := t.TempDir()
	ints = filepath.Join(dir, "ints.parquet")
	writeTable(t, ints, []intRow{
		{ID: 2, Score: ptr[int64](20), Tag: "two"},
		{ID: 4, Score: nil, Tag: "four"},
		{ID: 7, Score: ptr[int64](70), Tag: "seven"},
		{ID: -1, Score: ptr[int64](-10), Tag: ""},
	})
	strings = filepath.Join(dir, "strs.parquet")
	writeTable(t, strings, []strRow{{Name: "alice", Score: 1.5}, {Name: "bob", Score: 2.5}, {Name: "", Score: 9}})
	return ints, strings
}

func TestJoin(t *testing.T) {
	ints, strsPath := joinTables(t)
	b := batchOf(
		i64col("user", []int64{1, 2, 3, 4, 7, 0, -1}, []byte{1, 1, 1, 1, 1, 0, 1}),
		i32col("user32", []int32{1, 2, 3, 4, 7, 0, -1}, nil),
		strcol("name", []string{"alice", "carol", "", "bob", "alice", "x", "bob"}, []byte{1, 1, 1, 1, 1, 0, 1}),
		i64col("row", []int64{0, 1, 2, 3, 4, 5, 6}, nil),
	)
	cases := []struct {
		name string
		op   string
		want []int64 // rows kept
	}{
		{"semi int", fmt.Sprintf("- join: {kind: semi, table: %s, on: user, table_key: id}", ints), []int64{1, 3, 4, 6}},
		{"anti int (a null key is not in the table)", fmt.Sprintf("- join: {kind: anti, table: %s, on: user, table_key: id}", ints), []int64{0, 2, 5}},
		{"semi int32 rows against int64 table", fmt.Sprintf("- join: {kind: semi, table: %s, on: user32, table_key: id}", ints), []int64{1, 3, 4, 6}},
		{"semi string", fmt.Sprintf("- join: {kind: semi, table: %s, on: name}", strsPath), []int64{0, 2, 3, 4, 6}},
		{"anti string", fmt.Sprintf("- join: {kind: anti, table: %s, on: name}", strsPath), []int64{1, 5}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := compile(t, b, "", tc.op)
			if got := ints2(t, run(t, p, b), "row"); !slices.Equal(got, tc.want) {
				t.Errorf("kept rows %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("left int", func(t *testing.T) {
		p := compile(t, b, "", fmt.Sprintf("- join: {kind: left, table: %s, on: user, table_key: id, columns: [score, tag]}", ints))
		out := run(t, p, b)
		if got := ints2(t, out, "score"); !slices.Equal(got, []int64{0, 20, 0, 0, 70, 0, -10}) {
			t.Errorf("score %v", got)
		}
		if got := valid(t, out, "score"); !slices.Equal(got, []byte{0, 1, 0, 0, 1, 0, 1}) {
			t.Errorf("score validity %v (row 3 matches a null score)", got)
		}
		if got := strs(t, out, "tag"); !slices.Equal(got, []string{"", "two", "", "four", "seven", "", ""}) {
			t.Errorf("tag %q", got)
		}
		if got := valid(t, out, "tag"); !slices.Equal(got, []byte{0, 1, 0, 1, 1, 0, 1}) {
			t.Errorf("tag validity %v", got)
		}
		o := p.Output()
		if o[4].Name != "score" || !o[4].Nullable || o[5].Kind != column.Bytes {
			t.Errorf("output %+v", o)
		}
	})
	t.Run("left string", func(t *testing.T) {
		p := compile(t, b, "", fmt.Sprintf("- join: {kind: left, table: %s, on: name, columns: [score]}", strsPath))
		out := run(t, p, b)
		if got := floats(t, out, "score"); !slices.Equal(got, []float64{1.5, 0, 9, 2.5, 1.5, 0, 2.5}) {
			t.Errorf("score %v", got)
		}
	})
}

// ints2 is ints that tolerates a nullable column.
func ints2(t *testing.T, b *column.Batch, name string) []int64 { return ints(t, b, name) }

func TestJoinErrors(t *testing.T) {
	ints, strsPath := joinTables(t)
	dup := filepath.Join(t.TempDir(), "dup.parquet")
	writeTable(t, dup, []intRow{{ID: 1}, {ID: 5}, {ID: 1}})
	b := batchOf(i64col("user", []int64{1}, nil), strcol("name", []string{"a"}, nil), f32col("x", []float32{1}, nil))
	cases := []struct{ op, want string }{
		{fmt.Sprintf("- join: {kind: semi, table: %s, on: usr, table_key: id}", ints), `6: pipeline[0].join.on: unknown column "usr" (did you mean "user"?)`},
		{fmt.Sprintf("- join: {kind: semi, table: %s, on: x, table_key: id}", ints), `pipeline[0].join.on: column "x" is float32; a join key must be an integer or string column`},
		{fmt.Sprintf("- join: {kind: semi, table: %s, on: user}", ints), `pipeline[0].join.table_key: side table ` + ints + ` has no column "user"`},
		{fmt.Sprintf("- join: {kind: semi, table: %s, on: user, table_key: idd}", ints), `has no column "idd" (did you mean "id"?)`},
		{fmt.Sprintf("- join: {kind: semi, table: %s, on: user, table_key: name}", strsPath), `pipeline[0].join.table_key: the rows' key "user" is int64 but the side table's "name" is string`},
		{fmt.Sprintf("- join: {kind: left, table: %s, on: user, table_key: id, columns: [scor]}", ints), `pipeline[0].join.columns: side table ` + ints + ` has no column "scor" (did you mean "score"?)`},
		{fmt.Sprintf("- join: {kind: left, table: %s, on: name, columns: [score, score]}", strsPath), `column "score" listed twice`},
		{fmt.Sprintf("- join: {kind: left, table: %s, on: user, table_key: id, columns: [user]}", dup), `has no column "user"`},
		{fmt.Sprintf("- join: {kind: left, table: %s, on: user, table_key: id}", dup), `pipeline[0].join.table: side table ` + dup + ` has key 1 twice (table rows 0 and 2); a left join needs unique keys`},
		{"- join: {kind: semi, table: /nonexistent/t.parquet, on: user}", `pipeline[0].join.table: side table /nonexistent/t.parquet: plan:`},
		{fmt.Sprintf("- join: {kind: semi, table: %s, on: user, table_key: id, max_memory: 100}", ints), `pipeline[0].join.max_memory: side table ` + ints + ` needs 160 bytes, over max_memory 100 bytes`},
	}
	for _, tc := range cases {
		_, err := ops.Compile(context.Background(), job(t, "", tc.op), fieldsOf(b), ops.Env{})
		wantErr(t, err, tc.want)
		if _, ok := err.(*spec.FieldError); !ok {
			t.Errorf("%T, want *spec.FieldError", err)
		}
	}
	// A semi join does not care about duplicates.
	compile(t, b, "", fmt.Sprintf("- join: {kind: semi, table: %s, on: user, table_key: id}", dup))
	// A left join adding a column the rows have already.
	b2 := batchOf(i64col("user", []int64{1}, nil), i64col("score", []int64{1}, nil))
	_, err := ops.Compile(context.Background(), job(t, "", fmt.Sprintf("- join: {kind: left, table: %s, on: user, table_key: id, columns: [score]}", ints)), fieldsOf(b2), ops.Env{})
	wantErr(t, err, `column "score" is already in the rows; rename or drop it before the join`)
}

func TestJoinMaxMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.parquet")
	rows := make([]intRow, 100_000)
	for i := range rows {
		rows[i] = intRow{ID: int64(i) * 3, Tag: "t"}
	}
	writeTable(t, path, rows)
	b := batchOf(i64col("user", []int64{3, 4, 6}, nil))
	// 100k int64 keys and 262144 slots of 8 bytes: about 2.9MB.
	_, err := ops.Compile(context.Background(), job(t, "", fmt.Sprintf("- join: {kind: anti, table: %s, on: user, table_key: id, max_memory: 1MiB}", path)), fieldsOf(b), ops.Env{})
	wantErr(t, err, "over max_memory 1.0MiB (1048576 bytes); raise max_memory or filter the table")
	p := compile(t, b, "", fmt.Sprintf("- join: {kind: anti, table: %s, on: user, table_key: id, max_memory: 8MiB}", path))
	if got := ints(t, run(t, p, b), "user"); !slices.Equal(got, []int64{4}) {
		t.Errorf("kept %v", got)
	}
}
